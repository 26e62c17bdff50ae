"""Locks on a single Redis instance, correct and broken, as people write them.

- ``redis-setnx``: ``SET key uuid NX PX ttl``; release by a Lua compare-and-delete.
- ``redis-setnx-expire``: ``SETNX`` then ``EXPIRE``: two commands, so a client that dies
  between them leaves a lock that never expires.
- ``redis-del``: ``SET NX PX``; release by a bare ``DEL``, which deletes whoever's lock is there.
- ``redis-get-del``: release by ``GET``, compare, then ``DEL``: not atomic.
- ``redis-fenced``: ``SET NX PX`` and, atomically with it, ``INCR`` of a counter: the token.

All of them are leases: the key expires after ``ttl`` whether or not the holder is done.
"""

from __future__ import annotations

import math
import os
import random
from collections.abc import Callable
from itertools import repeat
from operator import getitem
from typing import Any

from harness.core.locks import Grant, LockConfig, LockRole, retried
from workloads import crash
from workloads.locks.redis_conn import (
    COMPARE_AND_DELETE,
    SET_AND_INCR,
    SINGLE_REDIS,
    attempt,
    recipe_client_for,
    uses_sentinel,
)
from workloads.resp import LeanRedis

_new = tuple.__new__  # a Grant from its fields' tuple (a named tuple's own __new__, in C)
OWNERS = 512  # owners drawn at a time
_CUTS = tuple(slice(i, i + 32) for i in range(0, 32 * OWNERS, 32))  # each one's hex digits


class RedisSingleLock(LockRole):
    """Shared machinery: one connection to the first node (or to the primary Sentinel names),
    and an acquire loop with backoff."""

    dbs = SINGLE_REDIS

    def __init__(self, config: LockConfig) -> None:
        self.config = config
        self.client = recipe_client_for(config)
        self.key = f"lock:{config.name}"
        self.ttl_ms = max(1, int(config.ttl * 1000))
        self.validity = config.ttl  # every grant's
        self.rng = random.Random(config.harness.get("seed", 0) * 1000 + config.process)
        # Owners are random 128-bit values, as uuid4's, in 32 hex digits: drawn OWNERS at a
        # time from the kernel (one system call, one hex of them all, then cut).
        self.owners: list[str] = []

    def try_acquire(self, owner: str) -> Grant | None:
        """One attempt. Returns None when the lock is certainly held by someone else."""
        raise NotImplementedError

    def acquire(self, timeout: float) -> Grant | None:
        owners, try_acquire = self.owners, self.try_acquire
        return retried(lambda: try_acquire(owners.pop() if owners else self.draw_owners()),
                       timeout, lambda: self.rng.uniform(0.01, 0.05), (ConnectionRefusedError,))

    def draw_owners(self) -> str:
        """The next :data:`OWNERS` owners drawn (kept in ``owners``), and one more."""
        digits = os.urandom(16 * (OWNERS + 1)).hex()
        self.owners[:] = map(getitem, repeat(digits), _CUTS)
        return digits[-32:]

    def release(self, grant: Grant) -> bool:
        raise NotImplementedError

    def release_bound(self) -> float | None:
        """Seconds a release takes at most, on its own. On one node the lean client's connect,
        its send and each read time out in the kernel after ``op_timeout`` (a reply of a few
        bytes is one read), and a release is two requests at most (EVALSHA then EVAL; GET then
        DEL). Through Sentinel (redis-py asks the Sentinels again for a new connection): None."""
        return None if uses_sentinel(self.config) else 2 * 3 * self.config.op_timeout

    def close(self) -> None:
        self.client.close()

    def _grant(self, owner: str, token: int | None = None) -> Grant:
        return Grant(token, self.validity, owner)

    def _call(self, fn: Callable[[], Any]) -> Any:
        return attempt(fn)


class SetNxLock(RedisSingleLock):
    """The correct single-instance recipe: SET NX PX, release by compare-and-delete."""

    name = "redis-setnx"
    summary = "SET key uuid NX PX ttl; release by Lua compare-and-delete"

    def __init__(self, config: LockConfig) -> None:
        super().__init__(config)
        self._cad = self.client.register_script(COMPARE_AND_DELETE)
        self._set_nx, self._compare_and_delete = self._requests()

    def _requests(self) -> tuple[Callable[[str], Any], Callable[[str], Any]]:
        """This lock's SET NX PX and compare-and-delete, each ``(owner) -> reply``: on the
        lean client packed once (they are every session's two requests); through redis-py
        (Sentinel) by way of :func:`attempt`, which maps its errors as the lean client does."""
        client, key = self.client, self.key
        if isinstance(client, LeanRedis):
            return (client.setter(key, nx=True, px=self.ttl_ms),
                    client.script_of_keys(COMPARE_AND_DELETE, [key]))
        return (lambda owner: attempt(lambda: client.set(key, owner, nx=True, px=self.ttl_ms)),
                lambda owner: attempt(lambda: self._cad(keys=[key], args=[owner])))

    def try_acquire(self, owner: str) -> Grant | None:
        if self._set_nx(owner) is None:  # b"OK" (redis-py: True) when it set the key
            return None
        return _new(Grant, (None, self.validity, owner))

    def release(self, grant: Grant) -> bool:
        return bool(self._compare_and_delete(grant.handle))


class SetNxExpireLock(SetNxLock):
    """SETNX, then EXPIRE in a second command (the crash between them never expires)."""

    name = "redis-setnx-expire"
    summary = "SETNX then EXPIRE (two commands); compare-and-delete"

    crash_steps = ("after-setnx",)  # where the crash-client nemesis kills it by default

    def try_acquire(self, owner: str) -> Grant | None:
        if not self._call(lambda: self.client.setnx(self.key, owner)):
            return None
        crash.point("after-setnx")
        seconds = max(1, math.ceil(self.ttl_ms / 1000))
        self._call(lambda: self.client.expire(self.key, seconds))
        return self._grant(owner)


class DelLock(SetNxLock):
    """SET NX PX, release by a bare DEL: deletes the next holder's lock once ours expired."""

    name = "redis-del"
    summary = "SET NX PX; release by a bare DEL (deletes whoever holds it)"
    release_frees_others = True

    def release(self, grant: Grant) -> bool:
        return bool(self._call(lambda: self.client.delete(self.key)))


class GetDelLock(SetNxLock):
    """Release by GET, compare in the client, then DEL: the key can change between them."""

    name = "redis-get-del"
    summary = "SET NX PX; release by GET, compare, then DEL (not atomic)"
    release_frees_others = True  # the key may change hands between the GET and the DEL

    def release(self, grant: Grant) -> bool:
        if self._call(lambda: self.client.get(self.key)) != grant.handle:
            return False
        return bool(self._call(lambda: self.client.delete(self.key)))


class FencedLock(SetNxLock):
    """SET NX PX plus INCR of a counter in one script: the counter is the fencing token."""

    name = "redis-fenced"
    summary = "SET NX PX plus INCR in one script: the counter is a fencing token"
    tokens = True

    def __init__(self, config: LockConfig) -> None:
        super().__init__(config)
        self._set_incr = self.client.register_script(SET_AND_INCR)

    def try_acquire(self, owner: str) -> Grant | None:
        token = self._call(
            lambda: self._set_incr(keys=[self.key, f"{self.key}:token"],
                                   args=[owner, self.ttl_ms])
        )
        return self._grant(owner, int(token)) if token else None
