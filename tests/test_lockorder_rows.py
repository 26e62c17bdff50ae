"""checker.lockorder_rows (a lock's part decided over arrays, its violation's witness made with
an object only for the calls it shows) against the same part's calls as objects
(checker.lockorder.check_part): the same result, to the byte, valid or invalid, on random lock
histories (overlaps, ties, unknown outcomes, grants to a second holder, changed completions)
held in columns as ``harness check`` reads them and as a run's dicts; malformed ones refused
alike; and the arrays really decide violations (not a path that always declines)."""

from __future__ import annotations

import contextlib
import random
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from checker import linearizable, lockorder, lockorder_rows
from checker.linearizable import check
from harness.core.columns import from_ops, well_formed
from tests.test_linearizable import Picker, load_bench, mutate, random_ops, simulated_ops
from tests.test_lockorder import spread

Op = dict[str, Any]
LOCK_MODELS = ("mutex", "fenced-mutex")


@pytest.fixture(autouse=True)
def strict(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(lockorder, "STRICT", True)
    monkeypatch.setattr(linearizable, "ROWS_FROM", 0)  # every history of dicts tried as arrays


@pytest.fixture
def decided(monkeypatch: pytest.MonkeyPatch) -> list[Any]:
    """What each part the arrays found a misfit in gave: its verdict, or None (declined: the
    objects then decided)."""
    out: list[Any] = []
    real = lockorder_rows._invalid

    def spy(*args: Any) -> Any:
        got = real(*args)
        out.append(None if got is None else got.valid)
        return got

    monkeypatch.setattr(lockorder_rows, "_invalid", spy)
    return out


def by_objects(history: Any, model: str) -> Any:
    """The check with every part's calls as objects (checker.lockorder.check_part, the
    search): the arrays declined."""
    real = lockorder_rows.check_rows
    lockorder_rows.check_rows = lambda *args: None  # type: ignore[assignment]
    try:
        return outcome(history, model)
    finally:
        lockorder_rows.check_rows = real


def outcome(history: Any, model: str) -> Any:
    """The result, or the error raised, as a comparable value."""
    try:
        return check(history, model)
    except Exception as e:  # refused alike: the same error
        return (type(e).__name__, str(e))


def columns(h: list[Op]) -> Any:
    """``h``'s client ops in columns, as ``harness check`` holds a plain file (each op's
    position its index; None when columns cannot hold them or they are malformed)."""
    ops = [{"index": i, **{k: op.get(k) for k in ("time", "process", "type", "f")},
            "lock": op.get("lock")}
           for i, op in enumerate(o for o in h if type(o["process"]) is int)]
    cols = from_ops(ops)
    if cols is None or not bool((cols.time[1:] >= cols.time[:-1]).all()) or not well_formed(
            cols):
        return None
    return cols


def locked(h: list[Op], rnd: random.Random) -> list[Op]:
    """``h`` with every client op on a named lock (one or two), as a run records them, or on
    none (as a Jepsen or Knossos history); each op's index its place, as a run numbers them
    (a history of dicts so numbered is made columns at check()'s entry)."""
    names = rnd.choice([["lock"], ["lock", "b"], [None]])
    return [{"index": i, **op} for i, op in enumerate(
        op if type(op["process"]) is not int else
        {k: v for k, v in op.items() if k != "lock"} if names == [None] else
        {**op, "lock": names[op["process"] % len(names)]} for op in h)]


@st.composite
def histories(draw: st.DrawFn) -> tuple[list[Op], str]:
    pick = Picker(draw=draw)
    name = LOCK_MODELS[pick.int(0, 3) // 3]  # mostly mutex (dicts: fenced stays objects)
    rnd = random.Random(pick.int(0, 2**31))
    if pick.int(0, 2):
        h = (simulated_ops if pick.int(0, 2) else random_ops)(name, pick)
        if pick.int(0, 1):
            h = mutate(h, rnd)
        h = spread(h) if pick.int(0, 3) else h  # a quarter keep their ties
    else:
        bench = load_bench()
        h = bench.mutex_history(pick.int(5, 300), pick.int(1, 6), pick.int(0, 10**6),
                                crash_rate=0.0, timeout_rate=rnd.random() * 0.5,
                                info_rate=rnd.random())
        if pick.int(0, 3):
            with contextlib.suppress(ValueError):  # no place to inject one
                h = bench.inject_violation(h, rnd.random())
    return locked(h, rnd), name


def spoil(h: list[Op], how: int, where: int) -> list[Op]:
    """``h`` malformed: a completion with no invocation, an invocation twice, a time gone
    back, a completion's f changed, an op with no type."""
    h = [dict(op) for op in h]
    if not h:
        return h
    i = where % len(h)
    op = h[i]
    if how == 1:
        op["type"] = "ok" if op["type"] == "invoke" else "invoke"
    elif how == 2:
        op["time"] = op["time"] - 10**9
    elif how == 3:
        op["f"] = "release" if op["f"] == "acquire" else "acquire"
    elif how == 4:
        del op["type"]
    elif how == 5:
        h.insert(i, dict(op))
    return h


SETTINGS = settings(max_examples=400, deadline=None,
                    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large,
                                           HealthCheck.function_scoped_fixture])


@SETTINGS
@given(drawn=histories(), how=st.integers(0, 12), where=st.integers(0, 10**6))
def test_the_arrays_give_the_objects_result(drawn: tuple[list[Op], str], how: int,
                                           where: int) -> None:
    """In columns and as dicts, valid, invalid and malformed (a third of them spoilt)."""
    h, name = drawn
    h = spoil(h, how, where) if how <= 5 else h
    cols = columns(h)
    if cols is not None:
        assert outcome(cols, name) == by_objects(cols, name)
    assert outcome(h, name) == by_objects(h, name)


def test_the_arrays_decide_violations(decided: list[Any]) -> None:
    """Not vacuous: the simulated lock service's grants inside another's section, in columns
    and as dicts, decided invalid over the arrays (the same result as the objects'), and
    valid histories too."""
    bench = load_bench()
    rnd = random.Random(7)
    verdicts = {True: 0, False: 0}
    for seed in range(60):
        h = bench.mutex_history(rnd.randint(50, 2000), rnd.randint(2, 8), seed,
                                crash_rate=0.0, timeout_rate=rnd.random() * 0.3,
                                info_rate=rnd.random())
        if seed % 4:
            with contextlib.suppress(ValueError):
                h = bench.inject_violation(h, rnd.random())
        h = locked(h, rnd)
        for history in (columns(h), h):
            assert history is not None
            result = check(history, "mutex")
            assert result == by_objects(history, "mutex")
            verdicts[result["valid"]] += 1
    assert verdicts[True] >= 20 and verdicts[False] >= 60, verdicts
    assert decided.count(False) >= 60, decided  # the invalid ones, over the arrays


def test_a_witness_over_the_arrays_names_the_injected_overlap(decided: list[Any]) -> None:
    """Its words and figures, as the objects give them, for a longer history."""
    bench = load_bench()
    h = bench.inject_violation(bench.mutex_history(20_000, 6, 3, crash_rate=0.0), 0.7)
    cols = columns(h)
    result = check(cols, "mutex")
    assert result == by_objects(cols, "mutex")
    assert decided == [False]
    w = result["witness"]
    assert result["valid"] is False and w["explanation"].count("acquired at") >= 2
    assert len(w["prefix"]) > 10_000
    assert w["linearization_from"] == len(w["prefix"]) - len(w["linearization"])


def test_an_index_no_int64_holds_leaves_the_witness_to_the_objects(decided: list[Any]) -> None:
    """A run's dicts whose index is past int64 (not its place): not made columns at the entry,
    the objects decide and their witness names that index."""
    bench = load_bench()
    h = locked(bench.inject_violation(bench.mutex_history(400, 4, 5, crash_rate=0.0), 0.6),
               random.Random(1))
    h[0] = {**h[0], "index": 2**70}
    result = check(h, "mutex")
    assert result == by_objects(h, "mutex")
    assert result["valid"] is False and 2**70 in result["witness"]["prefix"]
    assert decided == []
