"""Which checkers a workload gets, and how their verdicts combine (false > unknown > true)."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from checker import fencing, mutex, stats
from harness.history import Op

Checker = Callable[[Sequence[Op], dict[str, Any]], dict[str, Any]]

CHECKERS: dict[str, Checker] = {
    "mutex": mutex.check,
    "fencing": fencing.check,
    "stats": stats.check,
}

BY_WORKLOAD: dict[str, tuple[str, ...]] = {
    "mutex": ("mutex", "stats"),
    "fenced": ("mutex", "fencing", "stats"),
}


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
