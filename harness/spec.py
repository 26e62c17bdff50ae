"""TestSpec: everything a run needs, from flags or a TOML file, validated up front.

Bad values raise UsageError with one line naming the option and what to do.
"""

from __future__ import annotations

import random
import re
from dataclasses import asdict, dataclass, field, fields
from typing import Any

import nemesis
from harness import dbs
from harness.backends import check_backend
from harness.dbs.base import has_leader, persistence_modes
from harness.errors import UsageError
from workloads import locks

WORKLOADS = {
    "mutex": "acquire, write enter/exit to the resource, hold a while, release",
    "fenced": "the same, with the grant's token on every write; the resource rejects stale ones",
    "counter": "read the resource's counter, hold, write it + 1 (non-atomic): lost updates",
}


@dataclass
class TestSpec:
    db: str = "redis"
    lock: str = "redis-setnx"
    workload: str = "mutex"
    nemesis: list[str] = field(default_factory=lambda: ["pause"])
    backend: str = "local"
    nodes: int | None = None
    clients: int = 5
    time_limit: float = 20.0
    seed: int | None = None
    store: str = "results"
    ttl: float = 2.0
    quiesce: float = 1.0
    name: str | None = None
    persistence: str = "none"  # the DB nodes' own: none | appendonly (where the db has it)
    nemesis_options: dict[str, Any] = field(default_factory=dict)  # e.g. clock-nodes=all

    def __post_init__(self) -> None:
        if self.seed is None:
            self.seed = random.SystemRandom().randrange(1, 2**31)

    def validate(self) -> TestSpec:
        db_cls = dbs.lookup(self.db)
        info = locks.lookup(self.lock)
        if info.dbs and self.db not in info.dbs:
            raise UsageError(f"lock {self.lock!r} runs on --db {', '.join(info.dbs)}, "
                             f"not {self.db!r}")
        if self.workload not in WORKLOADS:
            raise UsageError(f"unknown workload {self.workload!r}: use one of "
                             f"{', '.join(WORKLOADS)}")
        if self.workload == "fenced" and not info.tokens:
            raise UsageError(f"lock {self.lock!r} has no fencing tokens: --workload fenced "
                             "needs one that does (redis-fenced)")
        check_backend(self.backend)
        nemesis.parse(",".join(self.nemesis) or "none")
        check_db_faults(self.db, db_cls, self.nemesis)
        if self.nodes is None:
            self.nodes = db_cls.default_nodes
        positive("--nodes", self.nodes, integer=True, limit=9)
        check_db_options(self, db_cls)
        positive("--clients", self.clients, integer=True, limit=200)
        positive("--time-limit", self.time_limit)
        positive("--ttl", self.ttl)
        if self.quiesce < 0:
            raise UsageError(f"--quiesce must be >= 0 seconds, got {self.quiesce}")
        if not isinstance(self.seed, int) or self.seed < 0:
            raise UsageError(f"--seed must be a non-negative integer, got {self.seed!r}")
        return self

    @property
    def test_name(self) -> str:
        if self.name:
            return safe(self.name)
        nem = "+".join(self.nemesis) or "none"
        return safe(f"{self.db}_{self.lock}_{self.workload}_{nem}")

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> TestSpec:
        names = {f.name for f in fields(cls)}
        norm = {k.replace("-", "_"): v for k, v in data.items()}
        unknown = sorted(set(norm) - names)
        if unknown:
            raise UsageError(f"unknown spec key {unknown[0]!r}: use one of "
                             + ", ".join(sorted(n.replace("_", "-") for n in names)))
        if isinstance(norm.get("nemesis"), str):
            norm["nemesis"] = nemesis.parse(norm["nemesis"])
        if "db" in norm and "lock" not in norm:  # --db zookeeper alone: that db's own lock
            default_lock = getattr(dbs.lookup(norm["db"]), "default_lock", None)
            if default_lock:
                norm["lock"] = default_lock
        return cls(**norm)


def check_db_options(spec: TestSpec, db_cls: Any) -> None:
    """--persistence and --nodes as the db can take them; faults only some dbs can take."""
    modes = persistence_modes(db_cls)
    if spec.persistence not in modes:
        raise UsageError(f"--persistence {spec.persistence!r}: --db {spec.db} has "
                         f"{', '.join(modes)}")
    least = getattr(db_cls, "min_nodes", 1)
    if spec.nodes is not None and spec.nodes < least:
        raise UsageError(f"--db {spec.db} needs --nodes {least} or more, got {spec.nodes}")
    if "failover" in spec.nemesis and not callable(getattr(db_cls, "role", None)):
        raise UsageError(f"--nemesis failover needs a primary that Sentinel fails over "
                         f"(--db redis-sentinel), not {spec.db!r}")
    if not isinstance(spec.nemesis_options, dict):
        raise UsageError("nemesis-options must be a table of KEY = VALUE")


def check_db_faults(db: str, db_cls: Any, names: list[str]) -> None:
    """Faults the db cannot take are refused up front, in one line (never a silent no-op)."""
    leader_faults = [n for n in names if n in nemesis.NEEDS_LEADER]
    if leader_faults and not has_leader(db_cls):
        raise UsageError(f"--nemesis {leader_faults[0]} needs a db with a leader "
                         f"(zookeeper, etcd), not {db!r}")
    if any(n in nemesis.NEEDS_CLOCK for n in names):
        reason = db_cls().clock_fault_support()
        if reason:
            raise UsageError(f"--nemesis clock: {reason}")
        if not callable(getattr(db_cls, "read_clock", None)):
            raise UsageError(f"--nemesis clock: {db} cannot report its own clock (no "
                             "read_clock), so a clock jump could not be verified")


def positive(option: str, value: Any, *, integer: bool = False, limit: float | None = None
             ) -> None:
    ok_type = isinstance(value, int) if integer else isinstance(value, int | float)
    if isinstance(value, bool) or not ok_type or value <= 0:
        kind = "a positive integer" if integer else "a positive number of seconds"
        raise UsageError(f"{option} must be {kind}, got {value!r}")
    if limit is not None and value > limit:
        raise UsageError(f"{option} must be at most {limit}, got {value!r}")


def safe(name: str) -> str:
    return re.sub(r"[^A-Za-z0-9_.+-]", "-", name)
