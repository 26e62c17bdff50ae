"""A run's history of dicts checked as arrays (checker.linearizable._paired_ops,
checker.lockorder_rows): the same result as the calls as objects give, to the byte, valid or
not (the witness of a violation included); and the arrays are taken only
where they give it (the mutex model, no crash, every call on a named lock)."""

from __future__ import annotations

import contextlib
import random
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from checker import linearizable
from checker.linearizable import check
from checker.models import get_model
from harness.core.columns import from_ops
from tests.test_linearizable import load_bench
from tests.test_lockorder import lock_history

Op = dict[str, Any]


@pytest.fixture
def taken(monkeypatch: pytest.MonkeyPatch) -> list[bool]:
    """Each check's arrays: True when they decided it, False when they declined (the objects
    then did). Every history of dicts is tried as arrays (``ROWS_FROM`` 0)."""
    monkeypatch.setattr(linearizable, "ROWS_FROM", 0)
    out: list[bool] = []
    real = linearizable._check

    def spy(*args: Any, **kwargs: Any) -> dict[str, Any] | None:
        result = real(*args, **kwargs)
        if kwargs.get("every_part"):
            out.append(result is not None)
        return result

    monkeypatch.setattr(linearizable, "_check", spy)
    return out


def by_objects(history: list[Op], model: str) -> dict[str, Any]:
    old = linearizable.ROWS_FROM
    linearizable.ROWS_FROM = 10**12
    try:
        return check(history, model)
    finally:
        linearizable.ROWS_FROM = old


def run_like(history: list[Op], rnd: random.Random) -> list[Op]:
    """``history`` as a run records it: values on the client ops, each on lock "lock", a
    nemesis's ops between them (no crash), the resource read back by one more process."""
    out: list[Op] = []
    session: dict[Any, int] = {}
    for op in history:
        op = {**op, "lock": "lock"}
        p = op["process"]
        if op["f"] == "acquire":
            if op["type"] == "invoke":
                session[p] = session.get(p, 0) + 1
                op["value"] = {"timeout": 5.0}
            elif op["type"] == "ok":
                op["value"] = {"session": session.get(p, 0), "validity": 2.0}
        elif op["f"] == "release":
            op["value"] = {"session": session.get(p, 0)}
        out.append(op)
        if rnd.random() < 0.01:
            kind = rnd.choice(["invoke", "info"])
            out.append({"process": "nemesis", "type": kind, "f": "pause", "time": op["time"],
                        "value": "start", "targets": ["c1"]})
    end = out[-1]["time"] if out else 0
    reader = 1 + max((op["process"] for op in out if isinstance(op["process"], int)), default=0)
    out += [{"process": reader, "type": "invoke", "f": "read", "time": end + 1, "value": None},
            {"process": reader, "type": "ok", "f": "read", "time": end + 2, "value": []}]
    return [{"index": i, **op} for i, op in enumerate(out)]


@settings(max_examples=300, deadline=None,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(data=st.data())
def test_arrays_give_the_objects_result(data: st.DataObject) -> None:
    h = data.draw(lock_history("mutex"))
    rnd = random.Random(data.draw(st.integers(0, 2**32)))
    if data.draw(st.booleans()):
        h = run_like(h, rnd)
    old = linearizable.ROWS_FROM
    linearizable.ROWS_FROM = 0
    try:
        fast = check(h, "mutex")
    finally:
        linearizable.ROWS_FROM = old
    assert fast == by_objects(h, "mutex")


def test_a_run_like_history_is_decided_by_the_arrays(taken: list[bool]) -> None:
    bench = load_bench()
    rnd = random.Random(3)
    for seed in range(12):
        h = run_like(bench.mutex_history(3000, 5, seed, crash_rate=0.0), rnd)
        result = check(h, "mutex")
        assert result == by_objects(h, "mutex")
        assert result["valid"] is True
    assert taken.count(True) >= 10  # (a few may hold a tie the arrays leave to the objects)


def test_a_violation_is_decided_by_the_arrays_with_the_objects_witness(taken: list[bool]
                                                                        ) -> None:
    bench = load_bench()
    rnd = random.Random(4)
    found = 0
    for seed in range(8):
        h = bench.mutex_history(3000, 5, seed, crash_rate=0.0)
        with contextlib.suppress(ValueError):
            h = run_like(bench.inject_violation(h, 0.8), rnd)
            result = check(h, "mutex")
            assert result["valid"] is False
            assert result == by_objects(h, "mutex")
            assert "witness" in result
            found += 1
    assert found >= 6
    assert taken == [True] * found


def test_what_the_arrays_do_not_hold_goes_to_the_objects(taken: list[bool]) -> None:
    bench = load_bench()
    base = run_like(bench.mutex_history(400, 4, 1, crash_rate=0.0), random.Random(1))
    assert linearizable._paired_ops(base, get_model("mutex")) is not None
    crash = {"process": "nemesis", "type": "info", "f": "kill", "time": base[-1]["time"] + 5,
             "targets": ["c1"], "detail": {"crashed": True}}
    no_lock = [dict(op) for op in base]
    del no_lock[0]["lock"], next(op for op in no_lock[1:] if op["process"] == no_lock[0][
        "process"])["lock"]
    end = no_lock[-1]["time"]
    keyed = [*no_lock, *({"index": len(no_lock) + k, "time": end + 1 + k, "process": 99,
                          "type": t, "f": "read", "value": None, "key": "k"}
                         for k, t in enumerate(("invoke", "ok")))]
    refused = {
        "fenced-mutex": (base, "fenced-mutex"),  # tokens: the arrays hold none
        "a crash": ([*base, crash], "mutex"),  # prepare adds a release at it
        "no lock name, a key": (keyed, "mutex"),  # the part's key may be a "key" field
        "a bool process": ([*base, {**base[0], "process": True}], "mutex"),
        "another process that is no int": ([*base, {**base[0], "process": "p1"}], "mutex"),
    }
    for why, (h, model) in refused.items():
        assert linearizable._paired_ops(h, get_model(model)) is None, why
        assert check(h, model) == by_objects(h, model), why
    assert taken == []
    # No lock name and no key (a Jepsen or Knossos lock history): one part, key None.
    assert linearizable._paired_ops(no_lock, get_model("mutex")) is not None
    unnamed = [{k: v for k, v in op.items() if k != "lock"} for op in base]
    for h in (no_lock, unnamed):
        assert check(h, "mutex") == by_objects(h, "mutex")
    # (no_lock's part "lock" has a release first, its acquire in the other part: objects)
    assert taken == [False, True]


def test_from_ops_refuses_what_columns_cannot_hold() -> None:
    ok = [{"time": 1, "process": 0, "type": "invoke", "f": "acquire", "lock": "lock"},
          {"time": 2, "process": 0, "type": "ok", "f": "acquire"}]
    cols = from_ops(ok)
    assert cols is not None
    assert cols.time.tolist() == [1, 2] and cols.locks[cols.lock[0]] == "lock"
    assert cols.locks[cols.lock[1]] is None and cols.index.tolist() == [0, 1]
    for field, bad in [("time", "soon"), ("time", None), ("time", 2**70), ("process", 1.5),
                       ("process", None), ("type", "done"), ("type", ["ok"]), ("f", 3),
                       ("lock", ["a"]), ("lock", 7)]:
        assert from_ops([ok[0], {**ok[1], field: bad}]) is None, (field, bad)
    assert from_ops([ok[0], {k: v for k, v in ok[1].items() if k != "f"}]) is None
