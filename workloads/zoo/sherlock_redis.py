"""sherlock's ``RedisLock``, as its README shows: ``RedisLock(name, client=redis, expire=...,
timeout=...)``, ``acquire()``, ``release()``: SETNX then EXPIRE in one script, release by a
script that checks the owner, retried every ``retry_interval`` (0.1 s) until ``timeout``.

``sherlock`` gives ``expire=ttl`` (whole seconds: the script's EXPIRE takes an integer);
``sherlock-no-expire`` gives ``expire=None``, which its docs say makes a lock that never
expires.
"""

from __future__ import annotations

import math
from typing import Any, ClassVar

from harness.core.locks import Grant
from workloads.zoo import RedisZooLock


class SherlockRedisLock(RedisZooLock):
    name = "sherlock"
    summary = "sherlock's RedisLock(name, client, expire=ttl, timeout) as its README shows"
    promise = "a lock that expires after expire seconds, released only by its owner"
    library = "sherlock"
    not_held = "LockException"
    timed_out = "LockTimeoutException"
    expires: ClassVar[bool] = True

    def acquire(self, timeout: float) -> Grant | None:
        expire = max(1, math.ceil(self.config.ttl)) if self.expires else None
        lock: Any = self.lib.RedisLock(self.key, client=self.client, expire=expire,
                                       timeout=timeout)
        return Grant(validity=expire, handle=lock) if self.take(lock.acquire) else None


class SherlockNoExpire(SherlockRedisLock):
    name = "sherlock-no-expire"
    summary = "sherlock's RedisLock(name, client, expire=None): documented as never expiring"
    promise = "expire=None: the lock does not expire"
    expires = False
