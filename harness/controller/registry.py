"""One registry of every role: built-ins, installed plugins, and ``module:Class`` by hand.

Built-ins are the table below (a new built-in role is one file plus one line here). Plugins are
found the way pytest finds ``pytest11`` plugins: entry points of installed distributions, in
the groups ``lock_harness.locks``, ``lock_harness.nemeses``, ``lock_harness.dbs``,
``lock_harness.workloads`` and ``lock_harness.checkers``, each entry ``name = "module:Class"``.
Nothing is imported until it is asked for, so ``harness check`` never loads a lock library.

A lock can also be a program in any language: ``exec:PATH`` names the program at PATH, spoken
to over the client protocol (``docs/clients.md``, :mod:`workloads.locks.external`); the named
external clients (``curator``, ...) are built-ins like any other lock.

Several names may load one class: a family (``partition``, ``clock``) declares its members'
old names as ``aliases`` with what each presets (``partition-halves``: the shape ``halves``),
and the registry loads each name as the family's class with its presets.

Each role is a class that declares itself (``name``, ``summary``; a lock its ``dbs`` and
``tokens``; a nemesis what it ``requires``): the registry checks those declarations when it
loads a class, and whether a nemesis can run on a DB, in one place (:meth:`Registry.check_run`),
with one clear line when it cannot.
"""

from __future__ import annotations

import ast
import importlib.metadata as md
import inspect
import json
import os
import sys
import textwrap
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from functools import cache
from typing import Any

from dbs.base import DB
from harness.core import capabilities
from harness.core.errors import UsageError
from harness.core.locks import MOVED_TO_HARNESS, WORKLOAD_KEYS, moved_warning
from harness.core.options import declaration_problem as options_problem
from harness.core.roles import RoleError, load_object
from harness.core.schedule import MAX_WAIT
from harness.core.shipped import shipped
from harness.core.text import show

DISTRIBUTION = "lock-harness"
GROUPS = {
    "locks": "lock_harness.locks",
    "nemeses": "lock_harness.nemeses",
    "dbs": "lock_harness.dbs",
    "workloads": "lock_harness.workloads",
    "checkers": "lock_harness.checkers",
    "resources": "lock_harness.resources",
}
SINGULAR = {"locks": "lock", "nemeses": "nemesis", "dbs": "db", "workloads": "workload",
            "checkers": "checker", "resources": "resource"}

