"""The faults, liveness and availability checkers read a ColumnHistory as they read its dicts:
the same result, listed items in the same order, the same error for a history they refuse."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given, settings

from checker import faults
from checker.availability import AvailabilityChecker
from checker.faults import FaultsChecker
from checker.liveness import LivenessChecker
from checker.process_ops import by_process
from harness.core.checks import Shared, check_safe
from harness.core.columns import Columns
from harness.core.run_history import ColumnHistory, merged_columns
from tests.fault_histories import MS, fault_histories

CHECKS = [
    ("faults", FaultsChecker.check, {}),
    ("faults-no-release-wait", FaultsChecker.check, {"release_waits": False}),
    ("faults-asked", FaultsChecker.check, {"asked": ["pause"]}),
    ("liveness", LivenessChecker.check, {"ttl": 0.5, "acquire_timeout": 1.0}),
    ("availability", AvailabilityChecker.check, {"ttl": 0.5}),
]


def both(ops: list[dict[str, Any]]) -> tuple[Shared, ColumnHistory]:
    h = merged_columns(ops)
    assert h is not None
    return Shared(ops), h


def results(ops: list[dict[str, Any]]) -> list[tuple[dict[str, Any], dict[str, Any]]]:
    dicts, cols = both(ops)
    return [(check_safe(fn, dicts, dict(params)), check_safe(fn, cols, dict(params)))
            for _name, fn, params in CHECKS]


@settings(max_examples=400, deadline=None)
@given(fault_histories())
def test_each_checker_reads_columns_as_it_reads_dicts(ops: list[dict[str, Any]]) -> None:
    if merged_columns(ops) is None:
        return
    for want, got in results(ops):
        assert got == want
        assert list(got) == list(want)  # the same keys in the same order


def op(t: int, p: Any, ty: str, f: str, **kw: Any) -> dict[str, Any]:
    return {"time": t * MS, "process": p, "type": ty, "f": f, "value": None, **kw}


def fault(f: str, t0: int, t1: int, expect: dict[str, Any]) -> list[dict[str, Any]]:
    return [op(t0, "nemesis", "invoke", f, value="start", step=0, targets=["c0"]),
            op(t0, "nemesis", "info", f, value="start", step=0, targets=["c0"], expect=expect),
            op(t1, "nemesis", "invoke", f, value="stop", step=0, targets=["c0"]),
            op(t1, "nemesis", "info", f, value="stop", step=0, targets=["c0"])]


def indexed(ops: list[dict[str, Any]]) -> list[dict[str, Any]]:
    ops = sorted(ops, key=lambda o: o["time"])
    return [{"index": i, **o} for i, o in enumerate(ops)]


def test_a_bitten_and_a_missed_window_are_told_apart_on_columns() -> None:
    """Process 0 recorded ops inside a pause (missed) and completed an acquire inside a
    partition (missed); process 1 kept quiet under its own pause (bit)."""
    ops = indexed([
        *fault("pause", 10, 40, {"frozen": [0]}),
        op(20, 0, "invoke", "acquire"), op(25, 0, "ok", "acquire"),
        *fault("partition", 50, 90, {"cut-off": [0]}),
        op(60, 0, "invoke", "release"), op(70, 0, "ok", "release"),
        op(5, 1, "invoke", "acquire"), op(95, 1, "fail", "acquire", error="timeout"),
    ])
    dicts, cols = both(ops)
    want = FaultsChecker.check(dicts)
    got = FaultsChecker.check(cols)
    assert got == want
    assert got["valid"] == "unknown" and got["ineffective-count"] == 2
    assert [x["fault"] for x in got["ineffective"]] == ["pause", "partition"]
    assert "recorded 2 op(s)" in got["ineffective"][0]["explanation"]


def test_a_window_reads_only_the_ops_around_it(monkeypatch: pytest.MonkeyPatch) -> None:
    """The columnar path makes dicts of the ops inside the window and the one before."""
    ops = indexed([op(t, 0, ty, "acquire") for t, ty in
                   zip(range(0, 100), ["invoke", "ok"] * 50, strict=True)])
    cols = merged_columns(ops)
    assert cols is not None
    made: list[int] = []
    real = Columns.op

    def counted(self: Columns, i: int) -> dict[str, Any]:
        made.append(int(i))
        return real(self, i)

    monkeypatch.setattr(Columns, "op", counted)
    procs = by_process(cols)
    assert procs is not None
    calls = faults.lock_calls(procs[0][0], 40 * MS, 46 * MS, faults.LOCK_FS)
    assert [(a["time"] // MS, b["time"] // MS) for a, b in calls] == [(42, 43), (44, 45)]
    assert made == list(range(40, 46))  # 41..45 inside, 40 before them
    assert faults.in_flight(procs[0][0], 44 * MS, faults.LOCK_FS)
    assert not faults.in_flight(procs[0][0], 45 * MS, faults.LOCK_FS)


def test_a_refused_history_is_refused_alike() -> None:
    """An op of a crashed client after its crash: Lives refuses it, on columns too, in the
    same words."""
    ops = indexed([op(1, 0, "invoke", "acquire"), op(2, 0, "ok", "acquire"),
                   op(3, "nemesis", "info", "crash-client", value="start", targets=["c0"],
                      detail={"crashed": True}),
                   op(4, 0, "invoke", "release"), op(5, 0, "ok", "release"),
                   *fault("delay", 0, 9, {"completes": [0]})])
    for want, got in results(ops):
        assert got == want
    _dicts, cols = both(ops)
    with pytest.raises(ValueError, match="comes after its crash"):
        LivenessChecker.check(cols)
    assert check_safe(LivenessChecker.check, cols, {})["valid"] == "unknown"


def test_the_one_path_gives_what_the_dict_path_gave() -> None:
    """The checkers on 80 histories drawn by :func:`fault_histories` (seed 44; as a list of
    dicts, and in a run's columns) give what the walk over each process's dicts gave them at
    fc2df38, before it went: the digests of its results are the oracle."""
    import copy
    import hashlib
    import json
    from pathlib import Path

    oracle = Path(__file__).parent / "data" / "faults_oracle.jsonl"
    for n, line in enumerate(oracle.read_text().splitlines()):
        row = json.loads(line)
        for h in (Shared(copy.deepcopy(row["ops"])), merged_columns(copy.deepcopy(row["ops"]))):
            got = [check_safe(fn, h, dict(params)) for _name, fn, params in CHECKS]
            assert hashlib.sha256(json.dumps(got).encode()).hexdigest()[:16] == row["results"], n
