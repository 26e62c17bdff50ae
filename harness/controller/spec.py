"""TestSpec: everything a run needs, from flags or a TOML file, validated up front and
resolved once into the test the run receives (:class:`harness.controller.resolved.ResolvedTest`:
each role loaded, every default applied).

Bad values raise UsageError with one line naming the option and what to do. Whether the lock,
the workload and the faults fit the DB is the registry's question
(:meth:`harness.controller.resolved.ResolvedTest.check`), asked here once.
"""

from __future__ import annotations

import dataclasses
import math
import random
from collections.abc import Iterable
from dataclasses import asdict, dataclass, field, fields
from pathlib import Path
from typing import Any

import tomli_w

from harness.controller.backends import check_backend
from harness.controller.backends.ssh.hosts import check_fits
from harness.controller.backends.ssh.hosts import environment_unmet as hosts_environment
from harness.controller.backends.ssh.hosts import load as load_hosts
from harness.controller.checking import checks_of
from harness.controller.registry import Registry, default_registry, is_session_lock, requires
from harness.controller.resolved import ResolvedTest, Role
from harness.controller.resolved import make_db as make_db  # where search.py finds it
from harness.controller.spec_keys import RESOLVED_KEYS, check_types
from harness.controller.store import safe_name
from harness.core import defaults
from harness.core.capabilities import ClockFaults, patches_vdso
from harness.core.errors import UsageError
from harness.core.options import Option, parse_options
from harness.core.schedule import MAX_SECONDS, MAX_WAIT, Schedule, from_dict
from harness.core.text import show

# The largest number of seconds each kind of time may be (a time past these is a typo, and
# 1e308 s overflows the waits that use it): a run's load at most a day, anything a client or
# a fault waits for at most an hour.
MAX_TIME_LIMIT = MAX_SECONDS
LINKS = ("direct", "proxy")  # --links: clients connect straight to the nodes, or via the proxy


def parse_nemeses(text: str, registry: Registry | None = None) -> list[str]:
    """``pause,kill`` -> ["pause", "kill"]; ``none`` -> []; ``partition:waiter`` aims that
    fault at a role (the fault's own choice otherwise)."""
    reg = registry or default_registry()
    parts = [p.strip() for p in text.split(",") if p.strip()]
    if not parts:
        raise UsageError("--nemesis is empty: use none, or one or more of "
                         + ", ".join(reg.names("nemeses")))
    out = [p for p in parts if p != "none"]
    for item in out:
        check_role_word(item, reg)
        reg.entry("nemeses", nemesis_name(item))
    return out


def check_role_word(item: str, reg: Registry) -> None:
    """``pause:nobody``: a registered nemesis with a word that is no role is that word's
    error (not an attempt to import a module ``pause``)."""
    name, sep, target = item.rpartition(":")
    if not sep or not name or nemesis_name(item) != item:
        return
    if name in reg.names("nemeses"):
        raise UsageError(f"--nemesis {item}: unknown target {target!r} (use one of "
                         f"{', '.join(ROLE_WORDS)}, node=NAME or client=N)")
    if not all(part.isidentifier() for part in (*name.split("."), *target.split("."))):
        # not a module:Class path either (client:99, kill=n2:holder)
        raise UsageError(f"--nemesis {item}: unknown nemesis {name!r} (use one of "
                         f"{', '.join(reg.names('nemeses'))}; a fault aimed at a target is "
                         "FAULT:TARGET, e.g. pause:holder, kill:node=n2, crash-client:client=3)")


def check_target_exists(where: str, target: str | None, nodes: int, clients: int) -> None:
    """A target that names a node or a client names one this run has: ``client:99`` with 5
    clients or ``node:n9`` with 3 nodes is a usage error now, not a fault that finds nothing
    after the servers started."""
    if target is None:
        return
    kind, _, rest = target.partition(":")
    if kind == "client":
        if not (rest.isascii() and rest.isdigit() and int(rest) < clients):
            raise UsageError(f"{where}: no client {rest!r} in this run (clients 0 to "
                             f"{clients - 1}, --clients {clients})")
    elif kind == "node":
        names = [f"n{i + 1}" for i in range(nodes)]
        wanted = rest.split(",")
        unknown = [w for w in wanted if w not in names]
        if unknown:
            raise UsageError(f"{where}: no DB node {unknown[0]!r} in this run (nodes: "
                             f"{', '.join(names)})")