BUILTINS: dict[str, dict[str, str]] = {
    "dbs": {
        "redis": "dbs.redis:RedisDB",
        "redis-masters": "dbs.redis_masters:RedisMastersDB",
        "redis-sentinel": "dbs.redis_sentinel:RedisSentinelDB",
        "zookeeper": "dbs.zookeeper:ZooKeeperDB",
        "etcd": "dbs.etcd:EtcdDB",
        "postgres": "dbs.postgres:PostgresDB",
        "dynamodb": "dbs.dynamodb:DynamoDB",
        "spanner": "dbs.spanner:SpannerDB",
    },
    "locks": {
        "redis-setnx": "workloads.locks.redis_single:SetNxLock",
        "redis-setnx-expire": "workloads.locks.redis_single:SetNxExpireLock",
        "redis-del": "workloads.locks.redis_single:DelLock",
        "redis-get-del": "workloads.locks.redis_single:GetDelLock",
        "redis-fenced": "workloads.locks.redis_single:FencedLock",
        "zookeeper": "workloads.locks.zookeeper:KazooLock",
        "zookeeper-listener": "workloads.locks.zookeeper:KazooListenerLock",
        "etcd": "workloads.locks.etcd:Etcd3Lock",
        "etcd-keepalive": "workloads.locks.etcd:EtcdMutex",
        "redlock": "workloads.locks.redlock:RedlockLock",
        "redlock-fenced": "workloads.locks.redlock:FencedRedlockLock",
        "redisson": "workloads.locks.redisson:RedissonLock",
        "redis-py": "workloads.locks.redis_py:RedisPyLock",
        "pg-row": "workloads.locks.postgres:RowLock",
        "pg-advisory": "workloads.locks.postgres:AdvisoryLock",
        "pg-advisory-xact": "workloads.locks.postgres:AdvisoryXactLock",
        "curator": "workloads.locks.external:CuratorLock",
        "go-etcd-mutex": "workloads.locks.external:GoEtcdMutexLock",
        "node-redlock": "workloads.locks.external:NodeRedlockLock",
        "redis-semaphore": "workloads.locks.external:RedisSemaphoreLock",
        "dynamodb-lease": "workloads.locks.dynamodb_lease:DynamoLeaseLock",
        "dynamodb-cas": "workloads.locks.dynamodb_cas:DynamoCasLock",
        "spanner-lease": "workloads.locks.spanner_lease:SpannerLeaseLock",
        "spanner-lease-client-clock": "workloads.locks.spanner_lease:SpannerClientClockLock",
        # the lock zoo (workloads/zoo/, the extra [zoo]): libraries as their READMEs show
        "python-redis-lock": "workloads.zoo.python_redis_lock:PythonRedisLock",
        "python-redis-lock-renew": "workloads.zoo.python_redis_lock:PythonRedisLockRenew",
        "pottery-redlock": "workloads.zoo.pottery_redlock:PotteryRedlock",
        "portalocker-redis": "workloads.zoo.portalocker_redis:PortalockerRedisLock",
        "portalocker-redis-fenced": "workloads.zoo.portalocker_redis:PortalockerRedisFenced",
        "sherlock": "workloads.zoo.sherlock_redis:SherlockRedisLock",
        "sherlock-no-expire": "workloads.zoo.sherlock_redis:SherlockNoExpire",
        "tooz-redis": "workloads.zoo.tooz_lock:ToozRedisLock",
        "tooz-zookeeper": "workloads.zoo.tooz_lock:ToozZookeeperLock",
        "tooz-etcd3gw": "workloads.zoo.tooz_lock:ToozEtcd3gwLock",
        "aioredlock": "workloads.zoo.aioredlock_lock:AioredlockLock",
        "sesame-redlock": "workloads.zoo.npm:SesameRedlock",
        "etcd3-lock": "workloads.zoo.npm:Etcd3NpmLock",
        "advisory-lock": "workloads.zoo.npm:AdvisoryLockNpm",
        "dynamodb-lock-client": "workloads.zoo.npm:DynamodbLockClient",
    },
    "workloads": {
        "mutex": "workloads.mutex:MutexWorkload",
        "fenced": "workloads.fenced:FencedWorkload",
        "lock": "workloads.lock_only:LockWorkload",
        "counter": "workloads.counter:CounterWorkload",
        "idempotent": "workloads.idempotent:IdempotentWorkload",
    },
    "nemeses": {
        "pause": "nemesis.process_faults:PauseHolder",
        "pause-node": "nemesis.process_faults:PauseNode",
        "kill": "nemesis.process_faults:KillNode",
        "partition": "nemesis.partition:Partition",
        "clock": "nemesis.clock:Clock",
        "clock-client": "nemesis.client_clock:ClientClock",
        "partition-halves": "nemesis.partition:Partition",
        "partition-one": "nemesis.partition:Partition",
        "partition-ring": "nemesis.partition:Partition",
        "partition-bridge": "nemesis.partition:Partition",
        "partition-leader": "nemesis.partition:Partition",
        "pause-leader": "nemesis.process_faults:PauseNode",
        "clock-back": "nemesis.clock:Clock",
        "clock-strobe": "nemesis.clock:Clock",
        "kill-majority": "nemesis.kill_majority:KillMajority",
        "kill-majority-delayed": "nemesis.kill_majority:KillMajority",
        "partition-minority": "nemesis.partition:Partition",
        "failover": "nemesis.failover:SentinelFailover",
        "crash-client": "nemesis.crash_client:CrashClient",
        "delay": "nemesis.delay:Delay",
        "stall-grant": "nemesis.stall_grant:StallGrant",
        "loss": "nemesis.loss:Loss",
        "partition-oneway": "nemesis.partition:Partition",
        "lag-replication": "nemesis.lag_replication:LagReplication",
        "power-loss": "nemesis.power_loss:PowerLoss",
        "membership": "nemesis.membership:MembershipChange",
        "membership-replace": "nemesis.membership:MembershipChange",
    },
    "checkers": {
        "mutex": "checker.mutex:MutexChecker",
        "fencing": "checker.fencing:FencingChecker",
        "stats": "checker.stats:StatsChecker",
        "linearizable": "checker.linearizable:LinearizableChecker",
        "lost-updates": "checker.lost_updates:LostUpdatesChecker",
        "liveness": "checker.liveness:LivenessChecker",
        "availability": "checker.availability:AvailabilityChecker",
        "faults": "checker.faults:FaultsChecker",
        "idempotent": "checker.idempotent:IdempotentChecker",
    },
    "resources": {
        "redis": "workloads.resources.redis:RedisResource",
        "postgres": "workloads.resources.postgres:PostgresResource",
        "spanner": "workloads.resources.spanner:SpannerResource",
    },
}

