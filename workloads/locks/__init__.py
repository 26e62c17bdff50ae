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


LOCKS: dict[str, LockInfo] = {
    info.name: info
    for info in (
        LockInfo("redis-setnx", "workloads.locks.redis_single:SetNxLock", ("redis",), False,
                 "SET key uuid NX PX ttl; release by Lua compare-and-delete"),
        LockInfo("redis-setnx-expire", "workloads.locks.redis_single:SetNxExpireLock",
                 ("redis",), False, "SETNX then EXPIRE (two commands); compare-and-delete"),
        LockInfo("redis-del", "workloads.locks.redis_single:DelLock", ("redis",), False,
                 "SET NX PX; release by a bare DEL (deletes whoever holds it)"),
        LockInfo("redis-get-del", "workloads.locks.redis_single:GetDelLock", ("redis",), False,
                 "SET NX PX; release by GET, compare, then DEL (not atomic)"),
        LockInfo("redis-fenced", "workloads.locks.redis_single:FencedLock", ("redis",), True,
                 "SET NX PX plus INCR in one script: the counter is a fencing token"),
    )
}


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
