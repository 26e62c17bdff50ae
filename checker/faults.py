"""The faults checker: did every fault bite? A fault that did nothing is never a pass.

Each nemesis records, with a fault's start, what the history must show while it is on
(``expect``): ``frozen`` clients record nothing (a pause), ``cut-off`` clients complete no lock
operation (a partition of the client from the DB nodes: its lock requests cannot reach them).
A fault whose start failed (``error``) could not be injected at all. Either makes this check
``unknown``, with the reason in words: the run then proves nothing about that fault, whatever
the other checkers say. It is never ``False``: a fault that did not bite is the harness's (or
the plugin's) problem, not the lock's.

Pure function of the history.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, ClassVar

from harness.core.history import INFO, INVOKE, NEMESIS, OK, Op, seconds
from harness.core.text import show

LOCK_FS = frozenset({"acquire", "release", "extend", "reacquire", "rerelease"})
GRACE_NS = 5_000_000  # a signal lands within microseconds; 5 ms covers the journal's clock
MAX_LISTED = 20


@dataclass
class Window:
    f: str
    step: Any
    start: int
    stop: int
    targets: list[Any]
    expect: dict[str, Any] = field(default_factory=dict)


def windows(history: Sequence[Op]) -> tuple[list[Window], list[dict[str, Any]]]:
    """Each fault that started (from its start ``info`` to its stop ``invoke``, or the end of
    the history) and each fault start that failed."""
    end = max((op["time"] for op in history), default=0)
    open_: dict[tuple[str, Any], Window] = {}
    out: list[Window] = []
    failed: list[dict[str, Any]] = []
    for op in history:
        if op.get("process") != NEMESIS:
            continue
        key = (op["f"], op.get("step"))
        if op["value"] == "start" and op["type"] == INFO:
            if op.get("error"):
                failed.append({"fault": op["f"], "at": seconds(op["time"]),
                               "error": show(op["error"], 300)})
                continue
            expect = op.get("expect") if isinstance(op.get("expect"), dict) else {}
            w = Window(op["f"], op.get("step"), op["time"], end, list(op.get("targets") or []),
                       expect)
            open_[key] = w
            out.append(w)
        elif op["value"] == "stop" and op["type"] == INVOKE and key in open_:
            open_.pop(key).stop = op["time"]
    return out, failed


def _processes(claim: Any) -> list[int]:
    if not isinstance(claim, list):
        return []
    return [p for p in claim if isinstance(p, int) and not isinstance(p, bool)]


def check(history: Sequence[Op]) -> dict[str, Any]:
    faults, failed = windows(history)
    by_process: dict[int, list[Op]] = {}
    for op in history:
        p = op.get("process")
        if isinstance(p, int) and not isinstance(p, bool):
            by_process.setdefault(p, []).append(op)
    ineffective: list[dict[str, Any]] = []
    for w in faults:
        lo, hi = w.start + GRACE_NS, w.stop
        for p in _processes(w.expect.get("frozen")):
            ran = [op for op in by_process.get(p, []) if lo < op["time"] < hi]
            if ran:
                ineffective.append({
                    "fault": w.f, "process": p, "from": seconds(w.start),
                    "until": seconds(w.stop), "ops": len(ran),
                    "explanation": (f"{w.f} did not freeze process {p}: it recorded "
                                    f"{len(ran)} op(s) between {seconds(w.start):.2f} s and "
                                    f"{seconds(w.stop):.2f} s, while it should have been "
                                    f"stopped (first at {seconds(ran[0]['time']):.2f} s)")})
        for p in _processes(w.expect.get("cut-off")):
            done = completed_lock_ops(by_process.get(p, []), lo, hi)
            if done:
                ineffective.append({
                    "fault": w.f, "process": p, "from": seconds(w.start),
                    "until": seconds(w.stop), "ops": len(done),
                    "explanation": (f"{w.f} did not cut process {p} off: it completed "
                                    f"{len(done)} lock op(s) ({', '.join(sorted(set(done)))}) "
                                    f"between {seconds(w.start):.2f} s and "
                                    f"{seconds(w.stop):.2f} s, while its links to the DB "
                                    "nodes were cut (its connections do not come from its "
                                    "own address?)")})
    valid: bool | str = "unknown" if ineffective or failed else True
    result: dict[str, Any] = {
        "valid": valid,
        "fault-count": len(faults),
        "ineffective-count": len(ineffective),
        "ineffective": ineffective[:MAX_LISTED],
        "not-injected-count": len(failed),
        "not-injected": [{**f, "explanation": f"{f['fault']} could not be injected at "
                          f"{f['at']:.2f} s: {f['error']}"} for f in failed[:MAX_LISTED]],
    }
    if valid != True:  # noqa: E712 (valid is True or a string)
        result["note"] = ("a fault that did not bite (or was never injected) proves nothing: "
                          "the run's verdict can only be unknown or invalid")
    return result


def completed_lock_ops(ops: list[Op], lo: int, hi: int) -> list[str]:
    """The lock ops invoked after ``lo`` that completed ok before ``hi`` (their fs)."""
    out: list[str] = []
    pending: Op | None = None
    for op in ops:
        if op["type"] == INVOKE:
            pending = op
        elif pending is not None:
            if (pending["f"] in LOCK_FS and op["type"] == OK and pending["time"] > lo
                    and op["time"] < hi):
                out.append(pending["f"])
            pending = None
    return out


class FaultsChecker:
    name: ClassVar[str] = "faults"
    summary: ClassVar[str] = ("every fault bit: a paused client recorded nothing, a cut-off "
                              "client completed no lock op, every start was injected")
    check = staticmethod(check)
