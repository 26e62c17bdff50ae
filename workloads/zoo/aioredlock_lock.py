"""aioredlock's ``Aioredlock``, as its README shows: ``Aioredlock([redis])``, ``await
lock(resource)`` (its own retries: 3 tries 0.1-0.3 s apart), ``await unlock(lock)``.

Without a ``lock_timeout`` the lock lives ``internal_lock_timeout`` seconds (here the run's
``--ttl``) and a watchdog task extends it every 0.6 of that. One Redis (the README's example).
A refusal of every try is ``LockAcquiringError``; a Redis error on the quorum is another
``LockError``, an unknown outcome. The library is async: the client runs it on its own event
loop (:mod:`workloads.async_lock`), where the watchdog runs too.
"""

from __future__ import annotations

from typing import Any

from harness.core.locks import Grant, Indeterminate, LockConfig
from workloads.zoo import ZooLock


class AioredlockLock(ZooLock):
    name = "aioredlock"
    summary = ("aioredlock's Aioredlock([redis], internal_lock_timeout=ttl).lock(resource), "
               "auto-extended")
    promise = ("Redlock with asyncio: a lock extended automatically while held; lock.valid "
               "says whether it is")
    library = "aioredlock"
    dbs = ("redis",)

    def __init__(self, config: LockConfig) -> None:
        import aioredlock

        self.lib: Any = aioredlock
        self.config = config
        node = config.nodes[0]
        self.manager = aioredlock.Aioredlock([{"host": node.host, "port": node.port}],
                                             internal_lock_timeout=config.ttl)
        self.key = f"lock:{config.name}"

    async def acquire(self, timeout: float) -> Grant | None:
        try:
            lock = await self.manager.lock(self.key)
        except self.lib.LockAcquiringError:
            return None
        except self.lib.LockError as e:
            raise Indeterminate(f"{type(e).__name__}: {e}") from e
        return Grant(validity=self.config.ttl, handle=lock)

    async def release(self, grant: Grant) -> bool:
        try:
            await self.manager.unlock(grant.handle)
        except self.lib.LockError as e:
            raise Indeterminate(f"{type(e).__name__}: {e}") from e
        return True

    async def close(self) -> None:
        await self.manager.destroy()
