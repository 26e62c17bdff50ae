"""The types of a spec's keys: checked before anything else (a config's type errors are one
line, never a traceback), and by the store when it reads a run's test.json back."""

from __future__ import annotations

import math
from typing import Any

from harness.core import defaults
from harness.core.errors import UsageError
from harness.core.text import show

# What each spec key must be (checked before anything else, so a config's type errors are one
# line, never a traceback).
NAME_KEYS = ("db", "lock", "workload", "backend", "store", "persistence", "links")
NUMBER_KEYS = ("time_limit", "ttl", "quiesce", "acquire_timeout", "op_timeout")
OPTIONAL_NUMBER_KEYS = ("acquire_timeout", "op_timeout")  # None: the default, resolved later
INT_KEYS = ("nodes", "clients", "seed", "keys")
OPTIONAL_NAME_KEYS = ("resource", "resource_mode")  # None until resolved
# the lock's, resolved: never given
RESOLVED_KEYS = ("release_waits", "request_timeout", "release_frees_others")

# What each key of a spec means (docs/spec.md is generated from these, the types above and
# TestSpec's defaults: `harness list --spec`; a key without a meaning fails its test).
MEANINGS = {
    "db": "the database the lock runs on (`harness list`)",
    "lock": "the lock under test: a registered name, `module:Class` or `exec:PROGRAM` "
            "(default: the db's own lock when only `db` is given)",
    "workload": "what the clients do with the lock (`harness list`)",
    "nemesis": "the faults drawn into a schedule: `none`, a name, `\"a,b\"` or a list; "
               "`FAULT:TARGET` aims one (pause:holder, kill:node=n2)",
    "backend": "where the nodes run: local, docker or ssh",
    "nodes": "DB nodes (unset: the db's default)",
    "clients": "client processes, each a session of the lock",
    "time_limit": "seconds of load",
    "seed": "the random seed of the schedule and the load (unset: drawn and recorded)",
    "store": "the results store the run directory goes in",
    "ttl": "seconds a lock's lease or session lasts",
    "quiesce": "seconds the run waits, faults healed, before the final reads",
    "name": "the test's name: its directory in the store (unset: db_lock_workload_nemesis)",
    "persistence": "the DB nodes' own persistence: none, or appendonly where the db has it",
    "nemesis_options": "the nemeses' declared options, a table `[nemesis-options]` "
                       "(`harness list --nemesis NAME`); `nemesis-opt` is the same",
    "lock_options": "the lock's declared options, a table `[lock-options]` (or a `[lock]` "
                    "table with `name` and them; `harness list --lock NAME`); `lock-opt` is "
                    "the same",
    "hold": "seconds a holder works under the lock, `1.5` or `\"1-6\"` (unset: the lock's)",
    "think": "seconds a client waits between sessions, as `hold`",
    "acquire_timeout": "seconds an acquire may take (unset: the lock's)",
    "keys": "independent locks; client p works on key p mod keys",
    "hosts": "the ssh backend's HOSTS.toml (below)",
    "resource": "the protected resource: redis or postgres (unset: the lock's or workload's)",
    "resource_mode": "plain, fenced, version or cas (unset: fenced for a fencing workload, "
                     "else plain)",
    "schedule": "a fault schedule run instead of one drawn: `[[step]]` tables (below)",
    "links": "direct: clients connect straight to the nodes (unless a nemesis needs the link "
             "layer); proxy: every link through the link layer",
    "op_timeout": f"seconds a client waits for one reply (unset: {defaults.OP_TIMEOUT:g}, or "
                  "what a nemesis needs)",
    "release_waits": "whether the lock's release waits for a reply: the lock's declaration, "
                     "recorded in test.json (a value given is replaced)",
    "request_timeout": "seconds the lock waits for one request's reply: the lock's, "
                       "recorded in test.json (a value given is replaced)",
    "release_frees_others": "whether the lock's release can remove another client's hold (a "
                            "bare DEL): the lock's declaration, recorded in test.json (a value "
                            "given is replaced); the report says an overlap was let in by a "
                            "release only then",
}
KINDS = {**dict.fromkeys(NAME_KEYS + OPTIONAL_NAME_KEYS, "a name"),
         **dict.fromkeys(NUMBER_KEYS, "a finite number of seconds"),
         **dict.fromkeys(INT_KEYS, "an integer"), "name": "a short name",
         "nemesis": "a name, \"a,b\", or a list of names",
         "nemesis_options": "a table of KEY = VALUE", "lock_options": "a table of KEY = VALUE",
         "schedule": "a table of steps ([[step]] tables in a TOML spec)",
         "hold": "seconds, or a range such as \"1-6\"", "think": "seconds, or a range such "
         "as \"1-6\""}


def check_types(norm: dict[str, Any]) -> None:
    """Each key of a spec of the type it must have (UsageError naming the key otherwise)."""
    def bad(key: str, what: str) -> UsageError:
        return UsageError(f"spec key {key.replace('_', '-')!r} must be {what}, got "
                          f"{show(norm[key])}")

    for key in NAME_KEYS:
        if key in norm and not (isinstance(norm[key], str) and 0 < len(norm[key]) <= 300):
            raise bad(key, KINDS[key])
    for key in OPTIONAL_NAME_KEYS:
        if norm.get(key) is not None and not (isinstance(norm[key], str)
                                              and 0 < len(norm[key]) <= 300):
            raise bad(key, KINDS[key])
    for key in NUMBER_KEYS:
        v = norm.get(key)
        if key in norm and (v is not None or key not in OPTIONAL_NUMBER_KEYS) and (
                isinstance(v, bool) or not isinstance(v, int | float) or not math.isfinite(v)):
            raise bad(key, KINDS[key])
    for key in INT_KEYS:
        v = norm.get(key)
        if v is not None and (isinstance(v, bool) or not isinstance(v, int)):
            raise bad(key, KINDS[key])
    if norm.get("name") is not None and not (isinstance(norm["name"], str)
                                             and 0 < len(norm["name"]) <= 200):
        raise bad("name", KINDS["name"])
    nem = norm.get("nemesis")
    if nem is not None and not (isinstance(nem, str) or (
            isinstance(nem, list) and all(isinstance(n, str) for n in nem))):
        raise bad("nemesis", KINDS["nemesis"])
    for key in ("nemesis_options", "lock_options"):
        opts = norm.get(key)
        if opts is not None and not (isinstance(opts, dict) and all(
                isinstance(k, str) for k in opts)):
            raise bad(key, KINDS[key])
    sched = norm.get("schedule")
    if sched is not None and not isinstance(sched, dict):
        raise bad("schedule", KINDS["schedule"])
    for key in ("hold", "think"):
        v = norm.get(key)
        if v is not None and (isinstance(v, bool) or not isinstance(v, int | float | str | list)):
            raise bad(key, KINDS[key])