def nemesis_name(item: str) -> str:
    """``partition:waiter`` -> ``partition``; a ``module:Class`` nemesis stays whole."""
    name, sep, target = item.rpartition(":")
    if sep and name and (target in ROLE_WORDS or target.startswith(("node=", "client="))):
        return name
    return item


def nemesis_target(item: str) -> str | None:
    name = nemesis_name(item)
    if name == item:
        return None
    target = item[len(name) + 1:]
    return target.replace("=", ":", 1)  # node=n2 -> node:n2 (":" already splits name:target)


ROLE_WORDS = ("holder", "waiter", "any", "leader", "follower", "minority", "majority", "all")


def parse_range(option: str, value: Any) -> tuple[float, float]:
    """``1.5`` or ``"1-6"`` (or ``[1, 6]``) seconds -> (min, max)."""
    if isinstance(value, list | tuple) and len(value) == 2:
        lo, hi = value
    elif isinstance(value, str) and "-" in value.strip()[1:]:
        lo, _, hi = value.strip().partition("-")
    else:
        lo = hi = value
    try:
        out = (float(lo), float(hi))
    except (TypeError, ValueError):
        raise UsageError(f"{option} must be seconds, or a range MIN-MAX, got {show(value)}"
                         ) from None
    if not all(math.isfinite(v) and v >= 0 for v in out) or out[0] > out[1]:
        raise UsageError(f"{option} must be seconds >= 0 (MIN-MAX with MIN <= MAX), got "
                         f"{show(value)}")
    if out[1] > MAX_WAIT:
        raise UsageError(f"{option} must be at most {MAX_WAIT:g} seconds, got {show(value)}")
    return out


