"""A run's history of dicts made columns at check()'s entry (checker.linearizable._as_columns,
the ColumnHistory a run's merge gives) and checked as arrays (checker.lockorder_rows): the same
result as the calls as objects give, to the byte, valid or not (the witness of a violation
included); and the arrays are taken only where they give it (the mutex model, each op's index
its place, every call on a named lock or none where no op has a key)."""

from __future__ import annotations

import contextlib
import random
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from checker import linearizable, lockorder_rows
from checker.linearizable import check
from checker.models import get_model
from harness.core.columns import from_ops
from tests.test_linearizable import load_bench
from tests.test_lockorder import lock_history

Op = dict[str, Any]


@pytest.fixture
def taken(monkeypatch: pytest.MonkeyPatch) -> list[bool]:
    """Each check of a history made columns: True when the arrays decided every part, False
    when they declined one (its calls were then made objects). Every history of dicts is
    tried as columns (``ROWS_FROM`` 0)."""
    monkeypatch.setattr(linearizable, "ROWS_FROM", 0)
    out: list[bool] = []
    real_check, real_rows = linearizable._check, lockorder_rows.check_rows
    declined: list[bool] = []

    def rows(*args: Any) -> Any:
        got = real_rows(*args)
        declined.append(got is None)
        return got

    def spy(history: Any, m: Any, time_limit: Any, max_states: Any, paired: Any) -> Any:
        declined.clear()
        result = real_check(history, m, time_limit, max_states, paired)
        if paired is not None:
            out.append(not any(declined))
        return result

    monkeypatch.setattr(linearizable, "_check", spy)
    monkeypatch.setattr(lockorder_rows, "check_rows", rows)
    return out


def arrays(history: list[Op], model: str) -> Any:
    """The pairing of ``history`` made columns at the entry, or None (the objects check it)."""
    m = get_model(model)
    return linearizable._paired_run_columns(linearizable._as_columns(history, m), m)


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
    return [{**{"index": i, **op}, "index": i} for i, op in enumerate(out)]  # (its place)


@settings(max_examples=300, deadline=None,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(data=st.data())
def test_arrays_give_the_objects_result(data: st.DataObject) -> None:
    h = data.draw(lock_history("mutex"))
    rnd = random.Random(data.draw(st.integers(0, 2**32)))
    if data.draw(st.booleans()):
        h = run_like(h, rnd)
    else:  # each op's index its place, as a run numbers them
        h = [{**{"index": i, **op}, "index": i} for i, op in enumerate(h)]
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
    assert arrays(base, "mutex") is not None
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
        assert arrays(h, model) is None, why
        assert check(h, model) == by_objects(h, model), why
    assert taken == []
    # No lock name and no key (a Jepsen or Knossos lock history): one part, key None.
    assert arrays(no_lock, "mutex") is not None
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


def same_as_objects(seed: int, edit: Any) -> list[Op]:
    """The benchmark's history of ``seed`` (a grant injected when odd) changed by ``edit``
    (its ops, with their indexes, to the ops of the history, numbered by place), checked: the
    objects' result, valid or not. Returns the history checked."""
    h = load_bench().mutex_history(3000, 5, seed, crash_rate=0.0)
    if seed % 2:
        h = load_bench().inject_violation(h, 0.7)
    h = [{**{"index": i, **op}, "index": i} for i, op in enumerate(edit(h))]
    result = check(h, "mutex")
    assert result == by_objects(h, "mutex")
    assert result["valid"] is (seed % 2 == 0)
    return h


def test_a_plain_history_with_a_nemesis_is_made_columns_with_its_indexes(taken: list[bool]
                                                                         ) -> None:
    """The benchmark's plain ops (value null, or none) with a nemesis's ops between them: the
    plain columns (each client op's index its place in the whole history, each op as it was),
    the nemesis's ops dicts beside them, decided by the arrays with the objects' result."""
    rnd = random.Random(2)

    def paused(h: list[Op]) -> list[Op]:
        out: list[Op] = []
        for i, op in enumerate(h):  # (every third with no value at all)
            out.append({k: v for k, v in op.items() if k != "value"} if i % 3 == 0 else op)
            if rnd.random() < 0.02:
                out.append({"process": "nemesis", "type": "info", "f": "pause",
                            "time": op["time"], "value": None})
        return out

    for seed in range(4):
        h = same_as_objects(seed, paused)
        cols = linearizable._as_columns(h, get_model("mutex"))
        assert cols is not None and cols.others and cols.clients.index.tolist() == [
            op["index"] for op in h if op["process"] != "nemesis"]
        assert [cols[i] for i in range(len(h))] == h  # (each op as it was)
    assert taken == [True] * 4


def test_a_crash_recorded_by_the_nemesis_is_checked_in_columns(taken: list[bool]) -> None:
    """A client crashed after its last op (the nemesis's record): made columns all the same,
    its release at the crash added as the objects add it, the same result."""
    rnd = random.Random(5)

    def crashed(h: list[Op]) -> list[Op]:
        victim = rnd.choice(sorted({op["process"] for op in h}))
        last = max(i for i, op in enumerate(h) if op["process"] == victim)
        crash = {"process": "nemesis", "type": "info", "f": "kill", "value": None,
                 "time": h[last]["time"] + 1, "targets": [f"c{victim}"],
                 "detail": {"crashed": True}}
        at = next((i for i in range(last + 1, len(h)) if h[i]["time"] > crash["time"]), len(h))
        return [*h[:at], crash, *h[at:]]

    for seed in range(4):
        h = same_as_objects(seed, crashed)
        paired = arrays(h, "mutex")
        assert paired is not None and len(paired.crashes) == 1
    assert len(taken) == 4
