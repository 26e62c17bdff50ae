"""The types of a spec's keys: checked before anything else (a config's type errors are one
line, never a traceback), and by the store when it reads a run's test.json back."""

from __future__ import annotations

import math
from typing import Any

from harness.core.errors import UsageError
from harness.core.text import show

# What each spec key must be (checked before anything else, so a config's type errors are one
# line, never a traceback).
NAME_KEYS = ("db", "lock", "workload", "backend", "store", "persistence", "links")
NUMBER_KEYS = ("time_limit", "ttl", "quiesce", "acquire_timeout", "op_timeout")
OPTIONAL_NUMBER_KEYS = ("acquire_timeout", "op_timeout")  # None: the default, resolved later
INT_KEYS = ("nodes", "clients", "seed", "keys")
OPTIONAL_NAME_KEYS = ("resource", "resource_mode")  # None until resolved


def check_types(norm: dict[str, Any]) -> None:
    """Each key of a spec of the type it must have (UsageError naming the key otherwise)."""
    def bad(key: str, what: str) -> UsageError:
        return UsageError(f"spec key {key.replace('_', '-')!r} must be {what}, got "
                          f"{show(norm[key])}")

    for key in NAME_KEYS:
        if key in norm and not (isinstance(norm[key], str) and 0 < len(norm[key]) <= 300):
            raise bad(key, "a name")
    for key in OPTIONAL_NAME_KEYS:
        if norm.get(key) is not None and not (isinstance(norm[key], str)
                                              and 0 < len(norm[key]) <= 300):
            raise bad(key, "a name")
    for key in NUMBER_KEYS:
        v = norm.get(key)
        if key in norm and (v is not None or key not in OPTIONAL_NUMBER_KEYS) and (
                isinstance(v, bool) or not isinstance(v, int | float) or not math.isfinite(v)):
            raise bad(key, "a finite number of seconds")
    for key in INT_KEYS:
        v = norm.get(key)
        if v is not None and (isinstance(v, bool) or not isinstance(v, int)):
            raise bad(key, "an integer")
    if norm.get("name") is not None and not (isinstance(norm["name"], str)
                                             and 0 < len(norm["name"]) <= 200):
        raise bad("name", "a short name")
    nem = norm.get("nemesis")
    if nem is not None and not (isinstance(nem, str) or (
            isinstance(nem, list) and all(isinstance(n, str) for n in nem))):
        raise bad("nemesis", "a name, \"a,b\", or a list of names")
    for key in ("nemesis_options", "lock_options"):
        opts = norm.get(key)
        if opts is not None and not (isinstance(opts, dict) and all(
                isinstance(k, str) for k in opts)):
            raise bad(key, "a table of KEY = VALUE")
    sched = norm.get("schedule")
    if sched is not None and not isinstance(sched, dict):
        raise bad("schedule", "a table of steps ([[step]] tables in a TOML spec)")
    for key in ("hold", "think"):
        v = norm.get(key)
        if v is not None and (isinstance(v, bool) or not isinstance(v, int | float | str | list)):
            raise bad(key, "seconds, or a range such as \"1-6\"")
