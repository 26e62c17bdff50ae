"""redis-py's own ``redis.lock.Lock``, used the way its documentation shows.

``client.lock(name, timeout=ttl, blocking_timeout=...)`` then ``acquire()`` and ``release()``:
SET NX PX with a random token, released by a compare-and-delete script. No renewal, no fencing
token. The adapter adds nothing to the library: it only maps its outcomes onto the harness's
(a connection error or timeout is an unknown outcome; ``LockNotOwnedError`` on release means
the lock had expired or been taken). On ``--db redis-sentinel`` the client is a
``Sentinel.master_for`` client, as an application would build it.
"""

from __future__ import annotations

import redis
from redis.lock import Lock as RedisPyLibLock

from harness.core.locks import Grant, Indeterminate, LockConfig, LockRole
from workloads.locks.redis_conn import SINGLE_REDIS, certainly_not_sent, client_for

SLEEP = 0.02  # seconds between the library's own acquire attempts


class RedisPyLock(LockRole):
    name = "redis-py"
    library = "redis"
    promise = "a lock that expires after timeout seconds, released only by its owner's token"
    summary = "redis-py's redis.lock.Lock as documented (SET NX PX, Lua release)"
    dbs = SINGLE_REDIS

    def __init__(self, config: LockConfig) -> None:
        self.config = config
        self.client = client_for(config)
        self.key = f"lock:{config.name}"

    def acquire(self, timeout: float) -> Grant | None:
        lock: RedisPyLibLock = self.client.lock(self.key, timeout=self.config.ttl, sleep=SLEEP,
                                                blocking=True, blocking_timeout=timeout,
                                                thread_local=False)
        try:
            ok = lock.acquire()
        except redis.exceptions.ConnectionError as e:
            if certainly_not_sent(e):
                return None
            raise Indeterminate(f"{type(e).__name__}: {e}") from e
        except redis.exceptions.TimeoutError as e:
            raise Indeterminate(f"timeout: {e}") from e
        return Grant(validity=self.config.ttl, handle=lock) if ok else None

    def release(self, grant: Grant) -> bool:
        lock: RedisPyLibLock = grant.handle
        try:
            lock.release()
        except redis.exceptions.LockNotOwnedError:
            return False
        except (redis.exceptions.ConnectionError, redis.exceptions.TimeoutError) as e:
            raise Indeterminate(f"{type(e).__name__}: {e}") from e
        return True

    def close(self) -> None:
        self.client.close()
