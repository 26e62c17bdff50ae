"""Faults in words: what ran, on whom, when, for how long ("a +60 s clock jump on n1,n2,n3 at
3.1 s", in the words of the fault's own nemesis), and what a shrunk schedule left out of the
failure it came from ("the first failure had 7 faults over 28 s; this one has 1, ..."). Pure:
functions of recorded facts.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from harness.controller.registry import default_registry
from harness.core.fault_run import FaultRun, generic_words
from harness.core.history import INFO, Op, seconds
from harness.core.history_parts import nemesis_ops

__all__ = ["FaultRun", "describe", "fault_runs", "from_record", "removed", "step_outcomes"]


def fault_runs(history: Sequence[Op]) -> list[FaultRun]:
    """The faults that ran, from the nemesis ops of a history (a start that failed never
    ran): each from when it took effect (its start's completion: a pause that aimed at a
    holder that had let go struck another client then) to its stop's completion, or the
    final heal. The one start time of a fault the report shows everywhere; ``began``, its
    start's invocation, is when it may have begun to bite (what was on then asks it)."""
    out: list[FaultRun] = []
    open_: dict[tuple[str, Any], int] = {}
    asked: dict[tuple[str, Any], float] = {}  # a start invoked, not yet completed
    for op in nemesis_ops(history):
        f, value = str(op.get("f")), op.get("value")
        key = (f, op.get("step"))
        if op.get("type") != INFO:
            if value == "start":
                asked[key] = seconds(op["time"])
            continue
        if value == "start" and not op.get("error"):
            targets = tuple(str(t) for t in op.get("targets") or [])
            detail = op.get("detail") if isinstance(op.get("detail"), Mapping) else None
            step = op.get("step") if isinstance(op.get("step"), int) else None
            role = op.get("target") if isinstance(op.get("target"), str) else None
            open_[key] = len(out)
            start = seconds(op["time"])
            out.append(FaultRun(f, step, role, targets, start, None, detail, asked.pop(key, None)))
        elif value == "stop" and key in open_:
            i = open_.pop(key)
            out[i] = _closed(out[i], seconds(op["time"]), op.get("detail"))
        elif value == "heal":
            for k in [k for k in open_ if k[0] == f]:
                i = open_.pop(k)
                out[i] = _closed(out[i], seconds(op["time"]))
    return out


def _closed(run: FaultRun, stop: float, detail: Any = None) -> FaultRun:
    """``run`` healed at ``stop``; what its stop repaired (``repaired``: a node restarted
    after a kill, see :func:`nemesis.process_faults.restart`) joins its detail, nothing else
    of the stop's (a clock's stop says offset 0: the fault was its start's)."""
    details = dict(run.detail or {})
    if isinstance(detail, Mapping) and isinstance(detail.get("repaired"), Mapping):
        details["repaired"] = {**(details.get("repaired") or {}), **detail["repaired"]}
    return FaultRun(run.f, run.step, run.role, run.targets, run.start, stop,
                    details if details or run.detail is not None else None, run.began)


def from_record(record: Mapping[str, Any]) -> FaultRun:
    """A fault as test.json keeps it (``faults``: step, f, target, targets, start: when it
    took effect, stop)."""
    stop, began = record.get("stop"), record.get("began")
    detail = record.get("detail")
    start = record.get("start")
    return FaultRun(str(record.get("f")), record.get("step"), record.get("target"),
                    tuple(str(t) for t in record.get("targets") or []),
                    float(start or 0.0),
                    float(stop) if isinstance(stop, int | float) else None,
                    detail if isinstance(detail, Mapping) else None,
                    float(began) if isinstance(began, int | float) else None)


def nemesis_of(f: str) -> type | None:
    """The nemesis class of a recorded fault, by its registered name (a history never names
    code to import); None when it is not installed here."""
    return default_registry().installed("nemeses", f)


def describe(run: FaultRun) -> str:
    """``a +60 s clock jump on n1,n2,n3 at 3.1 s for 2.5 s``: the words of the fault's own
    nemesis, or the generic ones when it is not installed here."""
    words = getattr(nemesis_of(run.f), "describe", None)
    return str(words(run)) if callable(words) else generic_words(run)


def span(runs: Sequence[FaultRun]) -> float:
    """Seconds from the first fault's start to the last one's heal."""
    if not runs:
        return 0.0
    end = max((r.stop if r.stop is not None else r.start) for r in runs)
    return max(0.0, end - min(r.start for r in runs))


def faults_phrase(n: int) -> str:
    return f"{n} fault" + ("" if n == 1 else "s")


def removed(first: Sequence[FaultRun], minimal: Sequence[FaultRun],
            first_skipped: int = 0) -> str:
    """What shrinking took away: ``the first failure had 7 faults over 28 s; this one has 1,
    a +60 s clock jump on n1,n2,n3 at 3.1 s``."""
    had = f"the first failure had {faults_phrase(len(first))} over {span(first):.0f} s"
    if first_skipped:
        had += f" (and {first_skipped} planned step(s) that did not run)"
    if not minimal:
        return f"{had}; this one has none: the lock fails with no fault at all"
    parts = [describe(r) for r in minimal]
    if len(parts) == 1:
        return f"{had}; this one has 1, {parts[0]}"
    return f"{had}; this one has {len(parts)}: " + ", then ".join(parts)



def step_outcomes(test: Mapping[str, Any]) -> list[tuple[int, Mapping[str, Any], str]]:
    """Each planned step of a run's schedule (test.json) with what became of it: when it ran
    and what its role resolved to, or why it was skipped."""
    schedule = test.get("schedule")
    plan = schedule.get("steps") if isinstance(schedule, Mapping) else None
    if not isinstance(plan, list):
        return []
    ran = {f.get("step"): f for f in test.get("faults") or [] if isinstance(f, Mapping)}
    skipped = {s.get("step"): s for s in test.get("skipped-steps") or []
               if isinstance(s, Mapping)}
    out = []
    for i, step in enumerate(plan):
        if not isinstance(step, Mapping):
            continue
        if i in ran:
            f = ran[i]
            stop = f.get("stop")
            what = (f"ran {float(f.get('start') or 0):.2f}-"
                    + (f"{float(stop):.2f} s" if isinstance(stop, int | float) else "... s")
                    + f" on {','.join(map(str, f.get('targets') or [])) or '?'}")
            detail = f.get("detail")
            missed = detail.get("missed") if isinstance(detail, Mapping) else None
            if missed:
                what += f" (missed {','.join(map(str, missed))})"
            if f.get("error"):
                what += f" (failed: {f['error']})"
        elif i in skipped:
            what = f"skipped at {skipped[i].get('at')} s: {skipped[i].get('why')}"
        else:
            what = "could not be applied (see the nemesis errors)"
        out.append((i, step, what))
    return out