EXEC_PREFIX = "exec:"  # --lock exec:PATH: a lock program at PATH
EXEC_TARGET = "workloads.locks.external:ExecLock"

# What a class of each kind must have (attributes that are callable).
REQUIRED_METHODS = {
    "locks": ("acquire", "release"),
    "nemeses": ("select", "start", "stop", "teardown"),
    "dbs": ("files", "argv", "ready", "check_environment"),
    "workloads": ("checkers", "run"),
    "checkers": ("check",),
    "resources": ("setup", "read", "write", "read_log", "read_state", "close"),
}


@dataclass(frozen=True)
class Entry:
    """A role as the registry knows it before loading it."""

    kind: str
    name: str
    target: str  # module:Class
    distribution: str | None  # None: given by hand (--lock module:Class)
    version: str | None
    options: tuple[tuple[str, str], ...] = ()  # given to the class with the run's options

    @property
    def origin(self) -> str:
        if self.distribution is None:
            return "by path"
        return f"{self.distribution} {self.version or '?'}"

    def record(self) -> dict[str, Any]:
        """What test.json keeps of a plugin a run used."""
        out = {"kind": SINGULAR[self.kind], "name": self.name, "target": self.target,
               "distribution": self.distribution, "version": self.version}
        if self.options:
            out["options"] = dict(self.options)
        return out


Check = tuple[Entry, Callable[..., Any], dict[str, Any]]  # a checker, its function, params


def library_version(distribution: str) -> str | None:
    """The installed version of the library a lock wraps (its class's ``library``), or None;
    an npm package (``npm:NAME``): the version a client's package.json pins."""
    if distribution.startswith("npm:"):
        for manifest in sorted(shipped("clients").glob("*/package.json")):
            pinned = json.loads(manifest.read_text()).get("dependencies", {})
            if distribution[4:] in pinned:
                return str(pinned[distribution[4:]])
        return None
    try:
        return md.version(distribution)
    except md.PackageNotFoundError:
        return None


@cache
def own_version() -> str:
    try:
        return md.version(DISTRIBUTION)
    except md.PackageNotFoundError:
        return "source"


