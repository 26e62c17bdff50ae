"""tinylock under lock-harness: real Redis servers, client processes, faults, the checkers
(the `lock_harness` fixture of `pip install lock-harness`). TINYLOCK=UnsafeLock tests the
buggy variant, to see a failure."""

import os
import time

import redis
import tinylock

from harness.core.locks import Grant


class TinyLock:
    """tinylock as the harness drives a lock: acquire(timeout) -> Grant or None, release."""

    def __init__(self, config):
        node = config.nodes[0]
        impl = getattr(tinylock, os.environ.get("TINYLOCK", "Lock"))
        self.lock = impl(redis.Redis(node.host, node.port, socket_timeout=config.op_timeout),
                         "tinylock", config.ttl)
        self.ttl = config.ttl

    def acquire(self, timeout):
        deadline = time.monotonic() + timeout
        while not self.lock.acquire():
            if time.monotonic() > deadline:
                return None
            time.sleep(0.01)
        return Grant(validity=self.ttl)

    def release(self, grant):
        return self.lock.release()


def test_tinylock_keeps_its_holders_apart(lock_harness):
    lock_harness.run(TinyLock, nemesis="none", time_limit=6, seed=1).assert_valid()
