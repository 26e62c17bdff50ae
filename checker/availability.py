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

import bisect
import math
from collections.abc import Sequence
from typing import Any

from checker.base import Checker
from checker.intervals import Interval, length, subtract_unions, union
from checker.lives import Lives
from harness.core import defaults
from harness.core.history import Op, seconds

NS = 1_000_000_000
MAX_LISTED = 20
ARRAYS_FROM = 256  # intervals of a lock from which its figures are worked out by arrays


def stretches(gaps: list[Interval], held: list[Interval]) -> list[Interval]:
    """Join consecutive gaps that no holding separates: a moment when nobody happened to be
    asking does not end an outage, a grant does."""
    ends = [h1 for _, h1 in held]  # ``held`` is a union: sorted and disjoint
    out: list[Interval] = []
    i, n, last = 0, len(ends), -math.inf
    for a, b in gaps:
        if out:
            x = out[-1][1]
            if x < last:  # gaps out of order: search afresh
                i = bisect.bisect_right(ends, x)
            else:  # the first holding after that stretch, found walking on (gaps are sorted)
                while i < n and ends[i] <= x:
                    i += 1
            last = x
            if i == n or held[i][0] >= a:
                out[-1] = (out[-1][0], b)
                continue
        out.append((a, b))
    return out


def lock_availability(wanted: list[Interval], held: list[Interval], outage_ns: int,
                      by_arrays: bool | None = None) -> dict[str, Any]:
    """One lock's figures; by array operations (:mod:`checker.interval_arrays`) when there
    are many intervals (``by_arrays`` None) or when asked, by the list functions otherwise:
    the same figures either way."""
    if by_arrays is None:
        by_arrays = len(wanted) + len(held) >= ARRAYS_FROM
    got = _by_arrays(wanted, held, outage_ns) if by_arrays else None
    if got is not None:
        return got
    want, have = union(wanted), union(held)
    short = subtract_unions(want, have)
    lost = length(short)
    span = length(have) + lost  # wanted or held: held, and wanted while not held
    gaps = stretches(short, held)
    return _figures(lost, span, length(want), length(have), gaps, outage_ns)


def _by_arrays(wanted: list[Interval], held: list[Interval], outage_ns: int
               ) -> dict[str, Any] | None:
    """:func:`lock_availability` by arrays; None when the intervals are not ints, or
    ``held`` is not a union (sorted, disjoint: what :meth:`Lives.held` gives)."""
    import numpy as np

    from checker import interval_arrays as ia

    w, h = ia.arrays(wanted), ia.arrays(held)
    if w is None or h is None:
        return None
    hs, he = h
    if not (bool(np.all(he > hs)) and bool(np.all(hs[1:] > he[:-1]))):
        return None
    want, have = ia.union(*w), ia.union(hs, he)
    short = ia.subtract(*want, *have)
    lost = int((short[1] - short[0]).sum())
    span = int((have[1] - have[0]).sum()) + lost
    ga, gb = ia.stretches(*short, hs, he)
    gaps = list(zip(ga.tolist(), gb.tolist(), strict=True))
    return _figures(lost, span, int((want[1] - want[0]).sum()), span - lost, gaps, outage_ns)


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