class Registry:
    """Every role by kind and name. Cheap to build: nothing is imported until loaded."""

    def __init__(self, *, entry_points: bool = True) -> None:
        self._entries: dict[str, dict[str, Entry]] = {}
        self.conflicts: list[str] = []
        for kind, table in BUILTINS.items():
            self._entries[kind] = {name: Entry(kind, name, target, DISTRIBUTION, own_version())
                                   for name, target in table.items()}
        if entry_points:
            self._add_entry_points()
        self._loaded: dict[tuple[str, str], type] = {}

    def _add_entry_points(self) -> None:
        for kind, group in GROUPS.items():
            for ep in md.entry_points(group=group):
                dist = getattr(ep, "dist", None)
                entry = Entry(kind, ep.name, ep.value, getattr(dist, "name", None) or "?",
                              getattr(dist, "version", None))
                known = self._entries[kind].get(ep.name)
                if known is not None:
                    self.conflicts.append(f"{SINGULAR[kind]} {ep.name!r} of {entry.origin} is "
                                          f"ignored: {known.origin} has one of that name")
                    continue
                self._entries[kind][ep.name] = entry

    # lookups ---------------------------------------------------------------------------------
    def names(self, kind: str) -> list[str]:
        return list(self._entries[kind])

    def entries(self, kind: str) -> list[Entry]:
        return list(self._entries[kind].values())

    def entry(self, kind: str, name: str) -> Entry:
        """The entry for ``name``; ``module:Class`` stands for itself (the escape hatch)."""
        found = self._entries[kind].get(name)
        if found is not None:
            return found
        if kind == "locks" and name.startswith(EXEC_PREFIX):
            return exec_entry(name)
        if ":" in name and kind in GROUPS:
            return Entry(kind, name, name, None, None)
        known = ", ".join(self._entries[kind])
        hatch = ", or package.module:Class, or exec:PATH" if kind == "locks" else ""
        raise UsageError(f"unknown {SINGULAR[kind]} {name!r}: use one of {known}{hatch}")

    def installed(self, kind: str, name: str) -> type | None:
        """The class registered under ``name``, or None when none is installed here (what
        presentation asks of a recorded name: a ``module:Class`` it names is never imported)."""
        if name not in self.names(kind):
            return None
        try:
            return self.load(kind, name)
        except UsageError:
            return None

    def load(self, kind: str, name: str) -> type:
        """The class for ``name``, imported and checked (UsageError, one line, otherwise)."""
        key = (kind, name)
        if key in self._loaded:
            return self._loaded[key]
        entry = self.entry(kind, name)
        what = f"{SINGULAR[kind]} {name!r}" + (f" ({entry.origin})" if entry.distribution
                                                 not in (None, DISTRIBUTION) else "")
        try:
            cls = load_object(entry.target)
        except RoleError as e:
            raise UsageError(f"{what}: {e}") from None
        if not isinstance(cls, type):
            raise UsageError(f"{what}: {entry.target} is not a class")
        if name in (getattr(cls, "aliases", None) or {}):
            cls = cls.alias(name)  # a member of a family under its own name (clock-back)
        missing = [m for m in REQUIRED_METHODS[kind] if not callable(getattr(cls, m, None))]
        if missing:
            raise UsageError(f"{what}: {entry.target} has no {missing[0]}() method")
        if kind == "dbs" and not issubclass(cls, DB):  # its optional members' defaults
            raise UsageError(f"{what}: {entry.target} does not subclass dbs.base.DB")
        declared = getattr(cls, "name", None)
        if entry.distribution is not None and declared and declared != name:
            raise UsageError(f"{what}: the class {entry.target} calls itself {declared!r}")
        problem = declaration_problem(kind, cls)
        if problem is not None:
            raise UsageError(f"{what}: {entry.target}.{problem}")
        if kind == "locks":
            for moved, where in moved_reads(cls):  # once a class, before any server starts
                print(f"harness: {what}: {where}: {moved_warning(moved)}", file=sys.stderr)
        self._loaded[key] = cls
        return cls

    def summary(self, kind: str, name: str) -> str:
        try:
            return str(getattr(self.load(kind, name), "summary", "") or "")
        except UsageError as e:
            return f"(cannot load: {e})"

    # declarations ----------------------------------------------------------------------------
    def lock_dbs(self, name: str) -> tuple[str, ...]:
        return tuple(getattr(self.load("locks", name), "dbs", ()) or ())

    def lock_tokens(self, name: str) -> bool:
        return bool(getattr(self.load("locks", name), "tokens", False))

    def lock_unavailable(self, name: str) -> str | None:
        """Why the lock cannot run on this machine (an external client that is not built),
        or None. A lock class says so with an optional ``unavailable()`` class method."""
        check = getattr(self.load("locks", name), "unavailable", None)
        return check() if callable(check) else None

    def nemesis_requires(self, name: str, options: Mapping[str, Any] | None = None
                         ) -> tuple[type, ...]:
        """What the nemesis requires, with what its options add (``needs(options)``: a delay
        on the links between nodes needs those links in the link layer)."""
        return requires(self.load("nemeses", name), options)

    def dbs_with(self, capability: type) -> list[str]:
        """The registered DBs that have ``capability`` (for the hint in an error)."""
        out = []
        for name in self.names("dbs"):
            try:
                cls = self.load("dbs", name)
            except UsageError:
                continue
            if isinstance(cls, capability):  # its members (issubclass refuses Membership's flags)
                out.append(name)
        return out


