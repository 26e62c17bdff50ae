"""pottery's ``Redlock``, as its README shows: ``Redlock(key=..., masters={redis},
auto_release_time=ttl)``, ``acquire(blocking=True, timeout=...)``, ``release()``.

One master (the README's example: one ``Redis.from_url``), SET NX PX with a random value, the
quorum of one; release by a script that checks the value. pottery swallows Redis errors by
default (``raise_on_redis_errors=False``): a master that does not answer counts as a vote
against, so an acquire that timed out on the wire is a refusal to the caller.
"""

from __future__ import annotations

from harness.core.locks import Grant
from workloads.zoo import RedisZooLock


class PotteryRedlock(RedisZooLock):
    name = "pottery-redlock"
    summary = "pottery's Redlock(key, masters={redis}, auto_release_time=ttl) as its README shows"
    promise = ("Redlock: a lock that is safe as long as a quorum of masters agrees, released on "
               "a timeout")
    library = "pottery"
    not_held = "ReleaseUnlockedLock"

    def acquire(self, timeout: float) -> Grant | None:
        lock = self.lib.Redlock(key=self.key, masters={self.client},
                                auto_release_time=self.config.ttl)
        ok = self.take(lambda: lock.acquire(blocking=True, timeout=timeout))
        return Grant(validity=self.config.ttl, handle=lock) if ok else None
