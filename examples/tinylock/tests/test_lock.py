"""tinylock under lock-harness: real Redis servers, client processes, faults, the checkers
(the `lock_harness` fixture of lock-harness's pytest plugin). Each fault with the verdict
tinylock's lock should get; TINYLOCK=UnsafeLock tests the buggy variant, to see a failure."""

import os
import time

import pytest
import redis
import tinylock

from harness.core.locks import Grant

VARIANT = {"TINYLOCK": os.environ.get("TINYLOCK", "Lock")}  # read by TinyLock in each client
pytestmark = pytest.mark.lock_harness("redis")  # `-m lock_harness` selects these tests


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
        return Grant(validity=self.ttl)  # the lease promised: the checker holds us to it

    def release(self, grant):
        return self.lock.release()


def run(lock_harness, nemesis):
    return lock_harness.run(TinyLock, nemesis=nemesis, time_limit=5, seed=1, env=VARIANT)


# The lease is timed by Redis (PX), so a client's clock does not move it; a client cut off
# from Redis past the lease let go of it in time, its release lost (the key expires).
@pytest.mark.parametrize("nemesis", ["none", "partition", "clock-client"])
def test_tinylock_keeps_its_holders_apart(lock_harness, nemesis):
    run(lock_harness, nemesis).assert_valid()


def test_a_holder_paused_past_its_lease_overlaps_but_no_lease_is_taken_early(lock_harness):
    """A lease without fencing tokens cannot survive its holder frozen past it (a GC pause): it
    wakes up still holding. The harness must find that overlap; and every overlap must begin
    after the earlier holder's lease ran out (lease-broken-count 0), else the lock broke its
    own promise."""
    result = run(lock_harness, "pause")
    if result.checks["mutex"]["lease-broken-count"]:
        raise AssertionError(f"a lease was taken while still in force\n{result.explain()}")
    result.assert_invalid()
