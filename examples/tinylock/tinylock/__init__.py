"""tinylock: a lease on a Redis key. SET NX PX with a token of the holder's own; released
only by its holder (compare-and-delete). ``UnsafeLock`` is the same lock with a bug, to see
what the harness says about one: it gives the lease in seconds where Redis reads
milliseconds, so the key expires while its holder works."""

from __future__ import annotations

import os

import redis

RELEASE = ("if redis.call('get', KEYS[1]) == ARGV[1] then "
           "return redis.call('del', KEYS[1]) else return 0 end")


class Lock:
    def __init__(self, client: redis.Redis, name: str, ttl: float) -> None:
        self.client, self.name, self.ttl = client, name, ttl
        self.token = b""

    def lease_ms(self) -> int:
        return int(self.ttl * 1000)

    def acquire(self) -> bool:
        token = os.urandom(16).hex().encode()
        if self.client.set(self.name, token, nx=True, px=self.lease_ms()):
            self.token = token
            return True
        return False

    def release(self) -> bool:
        return bool(self.client.eval(RELEASE, 1, self.name, self.token))


class UnsafeLock(Lock):
    def lease_ms(self) -> int:
        return int(self.ttl)  # the bug: seconds where Redis reads milliseconds
