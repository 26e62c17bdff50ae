"""The lock registry: names for ``--lock``, and the plugin path ``package.module:Class``."""

from __future__ import annotations

import importlib
from dataclasses import dataclass

from harness.errors import UsageError


@dataclass(frozen=True)
class LockInfo:
    name: str
    target: str  # "module:Class"
    dbs: tuple[str, ...]
    tokens: bool  # does a grant carry a fencing token?
    summary: str


# Single-instance Redis locks run on one node, or on the primary that Sentinel names.
SINGLE_REDIS = ("redis", "redis-sentinel")

LOCKS: dict[str, LockInfo] = {
    info.name: info
    for info in (
        LockInfo("redis-setnx", "workloads.locks.redis_single:SetNxLock", SINGLE_REDIS, False,
                 "SET key uuid NX PX ttl; release by Lua compare-and-delete"),
        LockInfo("redis-setnx-expire", "workloads.locks.redis_single:SetNxExpireLock",
                 SINGLE_REDIS, False, "SETNX then EXPIRE (two commands); compare-and-delete"),
        LockInfo("redis-del", "workloads.locks.redis_single:DelLock", SINGLE_REDIS, False,
                 "SET NX PX; release by a bare DEL (deletes whoever holds it)"),
        LockInfo("redis-get-del", "workloads.locks.redis_single:GetDelLock", SINGLE_REDIS,
                 False,
                 "SET NX PX; release by GET, compare, then DEL (not atomic)"),
        LockInfo("redis-fenced", "workloads.locks.redis_single:FencedLock", SINGLE_REDIS, True,
                 "SET NX PX plus INCR in one script: the counter is a fencing token"),
        LockInfo("zookeeper", "workloads.locks.zookeeper:KazooLock", ("zookeeper",), True,
                 "kazoo's Lock recipe (ephemeral sequential znode); token: its sequence number"),
        LockInfo("zookeeper-listener", "workloads.locks.zookeeper:KazooListenerLock",
                 ("zookeeper",), True,
                 "kazoo's Lock plus a state listener: SUSPENDED/LOST = lost, stop working"),
        LockInfo("etcd", "workloads.locks.etcd:Etcd3Lock", ("etcd",), True,
                 "python-etcd3 lock(): a key on a lease TTL, never refreshed; token: revision"),
        LockInfo("etcd-keepalive", "workloads.locks.etcd:EtcdMutex", ("etcd",), True,
                 "Go's concurrency.Mutex: lease kept alive by a thread; token: revision"),
    )
}
LOCKS.update({
    info.name: info
    for info in (
        LockInfo("redlock", "workloads.locks.redlock:RedlockLock", ("redis-masters", "redis"),
                 False, "Redlock: SET NX PX on N masters, quorum, validity = ttl - elapsed - "
                 "drift"),
        LockInfo("redlock-fenced", "workloads.locks.redlock:FencedRedlockLock",
                 ("redis-masters", "redis"), True,
                 "Redlock plus a per-master INCR; token = max of the quorum's (weak)"),
        LockInfo("redisson", "workloads.locks.redisson:RedissonLock", SINGLE_REDIS, False,
                 "Redisson RLock: reentrant hash lock, Lua scripts, watchdog renews every TTL/3"),
        LockInfo("redis-py", "workloads.locks.redis_py:RedisPyLock", SINGLE_REDIS, False,
                 "redis-py's redis.lock.Lock as documented (SET NX PX, Lua release)"),
    )
})


def lookup(name: str) -> LockInfo:
    """A registered lock, or a plugin ``package.module:Class`` (checked by importing it)."""
    if name in LOCKS:
        return LOCKS[name]
    if ":" in name:
        load_class(name)
        return LockInfo(name, name, (), True, "plugin")
    known = ", ".join(sorted(LOCKS))
    raise UsageError(f"unknown lock {name!r}: use one of {known}, or package.module:Class")


def load_class(target: str) -> type:
    module_name, _, attr = target.partition(":")
    try:
        module = importlib.import_module(module_name)
    except ImportError as e:
        raise UsageError(f"cannot import lock module {module_name!r}: {e}") from None
    cls = getattr(module, attr, None)
    if not isinstance(cls, type):
        raise UsageError(f"lock plugin {target!r}: {module_name} has no class {attr!r}")
    for method in ("acquire", "release"):
        if not callable(getattr(cls, method, None)):
            raise UsageError(f"lock plugin {target!r} has no {method}() method")
    return cls
