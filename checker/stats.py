"""Counts by f and type, latency quantiles, throughput. Pure."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from checker.base import Checker
from checker.lives import Lives
from checker.sessions import count_types
from harness.core.history import OK, Op


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

    @staticmethod
    def check(history: Sequence[Op]) -> dict[str, Any]:
        counts = count_types(history)
        lives = Lives.of(history)
        latencies: dict[str, list[float]] = {}
        for inv, done in lives.paired:
            if done is not None and done["type"] == OK:
                latencies.setdefault(inv["f"], []).append((done["time"] - inv["time"]) / 1e6)
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
        if not acquired:
            result["note"] = "no acquire succeeded: the run tested nothing"
        return result
