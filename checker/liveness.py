"""The liveness checker: did a lock get stuck?

A lock is **stuck** when, from some moment to the end of the run, nobody held it (no client
believed it did, a crashed client's belief ending at its crash: :mod:`checker.lives`), nothing
acquired it, and clients kept wanting it for at least ``threshold`` after that moment: at least
two attempts began after it, the last of them ``threshold`` later, or an acquire is still
pending at the end past its own timeout (a client blocked in acquire starts no new attempt,
but it is unmet demand all the same, to the end of the run). The threshold is 5 TTLs and at
least 10 s: longer than any lease a lock promises and than the outages the nemeses cause and
heal (a failover, a restart), so what is left is a lock nobody can ever take again, the classic
one being ``SETNX`` by a client that died before its ``EXPIRE``. A stuck lock makes the
verdict invalid: safety is not everything.

Only fault-free time counts toward the threshold. Faults that recur can keep a lock from every
client for longer than any one of them lasts: a server paused again and again serves, each time
it resumes, the acquires its clients had given up on (a timeout shorter than the pause), and
one of them takes a lease for nobody (seen: ``redis-fenced`` under ``pause-node``, free from
1.5 s to the end of a 15 s run, although each pause ended). So a fault on the lock service,
from its start to a lease after its stop, does not count: one aimed at a DB node or link, or
at every client that was trying. A stretch that would be stuck but for such faults is listed
as ``not-judged``, with its fault-free seconds: it shows an outage, not a lock nobody can take.

Pure function of the history (and of the lock's ``ttl``).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from checker.base import Checker
from checker.faults import Window, windows
from checker.intervals import Interval, subtract, total, union
from checker.lives import Attempt, Lives
from harness.core import defaults
from harness.core.cluster import client_of
from harness.core.history import Op, seconds

MIN_STUCK_S = 10.0
STUCK_TTLS = 5.0
NS = 1_000_000_000


def threshold_s(ttl: float) -> float:
    return max(MIN_STUCK_S, STUCK_TTLS * ttl)


def service_faults(faults: Sequence[Window], trying: set[int], lease_ns: int) -> list[Interval]:
    """When a fault was on the lock service for the clients in ``trying``, each followed by a
    lease: one aimed at anything but clients (a node, a link), at no one in particular, or at
    all of ``trying``."""
    out = []
    for w in faults:
        clients = [client_of(t) for t in w.targets]
        if not w.targets or None in clients or trying <= set(clients):
            out.append((w.start, w.stop + lease_ns))
    return union(out)


def stuck_lock(lock: str, tries: list[Attempt], ends: list[int], lives: Lives,
               threshold_ns: int, faults: Sequence[Window] = (), lease_ns: int = 0
               ) -> dict[str, Any] | None:
    """The stuck stretch of one lock, or None; a stretch long enough but for faults on the
    lock service is returned with ``"judged": False``."""
    if not tries:
        return None
    crashes = lives.crashes
    free_since = max(ends) if ends else min(a.invoke for a in tries)
    later = [a for a in tries if a.invoke >= free_since and a.process not in crashes]
    blocked = [a for a in tries if lives.overdue(a)]
    if len(later) < 2 and not blocked:
        return None
    last = lives.horizon if blocked else max(a.invoke for a in later)
    if last - free_since < threshold_ns:
        return None
    wanting = later + [a for a in blocked if a.invoke < free_since]
    excused = service_faults(faults, {a.process for a in wanting}, lease_ns)
    fault_free = total(subtract([(free_since, last)], excused))
    until = last if blocked else max(a.end if a.end is not None else a.invoke for a in later)
    processes = sorted({a.process for a in wanting})
    # Who may have left the lock taken: a crashed client whose last acquire never completed.
    suspects = sorted({a.process for a in tries if a.end is None and a.process in crashes
                       and a.invoke <= crashes[a.process]})
    cause = ""
    if blocked:
        cause = ("; " + ", ".join(f"process {a.process} has been in an acquire since "
                                  f"{seconds(a.invoke):.2f} s (its timeout {a.timeout:g} s)"
                                  for a in blocked[:5]) + ", never answered")
    if suspects:
        cause = ("; " + ", ".join(f"process {p}" for p in suspects)
                 + " crashed in the middle of an acquire at "
                 + ", ".join(f"{seconds(crashes[p]):.2f} s" for p in suspects)
                 + " and may hold it for good")
    if fault_free < threshold_ns:
        return {"judged": False, "lock": lock, "free-since": seconds(free_since),
                "until": seconds(until), "fault-free-s": round(fault_free / NS, 3),
                "attempts": len(later), "processes": processes,
                "explanation": (f"nobody acquired lock {lock!r} from {seconds(free_since):.2f} s "
                                f"to the end ({seconds(until):.2f} s), but only "
                                f"{fault_free / NS:.2f} s of that was free of faults on the "
                                f"lock service (and a lease after each): an outage, not "
                                f"proof of a stuck lock")}
    return {
        "lock": lock,
        "free-since": seconds(free_since),
        "until": seconds(until),
        "stuck-s": round((until - free_since) / NS, 3),
        "fault-free-s": round(fault_free / NS, 3),
        "attempts": len(later),
        "blocked-in-acquire": [a.process for a in blocked],
        "processes": processes,
        "crashed-in-acquire": suspects,
        "explanation": (f"nobody held lock {lock!r} and nothing acquired it from "
                        f"{seconds(free_since):.2f} s to the end ({seconds(until):.2f} s), "
                        f"although processes {', '.join(map(str, processes))} wanted it "
                        f"({len(later)} attempts begun in that time){cause}"),
    }


class LivenessChecker(Checker):
    name = "liveness"
    summary = "a stuck lock: free, wanted, and never acquired again"
    figures = {"stuck-lock-count": "stuck-lock", "not-judged-count": "not-judged"}
    violations = {"stuck-locks": ("stuck lock", "stuck locks")}
    caveats = ("not-judged",)

    @staticmethod
    def check(history: Sequence[Op], *, ttl: float = defaults.TTL,
              acquire_timeout: float | None = None) -> dict[str, Any]:
        """``acquire_timeout``: the run's, for acquires that do not record their own."""
        threshold = threshold_s(ttl)
        lives = Lives.of(history, acquire_timeout)
        crashes = lives.crashes
        all_attempts = lives.attempts
        gs = lives.by_lock()
        faults, _ = windows(history)
        stuck, unjudged = [], []
        for lock in sorted({a.lock for a in all_attempts}):
            tries = [a for a in all_attempts if a.lock == lock]
            ends = [lives.grant_end(g) for g in gs.get(lock, [])]
            found = stuck_lock(lock, tries, ends, lives, int(threshold * NS), faults,
                               int(ttl * NS))
            if found is not None:
                (stuck if found.pop("judged", True) else unjudged).append(found)
        result: dict[str, Any] = {
            "valid": not stuck,
            "stuck-lock-count": len(stuck),
            "stuck-locks": stuck,
            "threshold-s": threshold,
            "crashed-processes": {str(p): seconds(t) for p, t in sorted(crashes.items())},
        }
        if unjudged:
            result["not-judged-count"] = len(unjudged)
            result["not-judged"] = unjudged
            result["not-judged-informational"] = True  # outages, not violations
        if not all_attempts:
            result["note"] = "no acquire was attempted: nothing to be stuck"
        return result
