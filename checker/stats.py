"""Counts by f and type, latency quantiles, throughput. Pure."""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

from checker.base import Checker
from checker.lives import Lives
from checker.models import refused_not_held
from checker.sessions import count_types
from harness.core.history import OK, Op, seconds

KEPT = 10  # leases lost early described in the result (all are counted)


def quantiles(values: list[float], qs: Sequence[float] = (0.5, 0.95, 0.99, 1.0)
              ) -> dict[str, float]:
    if not values:
        return {}
    s = sorted(values)
    out = {}
    for q in qs:
        i = min(len(s) - 1, max(0, round(q * (len(s) - 1))))
        out["max" if q == 1.0 else f"p{round(q * 100):d}"] = round(s[i], 3)
    return out


class StatsChecker(Checker):
    name = "stats"
    summary = "counts by f and type, latency quantiles, throughput"
    figures = {"lease-lost-early-count": "lease-lost-early"}
    caveats = ("leases-lost-early",)  # informational: a verdict counts them only with an overlap

    @staticmethod
    def check(history: Sequence[Op]) -> dict[str, Any]:
        counts = count_types(history)
        lives = Lives.of(history)
        latencies, refused = _latencies(lives.paired)
        duration = lives.horizon / 1e9
        acquired = counts.get("acquire", {}).get(OK, 0)
        result: dict[str, Any] = {
            "valid": True if acquired else "unknown",
            "counts": counts,
            "latency-ms": {f: quantiles(v) for f, v in sorted(latencies.items())},
            "acquires-per-second": round(acquired / duration, 2) if duration else 0.0,
            "duration-s": round(duration, 3),
            "crashed-processes": len(lives.crashes),
            "blocked-in-acquire": sum(1 for a in lives.attempts  # overdue: never completed
                                      if a.end is None and lives.overdue(a)),
        }
        early = refused_in_lease(lives, refused)
        result["lease-lost-early-count"] = len(early)
        if early:
            result["leases-lost-early"] = [{"explanation": e} for e in early[:KEPT]]
        if not acquired:
            result["note"] = "no acquire succeeded: the run tested nothing"
        return result


def _latencies(paired: Any) -> tuple[dict[str, list[float]], list[tuple[Op, Op]]]:
    """Per f, the latency (ms) of each call that completed ok; the failed releases' pairs,
    in order."""
    from checker.column_pairs import latencies, refused_releases

    return latencies(paired), refused_releases(paired)  # type: ignore[return-value]


def refused_in_lease(lives: Lives, refused: list[tuple[Op, Op]]) -> list[str]:
    """Releases refused as not held (:func:`checker.models.refused_not_held`) that completed
    before their lease could have run out: the grant's acquire invocation plus its validity
    (the server set the lease no earlier). The service dropped a lease it had promised, early:
    a failover that lost it, a forgetful restart, a server clock that jumped. Informational:
    mutual exclusion broke only if another client got in meanwhile (the mutex checker's lease
    broken count); this counts the times nobody did. ``refused``: the failed releases' pairs."""
    if not refused:
        return []
    by_session = {(g.process, g.session): g for g in lives.grants}
    out = []
    for inv, done in refused:
        value = inv.get("value")
        grant = by_session.get((inv["process"], value.get("session")
                                if isinstance(value, dict) else None))
        if grant is None or not refused_not_held(done):
            continue
        validity = grant.validity
        if (isinstance(validity, bool) or not isinstance(validity, int | float)
                or not math.isfinite(validity)):
            continue
        expires = grant.invoke + int(validity * 1_000_000_000)
        if done["time"] < expires:
            out.append(f"process {inv['process']}'s lease was dropped early: its release was "
                       f"refused (not held) at {seconds(done['time']):.3f} s, "
                       f"{seconds(expires - done['time']):.3f} s before the lease could have "
                       f"run out (acquire invoked at "
                       f"{seconds(grant.invoke):.3f} s, validity {validity:g} s)")
    return out
