"""portalocker's ``RedisLock``, as its README shows: ``RedisLock(channel)``, ``acquire()``,
``release()``: the holder is the one subscriber of a pub/sub channel, kept by a keep-alive
thread; there is no lease (ownership ends when Redis drops the subscription).

``portalocker-redis`` takes the defaults; ``portalocker-redis-fenced`` turns on its ``fencing``
option (an INCR'd token on every exclusive grant, ``fence_token``), its README's answer to a
holder that lost the lock without knowing.
"""

from __future__ import annotations

from typing import ClassVar

from harness.core.locks import Grant
from workloads.zoo import RedisZooLock


class PortalockerRedisLock(RedisZooLock):
    name = "portalocker-redis"
    summary = ("portalocker's RedisLock(channel) as its README shows: a pub/sub subscription, no "
               "lease")
    promise = "a lock held by a live subscription: released when the holder dies or disconnects"
    library = "portalocker"
    timed_out = "AlreadyLocked"
    fencing: ClassVar[bool] = False
    # Its release closes the subscription ("dropping the subscription ... *is* the release"):
    # nothing answers it. The zoo's runs showed it: releases completed while their client was
    # cut off, and in 33-82 ms under a 200 ms delay, so the faults checker called every
    # partition and delay run unknown until this was declared.
    release_waits = False

    def acquire(self, timeout: float) -> Grant | None:
        lock = self.lib.RedisLock(self.key, connection=self.client, fencing=self.fencing)
        if not self.take(lambda: lock.acquire(timeout=timeout)):
            return None
        return Grant(token=lock.fence_token if self.fencing else None, handle=lock)


class PortalockerRedisFenced(PortalockerRedisLock):
    name = "portalocker-redis-fenced"
    summary = "portalocker's RedisLock(channel, fencing=True): a fencing token on every grant"
    promise = "fencing=True gives every grant a token a resource can use to reject stale writes"
    fencing = True
    tokens = True
