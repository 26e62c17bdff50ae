"""python-redis-lock's ``redis_lock.Lock``, as its README shows.

``Lock(conn, "name")`` and ``acquire(blocking=True, timeout=...)``: SET NX (EX when ``expire``
is given), waiters woken by BLPOP on a signal list, release by a script that checks the id.
The README's first example gives no ``expire``: the key never expires (``python-redis-lock``).
Its second entry gives ``expire=ttl`` and ``auto_renewal=True``, the README's advice for work
that may outlast the lease (a thread renews every 2/3 of it): ``python-redis-lock-renew``.
"""

from __future__ import annotations

import math
from typing import Any, ClassVar

from harness.core.locks import Grant, LockConfig
from workloads.locks.redis_conn import client_for
from workloads.zoo import RedisZooLock


class PythonRedisLock(RedisZooLock):
    name = "python-redis-lock"
    summary = "python-redis-lock's Lock(conn, name) as its README shows: no expire (the default)"
    promise = "a lock held until released; with expire it ends after that many seconds"
    library = "python-redis-lock"
    module = "redis_lock"
    not_held = "NotAcquired"
    renew: ClassVar[bool] = False

    def __init__(self, config: LockConfig) -> None:
        super().__init__(config)
        self.clients: dict[int, Any] = {}  # by the seconds BLPOP may wait

    def waiting(self, wait: int) -> Any:
        """A client whose reads outlast the library's BLPOP of ``wait`` seconds."""
        if wait not in self.clients:
            self.clients[wait] = client_for(self.config, self.config.op_timeout + wait)
        return self.clients[wait]

    def acquire(self, timeout: float) -> Grant | None:
        wait = max(1, math.ceil(timeout))  # whole seconds (BLPOP's); 0 would block forever
        expire = max(1, math.ceil(self.config.ttl)) if self.renew else None
        lock = self.lib.Lock(self.waiting(wait), self.key, expire=expire,
                             auto_renewal=self.renew)
        ok = self.take(lambda: lock.acquire(blocking=True, timeout=wait))
        return Grant(validity=expire, handle=lock) if ok else None

    def close(self) -> None:
        for c in [self.client, *self.clients.values()]:
            c.close()


class PythonRedisLockRenew(PythonRedisLock):
    name = "python-redis-lock-renew"
    summary = ("python-redis-lock's Lock(conn, name, expire=ttl, auto_renewal=True): a thread "
               "renews the lease every 2/3 of it")
    promise = ("auto_renewal keeps the lock for as long as it is held, and it expires if the "
               "holder dies")
    renew = True