@dataclass
class TestSpec:
    __test__ = False  # not a pytest test class
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
    ttl: float = defaults.TTL
    quiesce: float = 1.0
    name: str | None = None
    persistence: str = "none"  # the DB nodes' own: none | appendonly (where the db has it)
    nemesis_options: dict[str, Any] = field(default_factory=dict)  # e.g. clock-nodes=all
    lock_options: dict[str, Any] = field(default_factory=dict)  # the lock's declared options
    hold: Any = None  # seconds a holder works under the lock: 1.5 or "1-6" (default: lock's)
    think: Any = None  # seconds a client waits between sessions
    acquire_timeout: float | None = None  # seconds an acquire may take
    keys: int = 1  # independent locks; client p works on key p mod keys
    hosts: str | None = None  # the ssh backend's HOSTS.toml
    resource: str | None = None  # the protected resource: redis | postgres (default: below)
    resource_mode: str | None = None  # plain | fenced | version | cas (default: the workload's)
    # A fault schedule to run instead of drawing one ({"steps": [...]}, as test.json keeps it;
    # [[step]] tables in a TOML spec): harness run --replay, harness explore.
    schedule: dict[str, Any] | None = None
    # direct: clients connect straight to the nodes (unless a nemesis needs the link layer);
    # proxy: every client link (and peer link, where it can) goes through the link layer
    links: str = "direct"
    op_timeout: float | None = None  # seconds a client waits for one reply (None: the default,
    # or more if a nemesis needs it: stall-grant's late reply must still be awaited)
    # The lock's own declarations, resolved by validate: does its release wait for a reply,
    # and how long does it wait for one request's (what the faults and their checker read)
    release_waits: bool = True
    request_timeout: float | None = None
    release_frees_others: bool | None = None  # can its release remove another's hold?

    def __post_init__(self) -> None:
        if self.seed is None:
            self.seed = random.SystemRandom().randrange(1, 2**31)

    def validate(self, registry: Registry | None = None) -> TestSpec:
        """The spec checked, every default applied (UsageError, one line, otherwise); the
        test it resolves to is kept for the run (:meth:`resolved`)."""
        self.resolve(registry)
        return self

    def resolved(self, registry: Registry | None = None) -> ResolvedTest:
        """The test this spec was validated into (resolved now if it was not)."""
        reg = registry or default_registry()
        known: tuple[Registry, ResolvedTest] | None = getattr(self, "_resolved", None)
        return known[1] if known is not None and known[0] is reg else self.resolve(reg)

    def resolve(self, registry: Registry | None = None) -> ResolvedTest:
        """Check the spec, apply every default and build the test: each role loaded once,
        the roles checked against each other once (:meth:`ResolvedTest.check`)."""
        reg = registry or default_registry()
        db, lock, workload = (role(reg, kind, name) for kind, name in (
            ("dbs", self.db), ("locks", self.lock), ("workloads", self.workload)))
        check_backend(self.backend)
        for item in self.nemesis:
            check_role_word(item, reg)
            check_aim(f"--nemesis {item}", reg.load("nemeses", nemesis_name(item)),
                      nemesis_target(item))
        if self.nodes is None:
            self.nodes = int(db.cls.default_nodes)
        positive("--nodes", self.nodes, integer=True, limit=9)
        least = db.cls.min_nodes
        if self.nodes < least:
            raise UsageError(f"--db {self.db} needs --nodes {least} or more, got {self.nodes}")
        modes = tuple(db.cls.persistence_modes)
        if self.persistence not in modes:
            raise UsageError(f"--persistence {self.persistence!r}: --db {self.db} has "
                             f"{', '.join(modes)}")
        check_types(asdict(self))
        positive("--clients", self.clients, integer=True, limit=200)
        positive("--time-limit", self.time_limit, limit=MAX_TIME_LIMIT)
        for item in self.nemesis:
            check_target_exists(f"--nemesis {item}", nemesis_target(item), self.nodes,
                                self.clients)
        self._check_schedule(reg)
        nemeses = {name: role(reg, "nemeses", name) for name in self.fault_names}
        self.nemesis_options = parse_options(
            self.nemesis_options, option_table(r.cls for r in nemeses.values()),
            "--nemesis-opt", f"the nemeses of this run ({', '.join(self.nemesis) or 'none'})")
        self.lock_options = parse_options(self.lock_options, option_table([lock.cls]),
                                          "--lock-opt", f"lock {self.lock}")
        for option, value in (("--hold", self.hold), ("--think", self.think)):
            if value is not None:
                parse_range(option, value)
        if self.acquire_timeout is not None:
            positive("--acquire-timeout", self.acquire_timeout, limit=MAX_WAIT)
        positive("--keys", self.keys, integer=True, limit=self.clients)
        self._check_hosts()
        if self.backend == "ssh" and any(
                ClockFaults in requires(n.cls) and patches_vdso(
                    db.cls, n.cls.clock_id(self.nemesis_options)) for n in nemeses.values()):
            raise UsageError(f"--db {self.db}: its clocks are moved by patching its vDSO on "
                             "this machine, not over ssh (--backend local or docker)")
        positive("--ttl", self.ttl, limit=MAX_WAIT)
        if self.links not in LINKS:
            raise UsageError(f"--links {self.links!r}: use {' or '.join(LINKS)}")
        self.op_timeout = self.resolve_op_timeout({n: r.cls for n, r in nemeses.items()})
        self.release_waits = bool(getattr(lock.cls, "release_waits", True))
        self.release_frees_others = bool(getattr(lock.cls, "release_frees_others", False))
        per_request = getattr(lock.cls, "request_timeout", None)  # (ttl, op_timeout, options)
        wait = (per_request(self.ttl, self.op_timeout, self.lock_options)
                if callable(per_request) else self.op_timeout)
        positive(f"lock {self.lock}: request_timeout", wait, limit=MAX_WAIT)
        self.request_timeout = float(wait)
        if not 0 <= self.quiesce <= MAX_WAIT:
            raise UsageError(f"--quiesce must be 0 to {MAX_WAIT:g} seconds, got "
                             f"{self.quiesce!r}")
        if isinstance(self.seed, bool) or not isinstance(self.seed, int) or not (
                0 <= self.seed < 2**63):
            raise UsageError(f"--seed must be an integer from 0 to 2**63-1, got {self.seed!r}")
        resource = role(reg, "resources", self.resolve_resource(lock.cls, workload.cls))
        in_lock_db = is_session_lock(lock.cls) or (
            getattr(lock.cls, "resource_in_lock_db", False)
            and getattr(resource.cls, "db", "") == self.db)
        test = ResolvedTest(self, db, lock, workload, resource,
                            None if in_lock_db else reg.load("dbs", resource.cls.db),
                            nemeses, tuple(checks_of(workload.cls, self.to_dict(), reg)))
        hosts = load_hosts(self.hosts) if self.hosts is not None else None
        test.check(reg, environment=None if hosts is None
                   else lambda cap: hosts_environment(hosts, cap))
        self._resolved = (reg, test)
        return test

    def resolve_resource(self, lock: type, workload: type) -> str:
        """The resource and its mode, when not given: a lock that writes in its own
        transaction needs the resource in its database, and a lock that keeps it there
        (``resource_in_lock_db``) gets it there; else the workload's choice (the
        ``idempotent`` workload stores keys in PostgreSQL), else Redis. The mode: ``fenced``
        for a workload that fences (``fenced = True``), else ``plain``."""
        if self.resource is None:
            if is_session_lock(lock) or getattr(lock, "resource_in_lock_db", False):
                self.resource = self.db
            else:
                self.resource = str(getattr(workload, "default_resource", defaults.RESOURCE))
        fenced = bool(getattr(workload, "fenced", False))
        if fenced and self.resource_mode not in (None, "fenced"):
            raise UsageError(f"--workload {self.workload} writes with fencing tokens: "
                             f"--resource-mode fenced, not {self.resource_mode}")
        self.resource_mode = defaults.resource_mode(self.resource_mode, fenced)
        return self.resource

    def resolve_op_timeout(self, nemeses: dict[str, type]) -> float:
        """The client's per-request timeout: as given, else the default, or what a nemesis
        needs (``op_timeout(ttl, options)``: a fault that makes a reply late must not be
        outwaited by the client's own timeout). Too short a given one is a usage error."""
        needs = {name: float(need) for name, cls in nemeses.items()
                 if callable(hook := getattr(cls, "op_timeout", None))
                 and (need := hook(self.ttl, self.nemesis_options)) is not None}
        if self.op_timeout is None:
            return max([defaults.OP_TIMEOUT, *needs.values()])
        positive("--op-timeout", self.op_timeout, limit=MAX_WAIT)
        for name, need in needs.items():
            if self.op_timeout < need:
                raise UsageError(f"--op-timeout {self.op_timeout:g}: --nemesis {name} needs "
                                 f"the client to wait at least {need:g} s for a reply (or it "
                                 "gives up before the fault shows); leave --op-timeout out or "
                                 "raise it")
        return float(self.op_timeout)

    @property
    def nemesis_names(self) -> list[str]:
        """The faults without their targets (``partition:waiter`` -> ``partition``)."""
        return [nemesis_name(n) for n in self.nemesis]

    @property
    def fault_names(self) -> list[str]:
        """Every fault the run sets up: the nemeses, then those only the schedule names."""
        steps = self.fault_schedule().fault_order() if self.schedule else []
        return list(dict.fromkeys([*self.nemesis_names, *steps]))

    def fault_schedule(self) -> Schedule:
        """The schedule this spec gives (empty: the run draws one from --nemesis)."""
        return from_dict(self.schedule, "schedule") if self.schedule else Schedule()

    def _check_schedule(self, reg: Registry) -> None:
        """Each step names a nemesis, a role it can aim at and options it has (typed here)."""
        if self.schedule is None:
            return
        steps = []
        assert self.nodes is not None
        for i, step in enumerate(from_dict(self.schedule, "schedule").steps):
            where = f"schedule step {i + 1} ({step.fault})"
            if step.at >= self.time_limit:
                raise UsageError(f"{where}: at = {step.at:g} s is not inside the run's time "
                                 f"limit ({self.time_limit:g} s): it would never start")
            if step.duration is not None and step.duration > MAX_WAIT:
                raise UsageError(f"{where}: duration must be at most {MAX_WAIT:g} seconds, "
                                 f"got {step.duration:g}")
            check_target_exists(where, step.target, self.nodes, self.clients)
            name = nemesis_name(step.fault)
            if name != step.fault:
                raise UsageError(f"{where}: fault names a target: write fault = {name!r} and "
                                 f"target = {nemesis_target(step.fault)!r}")
            check_role_word(step.fault, reg)
            cls = reg.load("nemeses", step.fault)
            check_aim(where, cls, step.target)
            params = parse_options(step.params, getattr(cls, "options", {}) or {},
                                   f"{where} params", f"nemesis {step.fault}")
            check_step = getattr(cls, "check_step", None)  # params one step cannot change
            if callable(check_step) and (reason := check_step(self.nemesis_options, params)):
                raise UsageError(f"{where}: {reason}")
            steps.append(dataclasses.replace(step, params=params))
        self.schedule = Schedule(tuple(steps)).to_dict()

    def workload_options(self) -> dict[str, float]:
        """The workload's shape as the spec gives it (the lock's defaults fill the rest)."""
        out: dict[str, float] = {}
        if self.hold is not None:
            out["hold_min"], out["hold_max"] = parse_range("--hold", self.hold)
        if self.think is not None:
            out["think_min"], out["think_max"] = parse_range("--think", self.think)
        if self.acquire_timeout is not None:
            out["acquire_timeout"] = float(self.acquire_timeout)
        return out

    def _check_hosts(self) -> None:
        """--backend ssh and --hosts go together; the file is read and checked now."""
        if self.backend != "ssh":
            if self.hosts is not None:
                raise UsageError(f"--hosts is for --backend ssh, not {self.backend}")
            return
        if self.hosts is None:
            raise UsageError("--backend ssh needs --hosts HOSTS.toml (make test hosts with "
                             "`harness hosts up 3`)")
        if not isinstance(self.hosts, str):
            raise UsageError(f"hosts must be the path of a HOSTS.toml file, got {self.hosts!r}")
        assert self.nodes is not None
        self.hosts = str(Path(self.hosts).expanduser().resolve())
        check_fits(load_hosts(self.hosts), self.nodes, self.clients)

    @property
    def test_name(self) -> str:
        if self.name:
            return safe_name(self.name)
        nem = "+".join(self.nemesis) or "none"
        name = f"{self.db}_{self.lock}_{self.workload}_{nem}"
        if self.resource not in (None, "redis") or self.resource_mode in ("version", "cas"):
            name += f"_{self.resource}-{self.resource_mode}"
        return safe_name(name)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    def to_toml(self, leave: Iterable[str] = ()) -> str:
        """The spec as a TOML file for ``harness run --config`` (``harness run
        --print-config``): each key given a value (the lock's resolved ones and ``leave``
        left out), the schedule as ``[[step]]`` tables."""
        left = {*RESOLVED_KEYS, *leave, "schedule"}
        data = {k.replace("_", "-"): v for k, v in self.to_dict().items()
                if v is not None and v != {} and k not in left}
        schedule = "" if self.schedule is None or "schedule" in leave else (
            "\n" + self.fault_schedule().to_toml())
        return tomli_w.dumps(data) + schedule

    @classmethod
    def from_dict(cls, data: dict[str, Any], registry: Registry | None = None) -> TestSpec:
        if not isinstance(data, dict):
            raise UsageError(f"a test spec must be a table of keys, got {type(data).__name__}")
        names = {f.name for f in fields(cls)}
        norm = {str(k).replace("-", "_"): v for k, v in data.items()}
        unknown = sorted(set(norm) - names)
        if unknown:
            raise UsageError(f"unknown spec key {unknown[0]!r}: use one of "
                             + ", ".join(sorted(n.replace("_", "-") for n in names)))
        reg = registry or default_registry()
        check_types(norm)
        if isinstance(norm.get("nemesis"), str):
            norm["nemesis"] = parse_nemeses(norm["nemesis"], reg)
        if norm.get("schedule") is not None:
            schedule = from_dict(norm["schedule"], "schedule")  # one line if it is not one
            norm["schedule"] = schedule.to_dict()
            if "nemesis" not in norm:  # a replayed schedule alone: its faults name the run
                norm["nemesis"] = schedule.fault_order()
        if "db" in norm and "lock" not in norm:  # --db zookeeper alone: that db's own lock
            default_lock = reg.load("dbs", str(norm["db"])).default_lock
            if default_lock:
                norm["lock"] = default_lock
        return cls(**norm)


