"""A Redisson-style ``RLock``: a hash per lock, a reentrancy count per holder, a watchdog.

As Redisson does it (its Lua scripts, transcribed): the lock is a hash whose one field is the
holder's id (a client UUID and the thread id) and whose value counts how many times that
holder has entered; acquire creates it or increments our field and sets the expiry; release
decrements and deletes the hash at zero. Acquired without an explicit lease, the lock gets the
"lock watchdog timeout" (here: the TTL) and a watchdog thread renews it every TTL/3 for as
long as it is held, so a holder that works for a long time keeps it.

The watchdog lives in the holder's process: a process that is paused (GC, SIGSTOP) pauses its
watchdog too, the key expires, another client takes the lock, and the paused holder wakes up
believing it still holds it. The ``pause`` nemesis shows exactly that.
"""

from __future__ import annotations

import random
import threading
import uuid

import redis

from harness.core.locks import Grant, LockConfig, LockRole, retried
from workloads.locks.redis_conn import SINGLE_REDIS, attempt, client_for

ACQUIRE = """
if (redis.call('exists', KEYS[1]) == 0) then
    redis.call('hincrby', KEYS[1], ARGV[2], 1);
    redis.call('pexpire', KEYS[1], ARGV[1]);
    return nil;
end;
if (redis.call('hexists', KEYS[1], ARGV[2]) == 1) then
    redis.call('hincrby', KEYS[1], ARGV[2], 1);
    redis.call('pexpire', KEYS[1], ARGV[1]);
    return nil;
end;
return redis.call('pttl', KEYS[1]);
"""

RELEASE = """
if (redis.call('hexists', KEYS[1], ARGV[2]) == 0) then
    return nil;
end;
local counter = redis.call('hincrby', KEYS[1], ARGV[2], -1);
if (counter > 0) then
    redis.call('pexpire', KEYS[1], ARGV[1]);
    return 0;
else
    redis.call('del', KEYS[1]);
    return 1;
end;
"""

RENEW = """
if (redis.call('hexists', KEYS[1], ARGV[2]) == 1) then
    redis.call('pexpire', KEYS[1], ARGV[1]);
    return 1;
end;
return 0;
"""


class RedissonLock(LockRole):
    """Reentrant hash lock with a watchdog thread renewing it every TTL/3."""

    name = "redisson"
    summary = "Redisson RLock: reentrant hash lock, Lua scripts, watchdog renews every TTL/3"
    dbs = SINGLE_REDIS
    reentrant = True  # the mutex workload re-enters it inside the critical section

    def __init__(self, config: LockConfig) -> None:
        self.config = config
        self.client = client_for(config)
        self.key = f"lock:{config.name}"
        self.lease_ms = max(1, int(config.ttl * 1000))
        self.holder = f"{uuid.uuid4()}:{threading.get_ident()}"
        self.rng = random.Random(config.harness.get("seed", 0) * 1000 + config.process)
        self._acquire = self.client.register_script(ACQUIRE)
        self._release = self.client.register_script(RELEASE)
        self._renew = self.client.register_script(RENEW)
        self.depth = 0
        self._watchdog: threading.Thread | None = None
        self._stop_watchdog = threading.Event()

    def acquire(self, timeout: float) -> Grant | None:
        def once() -> Grant | None:
            if attempt(lambda: self._acquire(keys=[self.key],
                                             args=[self.lease_ms, self.holder])) is not None:
                return None  # held by another (the answer is its time to live)
            self.depth += 1
            if self.depth == 1:
                self._start_watchdog()
            return Grant(validity=self.config.ttl, handle=self.depth)
        return retried(once, timeout, lambda: self.rng.uniform(0.01, 0.05),
                       (ConnectionRefusedError,))

    def release(self, grant: Grant) -> bool:
        try:
            answer = attempt(lambda: self._release(keys=[self.key],
                                                   args=[self.lease_ms, self.holder]))
        finally:  # as Redisson does: renewal is cancelled whatever the unlock's outcome
            self.depth = max(0, self.depth - 1)
            if self.depth == 0:
                self._stop()
        return answer is not None

    # the watchdog ------------------------------------------------------------------------------
    def _start_watchdog(self) -> None:
        self._stop()
        self._stop_watchdog = stop = threading.Event()
        self._watchdog = threading.Thread(target=self._renew_loop, args=(stop,),
                                          name="redisson-watchdog", daemon=True)
        self._watchdog.start()

    def _renew_loop(self, stop: threading.Event) -> None:
        period = self.lease_ms / 3000
        while not stop.wait(period):
            try:
                renewed = self._renew(keys=[self.key], args=[self.lease_ms, self.holder])
            except redis.exceptions.RedisError:
                continue  # try again next period
            if not renewed:
                return  # the lock is gone (expired, taken): nothing left to renew

    def _stop(self) -> None:
        self._stop_watchdog.set()
        self._watchdog = None

    def close(self) -> None:
        self._stop()
        self.client.close()