def check_environment(name: str, needs: Iterable[type], environment: Any) -> None:
    """UsageError, one line, if ``environment(capability)`` (None: not asked) gives a reason
    why an environment capability fault ``name`` needs is missing."""
    for cap in needs:
        if environment is not None and capabilities.is_environment(cap):
            reason = environment(cap)
            if reason is not None:
                raise UsageError(f"--nemesis {name}: {reason}")


def is_session_lock(lock: type) -> bool:
    """Does the lock write in its own transaction (``session(grant)``)?"""
    return callable(getattr(lock, "session", None))


def requires(nemesis: type, options: Mapping[str, Any] | None = None) -> tuple[type, ...]:
    """What a nemesis class requires, with what its options add (``needs(options)``: a delay
    on the links between nodes needs those links in the link layer)."""
    out = tuple(getattr(nemesis, "requires", ()) or ())
    needs = getattr(nemesis, "needs", None)
    if callable(needs):
        out += tuple(c for c in needs(dict(options or {})) if c not in out)
    return out


def declaration_problem(kind: str, cls: type) -> str | None:
    """What is wrong with what a role class declares, as ``field: reason`` (None: nothing).
    Every kind: ``options``; a lock also ``workload_defaults``, ``timeout_errors``, ``dbs``,
    ``crash_steps``; a checker its words (``figures``, ``violations``, ``caveats``)."""
    options = getattr(cls, "options", None)
    if options is not None:
        problem = options_problem(options)
        if problem is not None:
            return f"options: {problem}"
    if kind == "checkers":
        return _fields_problem(cls, (("figures", _figures_problem),
                                     ("violations", _violations_problem),
                                     ("caveats", _names_problem)))
    if kind != "locks":
        return None
    checks = (("workload_defaults", _workload_defaults_problem),
              ("timeout_errors", _timeout_errors_problem),
              ("dbs", _names_problem), ("crash_steps", _names_problem))
    return _fields_problem(cls, checks) or _setup_problem(cls)


def moved_reads(cls: type) -> list[tuple[str, str]]:
    """The keys of :data:`~harness.core.locks.MOVED_TO_HARNESS` a lock class (its own code and
    its bases') reads from ``.options`` (``options["k"]``, ``.get("k")``, ``"k" in``) without
    declaring an option of that name, each once with the first place (``file:line``): the
    release before this one gave them there; they are in ``config.harness`` now."""
    declared = getattr(cls, "options", None) or {}
    found: dict[str, tuple[str, int]] = {}
    for base in cls.__mro__:
        try:
            lines, first = inspect.getsourcelines(base)
            tree = ast.parse(textwrap.dedent("".join(lines)))  # (a nested class: dedented)
        except (OSError, TypeError, SyntaxError):
            continue  # no source (a built-in, a class made at run time): the client warns
        for node in ast.walk(tree):
            key = _options_key(node)
            if isinstance(key, ast.Constant) and key.value in MOVED_TO_HARNESS and \
                    key.value not in declared and key.value not in found:
                found[key.value] = (os.path.basename(inspect.getfile(base)),
                                    first + node.lineno - 1)
    return [(k, f"{f}:{n}") for k, (f, n) in sorted(found.items(), key=lambda kv: kv[1])]


def _options_key(node: ast.AST) -> ast.expr | None:
    """The key read from ``<x>.options`` by ``node`` (``[k]``, ``.get(k)``, ``k in``)."""
    if isinstance(node, ast.Subscript):
        return node.slice if _is_options(node.value) else None
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.args:
        return node.args[0] if node.func.attr == "get" and _is_options(node.func.value) \
            else None
    if isinstance(node, ast.Compare) and isinstance(node.ops[0], ast.In | ast.NotIn):
        return node.left if _is_options(node.comparators[0]) else None
    return None


