"""When a lock was wanted and when it was held, per lock: what liveness and availability read.

- An *attempt* is one ``acquire``: from its invocation to its completion (ok, fail or info),
  or, when it never completed, to its process's crash or the end of the history.
- A process *crashed* when a nemesis op says so (``detail.crashed`` with the client among its
  targets, as ``crash-client`` records it): from then on it holds nothing and wants nothing.
- A lock is *held* while some grant is believed held (``checker.sessions.grants``), a grant
  of a crashed process ending at the crash.

Pure functions of the history.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from checker.intervals import Interval
from checker.sessions import Grant, client_ops
from harness.core.cluster import client_of
from harness.core.history import INFO, NEMESIS, Op, pairs


@dataclass(frozen=True)
class Attempt:
    process: int
    lock: str
    invoke: int
    end: int | None  # completion time; None: never completed
    outcome: str | None  # ok / fail / info / None


def crash_times(history: Sequence[Op]) -> dict[int, int]:
    """Client processes a nemesis crashed on purpose, and when (ns)."""
    out: dict[int, int] = {}
    for op in history:
        if op.get("process") != NEMESIS or op.get("type") != INFO:
            continue
        detail = op.get("detail")
        if not isinstance(detail, dict) or detail.get("crashed") is not True:
            continue
        for target in op.get("targets") or []:
            p = client_of(target)
            if p is not None:
                out.setdefault(p, int(op["time"]))
    return out


def attempts(history: Sequence[Op]) -> list[Attempt]:
    out = []
    for inv, done in pairs(client_ops(history)):
        if inv["f"] != "acquire" or inv["type"] != "invoke":
            continue
        lock = str((done or {}).get("lock", inv.get("lock", "lock")))
        out.append(Attempt(inv["process"], lock, int(inv["time"]),
                           None if done is None else int(done["time"]),
                           None if done is None else str(done["type"])))
    return out


def attempt_interval(a: Attempt, crashes: dict[int, int], horizon: int) -> Interval:
    if a.end is not None:
        return (a.invoke, a.end)
    return (a.invoke, min(crashes.get(a.process, horizon), horizon))


def grant_end(g: Grant, crashes: dict[int, int], horizon: int) -> int:
    """When the grant stopped being believed held: its release, its process's crash, or the
    end of the history."""
    crash = crashes.get(g.process)
    end = horizon if g.end is None else g.end
    if crash is not None and crash >= g.start:
        end = min(end, crash)
    return end
