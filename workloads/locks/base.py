"""The client-side Lock protocol every implementation (ours, a library's, a user's) follows.

A lock is built once per client process with ``Lock(config)``, where ``config`` is a
:class:`LockConfig` naming the DB nodes and options, and then used by one workload thread:

    grant = lock.acquire(timeout)   # -> Grant, or None when it certainly did not acquire
    lock.release(grant)             # -> True released, False it no longer held the lock

Either may raise :class:`Indeterminate` when it cannot know what happened (a timeout, a
connection cut mid-request): the workload records that op as ``info``, never ``fail``.

Optional: ``lock.held(grant) -> bool``, for a lock that can tell it was lost (a session
listener): the workload asks it while it works and stops as soon as it says no. And a class
attribute ``workload_defaults`` (MutexParams fields, e.g. :data:`LONG_CRITICAL_SECTIONS`) says
how the lock is used; the run's own workload options win over it.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Protocol, runtime_checkable


@dataclass(frozen=True)
class Grant:
    """What a successful acquire returns.

    ``token``: the fencing token, when the implementation has one (it must increase with grant
    order). ``validity``: the seconds the implementation promises the lock is ours, if it
    promises any. ``handle``: whatever the implementation needs to release it.
    """

    token: int | None = None
    validity: float | None = None
    handle: Any = None


@dataclass(frozen=True)
class Endpoint:
    name: str
    host: str
    port: int


@dataclass(frozen=True)
class LockConfig:
    """What a lock implementation is told: where the DB nodes are and how to behave."""

    nodes: tuple[Endpoint, ...]
    name: str = "lock"
    ttl: float = 2.0
    op_timeout: float = 1.0
    process: int = 0
    options: dict[str, Any] = field(default_factory=dict)


# Consensus locks guard long critical sections (a leader's term, a batch job): holds that span
# a session timeout or lease TTL, so that "it expired while its holder worked on" can happen.
LONG_CRITICAL_SECTIONS: dict[str, float] = {"hold_min": 1.0, "hold_max": 6.0,
                                            "acquire_timeout": 15.0}


class Indeterminate(Exception):
    """The operation may or may not have taken effect (timeout, connection lost mid-request)."""


@runtime_checkable
class Lock(Protocol):
    def acquire(self, timeout: float) -> Grant | None: ...

    def release(self, grant: Grant) -> bool: ...

    def close(self) -> None: ...