def _is_options(node: ast.expr) -> bool:
    return isinstance(node, ast.Attribute) and node.attr == "options"


def _setup_problem(cls: type) -> str | None:
    """A lock's optional ``setup()``: a method, a coroutine function exactly when its
    ``acquire`` is one (a sync lock's ``async def setup`` would never be awaited)."""
    setup = getattr(cls, "setup", None)
    if setup is None:
        return None
    if not callable(setup):
        return f"setup: must be a method, got {show(setup, 60)}"
    is_async = inspect.iscoroutinefunction(getattr(cls, "acquire", None))
    if inspect.iscoroutinefunction(setup) != is_async:
        return ("setup: must be `async def` like its acquire" if is_async else
                "setup: must be a plain `def` like its acquire (it is called, not awaited)")
    return None


def _workload_defaults_problem(value: Any) -> str | None:
    if not isinstance(value, Mapping):
        return f"must be a dict of seconds, got {type(value).__name__}"
    for key, seconds in value.items():
        if key not in WORKLOAD_KEYS:
            return f"unknown key {show(key)} (use {', '.join(WORKLOAD_KEYS)})"
        if isinstance(seconds, bool) or not isinstance(seconds, int | float) or not (
                0 <= seconds <= MAX_WAIT):
            return f"{key} must be 0 to {MAX_WAIT:g} seconds, got {show(seconds)}"
    for lo, hi in (("hold_min", "hold_max"), ("think_min", "think_max")):
        if lo in value and hi in value and value[lo] > value[hi]:
            return f"{lo} {value[lo]:g} is more than {hi} {value[hi]:g}"
    for key in ("release_timeout", "held_poll", "acquire_timeout"):
        if key in value and not value[key] > 0:
            return f"{key} must be more than 0 seconds, got {show(value[key])}"
    return None


def _timeout_errors_problem(value: Any) -> str | None:
    if not isinstance(value, tuple | list):
        return f"must be a tuple of exception classes, got {type(value).__name__}"
    for item in value:
        if not (isinstance(item, type) and issubclass(item, Exception)):
            return f"{show(item, 60)} is not an exception class"
    return None


def _names_problem(value: Any) -> str | None:
    if isinstance(value, str) or not isinstance(value, tuple | list) or not all(
            isinstance(v, str) and v for v in value):
        return f"must be a tuple of names, got {show(value, 60)}"
    return None


def _figures_problem(value: Any) -> str | None:
    if not isinstance(value, Mapping) or not all(
            isinstance(k, str) and k and (w is None or (isinstance(w, str) and w))
            for k, w in value.items()):
        return f"must be a dict of result key -> words (or None), got {show(value, 60)}"
    return None


def _violations_problem(value: Any) -> str | None:
    if not isinstance(value, Mapping) or not all(
            isinstance(k, str) and k and isinstance(w, tuple | list) and len(w) == 2
            and all(isinstance(x, str) and x for x in w) for k, w in value.items()):
        return (f"must be a dict of result key -> (singular, plural) words, got "
                f"{show(value, 60)}")
    return None


def _fields_problem(cls: type, checks: Iterable[tuple[str, Callable[[Any], str | None]]]
                    ) -> str | None:
    """The first of ``cls``'s declared fields its check finds wrong, as ``field: reason``."""
    for field, check in checks:
        value = getattr(cls, field, None)
        if value is not None:
            problem = check(value)
            if problem is not None:
                return f"{field}: {problem}"
    return None


def exec_entry(name: str) -> Entry:
    """``exec:PATH``: the external-program lock, told where its program is."""
    path = name.removeprefix(EXEC_PREFIX)
    full = os.path.abspath(os.path.expanduser(path)) if path else ""
    if not full or not os.path.isfile(full) or not os.access(full, os.X_OK):
        raise UsageError(f"--lock {name}: {path or 'PATH'!r} is not an executable file "
                         "(exec:PATH runs a lock program, see docs/clients.md)")
    return Entry("locks", name, EXEC_TARGET, None, None, (("program", full),))


@cache
def default_registry() -> Registry:
    return Registry()
