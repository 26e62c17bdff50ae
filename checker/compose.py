"""Which checkers a workload gets, and how their verdicts combine (false > unknown > true)."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from checker import availability, fencing, linearizable, liveness, lost_updates, mutex, stats
from harness.history import Op

LINEARIZABILITY_BUDGET_S = 60.0


def lock_linearizability(history: Sequence[Op], spec: dict[str, Any]) -> dict[str, Any]:
    """Is the lock itself linearizable (as a mutex; as a fenced mutex when it hands out tokens)?

    Under the ``fenced`` workload the resource protects itself, so, like the lock overlaps,
    this is informational there: the verdict is the resource's.
    """
    fenced = spec.get("workload") == "fenced"
    result = linearizable.check(history, "fenced-mutex" if fenced else "mutex",
                                time_limit=LINEARIZABILITY_BUDGET_S)
    if fenced and result["valid"] is not True:
        result = {**result, "lock-valid": result["valid"], "valid": True, "informational": True}
    return result

Checker = Callable[[Sequence[Op], dict[str, Any]], dict[str, Any]]

CHECKERS: dict[str, Checker] = {
    "mutex": mutex.check,
    "fencing": fencing.check,
    "stats": stats.check,
    "linearizable": lock_linearizability,
    "lost-updates": lost_updates.check,
}

BY_WORKLOAD: dict[str, tuple[str, ...]] = {
    "mutex": ("mutex", "linearizable", "stats"),
    "fenced": ("mutex", "fencing", "linearizable", "stats"),
    "counter": ("mutex", "lost-updates", "linearizable", "stats"),
}

# Every lock workload also gets liveness (a stuck lock is invalid) and availability (figures).
CHECKERS.update({"liveness": liveness.check, "availability": availability.check})
BY_WORKLOAD.update({w: (*names, "liveness", "availability") for w, names in BY_WORKLOAD.items()})


def merge_valid(values: Sequence[Any]) -> bool | str:
    if any(v is False for v in values):
        return False
    if any(v is not True for v in values):
        return "unknown"
    return True


def check_all(history: Sequence[Op], spec: dict[str, Any]) -> dict[str, Any]:
    names = BY_WORKLOAD.get(spec.get("workload", "mutex"), ("mutex", "stats"))
    checks = {name: CHECKERS[name](history, spec) for name in names}
    return {"valid": merge_valid([c["valid"] for c in checks.values()]), "checks": checks}