def role(reg: Registry, kind: str, name: str) -> Role:
    """A role of the run: its entry and its class (loaded and checked)."""
    return Role(reg.entry(kind, name), reg.load(kind, name))


def option_table(classes: Iterable[type]) -> dict[str, Option]:
    """The options the classes declare, in one table."""
    table: dict[str, Option] = {}
    for cls in classes:
        table.update(getattr(cls, "options", {}) or {})
    return table


def check_aim(where: str, nemesis: type, target: str | None) -> None:
    """A nemesis aimed at ``target`` (a role word, node:NAME, client:N; None: its own
    choice) takes it: one line naming ``where`` otherwise."""
    try:
        nemesis.check_target(target)  # type: ignore[attr-defined]
    except AttributeError:
        if target is not None:
            raise UsageError(f"{where}: {nemesis.__name__} takes no target roles") from None
    except ValueError as e:
        raise UsageError(f"{where}: {e}") from None


def positive(option: str, value: Any, *, integer: bool = False, limit: float | None = None
             ) -> None:
    ok_type = isinstance(value, int) if integer else isinstance(value, int | float)
    if (isinstance(value, bool) or not ok_type or not math.isfinite(value)  # type: ignore[arg-type]
            or value <= 0):
        kind = "a positive integer" if integer else "a positive number of seconds"
        raise UsageError(f"{option} must be {kind}, got {value!r}")
    if limit is not None and value > limit:
        raise UsageError(f"{option} must be at most {limit:g}, got {value!r}")
