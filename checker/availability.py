"""Availability: the share of the time a lock was wanted that it could be had.

Per lock, in the clients' own real time (:mod:`checker.lives`): the lock was *wanted* while
some client was in an acquire (from invocation to completion; one that never completed, to its
process's crash or the end: a client blocked in acquire past its timeout still wants it), and
*held* while some grant was believed held (to its release, its holder's crash or the end). The
time it was wanted but nobody held it is time it could not be had: hand-over gaps between
holders (milliseconds), outages (a dead primary, no quorum) and locks left behind by crashed
holders until their TTL runs out, which is where the cost of a long TTL shows. So:

    availability = 1 - (wanted and not held) / (wanted or held)

with the longest stretch of unavailability and every *outage* (a stretch of at least
``max(1 s, TTL/2)``; a stretch runs from a moment the lock was wanted and not held to the next
grant, whether or not somebody was asking all along) listed. Informational: always valid
(liveness judges stuck locks). Pure function of the history.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from checker.base import Checker
from checker.intervals import Interval, arrays, length, listed, stretches_of, subtract_of, union_of
from checker.lives import Lives
from harness.core import defaults
from harness.core.history import Op, seconds

NS = 1_000_000_000
MAX_LISTED = 20


def lock_availability(wanted: list[Interval], held: list[Interval], outage_ns: int
                      ) -> dict[str, Any]:
    """One lock's figures (``held``: when some grant was believed held), by array operations
    (:mod:`checker.intervals`): a few passes in C for the hundreds of thousands of acquires
    of a long run."""
    want, have = union_of(*arrays(wanted)), union_of(*arrays(held))
    short = subtract_of(*want, *have)
    lost = length(listed(short))
    span = length(listed(have)) + lost  # wanted or held: held, and wanted while not held
    gaps = listed(stretches_of(*short, *have))
    return _figures(lost, span, length(listed(want)), span - lost, gaps, outage_ns)


def _figures(lost: int, span: int, wanted: int, held: int, gaps: list[Interval],
             outage_ns: int) -> dict[str, Any]:
    outages = [g for g in gaps if g[1] - g[0] >= outage_ns]
    longest = max(gaps, key=lambda g: g[1] - g[0], default=None)
    return {
        "availability": round(1 - lost / span, 4) if span else 1.0,
        "wanted-s": round(wanted / NS, 3),
        "held-s": round(held / NS, 3),
        "unavailable-s": round(lost / NS, 3),
        "longest-unavailable": None if longest is None else {
            "from": seconds(longest[0]), "until": seconds(longest[1]),
            "seconds": round((longest[1] - longest[0]) / NS, 3)},
        "outage-count": len(outages),
        "outages": [{"from": seconds(a), "until": seconds(b), "seconds": round((b - a) / NS, 3)}
                    for a, b in outages[:MAX_LISTED]],
    }


class AvailabilityChecker(Checker):
    name = "availability"
    summary = ("the share of the time a lock was wanted that it could be had; "
               "outages (informational)")
    figures = {"outage-count": "outage"}

    @staticmethod
    def check(history: Sequence[Op], *, ttl: float = defaults.TTL) -> dict[str, Any]:
        outage_ns = int(max(1.0, ttl / 2) * NS)
        lives = Lives.of(history)
        gs = lives.by_lock()
        per_lock = {}
        for lock in lives.locks():
            per_lock[lock] = lock_availability(lives.wanted(lock), lives.held(gs.get(lock, [])),
                                               outage_ns)
            blocked = sum(1 for a in lives.attempts  # overdue: never completed, first
                          if a.end is None and a.lock == lock and lives.overdue(a))
            if blocked:
                per_lock[lock]["blocked-in-acquire"] = blocked  # pending past their own timeouts
        result: dict[str, Any] = {"valid": True, "locks": per_lock}
        if per_lock:
            result["availability"] = min(v["availability"] for v in per_lock.values())
            result["outage-count"] = sum(v["outage-count"] for v in per_lock.values())
        else:
            result["note"] = "no acquire was attempted"
        return result
