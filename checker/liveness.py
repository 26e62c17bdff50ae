"""The liveness checker: did a lock get stuck?

A lock is **stuck** when, from some moment to the end of the run, nobody held it (no client
believed it did, a crashed client's belief ending at its crash), nothing acquired it, and
clients kept trying: at least two attempts began after that moment, the last of them at least
``threshold`` later. The threshold is 5 TTLs and at least 10 s: longer than any lease a lock
promises and than the outages the nemeses cause and heal (a failover, a restart), so what is
left is a lock nobody can ever take again, the classic one being ``SETNX`` by a client that
died before its ``EXPIRE``. A stuck lock makes the verdict invalid: safety is not everything.

Pure function of the history (and of the lock's ``ttl``).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, ClassVar

from checker.demand import Attempt, attempts, crash_times, grant_end
from checker.sessions import by_lock, grants
from harness.core.history import Op, seconds

MIN_STUCK_S = 10.0
STUCK_TTLS = 5.0
NS = 1_000_000_000


def threshold_s(ttl: float) -> float:
    return max(MIN_STUCK_S, STUCK_TTLS * ttl)


def stuck_lock(lock: str, tries: list[Attempt], ends: list[int], crashes: dict[int, int],
               threshold_ns: int) -> dict[str, Any] | None:
    """The stuck stretch of one lock, or None."""
    if not tries:
        return None
    free_since = max(ends) if ends else min(a.invoke for a in tries)
    later = [a for a in tries if a.invoke >= free_since and a.process not in crashes]
    if len(later) < 2 or max(a.invoke for a in later) - free_since < threshold_ns:
        return None
    until = max(a.end if a.end is not None else a.invoke for a in later)
    processes = sorted({a.process for a in later})
    # Who may have left the lock taken: a crashed client whose last acquire never completed.
    suspects = sorted({a.process for a in tries if a.end is None and a.process in crashes
                       and a.invoke <= crashes[a.process]})
    cause = ""
    if suspects:
        cause = ("; " + ", ".join(f"process {p}" for p in suspects)
                 + " crashed in the middle of an acquire at "
                 + ", ".join(f"{seconds(crashes[p]):.2f} s" for p in suspects)
                 + " and may hold it for good")
    return {
        "lock": lock,
        "free-since": seconds(free_since),
        "until": seconds(until),
        "stuck-s": round((until - free_since) / NS, 3),
        "attempts": len(later),
        "processes": processes,
        "crashed-in-acquire": suspects,
        "explanation": (f"nobody held lock {lock!r} and nothing acquired it from "
                        f"{seconds(free_since):.2f} s to the end ({seconds(until):.2f} s), "
                        f"although processes {', '.join(map(str, processes))} tried "
                        f"{len(later)} times{cause}"),
    }


def check(history: Sequence[Op], *, ttl: float = 2.0) -> dict[str, Any]:
    threshold = threshold_s(ttl)
    crashes = crash_times(history)
    all_attempts = attempts(history)
    horizon = max((op["time"] for op in history), default=0)
    gs = by_lock(grants(history))
    stuck = []
    for lock in sorted({a.lock for a in all_attempts}):
        tries = [a for a in all_attempts if a.lock == lock]
        ends = [grant_end(g, crashes, horizon) for g in gs.get(lock, [])]
        found = stuck_lock(lock, tries, ends, crashes, int(threshold * NS))
        if found is not None:
            stuck.append(found)
    result: dict[str, Any] = {
        "valid": not stuck,
        "stuck-lock-count": len(stuck),
        "stuck-locks": stuck,
        "threshold-s": threshold,
        "crashed-processes": {str(p): seconds(t) for p, t in sorted(crashes.items())},
    }
    if not all_attempts:
        result["note"] = "no acquire was attempted: nothing to be stuck"
    return result


class LivenessChecker:
    name: ClassVar[str] = "liveness"
    summary: ClassVar[str] = "a stuck lock: free, wanted, and never acquired again"
    check = staticmethod(check)
