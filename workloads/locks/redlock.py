"""Redlock, as published (redis.io, "Distributed Locks with Redis"), on N independent masters.

To acquire:

1. take the current time (monotonic);
2. on every master in turn, ``SET key value NX PX ttl`` with a per-node timeout that is small
   next to the TTL (``ttl / 20``, at most the op timeout), so a dead or cut-off node costs
   little;
3. the lock is acquired if a majority (N/2 + 1) said OK and the time left, ``validity = ttl -
   elapsed - drift`` with ``drift = 1% of ttl + 2 ms``, is positive; the grant carries that
   validity;
4. otherwise unlock on every master (even those that seemed to fail: the SET may have landed)
   and retry after a random delay, until the acquire timeout.

Release: a compare-and-delete script on every master.

``redlock-fenced`` adds the per-node counter the seed proposes: each master ``INCR``s its own
counter in the same script as the SET, and the token is the largest counter of the masters
that said OK. Counters of different masters drift apart (every partial, failed attempt bumps
some of them; a master restarted without persistence starts again from 0), so the token of
a later grant can be smaller than an earlier one's: a weak token, which the fencing checker's
token-order check catches.
"""

from __future__ import annotations

import random
import time
import uuid
from collections.abc import Mapping
from typing import Any

import redis

from harness.core.locks import Grant, Indeterminate, LockConfig, LockRole, retried
from harness.core.options import Option
from workloads.locks.redis_conn import COMPARE_AND_DELETE, SET_AND_INCR, connect

DRIFT_FACTOR = 0.01
DRIFT_FIXED = 0.002  # seconds
RETRY_DELAY = 0.1  # seconds: retries wait uniform(0, this)


class RedlockLock(LockRole):
    """The Redlock algorithm over ``config.nodes`` (every node is an independent master)."""

    name = "redlock"
    summary = "Redlock: SET NX PX on N masters, quorum, validity = ttl - elapsed - drift"
    dbs = ("redis-masters", "redis")
    options = {"node-timeout": Option(float, None, "seconds it waits for one master's reply "
                                      "(default TTL/20, at most the op timeout): longer than "
                                      "a stall-grant's stall, the late grant is heard and the "
                                      "validity check has to refuse it", minimum=0.01)}

    def __init__(self, config: LockConfig) -> None:
        self.config = config
        self.key = f"lock:{config.name}"
        self.ttl = config.ttl
        self.ttl_ms = max(1, int(config.ttl * 1000))
        self.node_timeout = self.request_timeout(config.ttl, config.op_timeout, config.options)
        self.clients = [connect(n.host, n.port, self.node_timeout) for n in config.nodes]
        self.quorum = len(self.clients) // 2 + 1
        self.rng = random.Random(config.harness.get("seed", 0) * 1000 + config.process)
        self._unlock = [c.register_script(COMPARE_AND_DELETE) for c in self.clients]

    @classmethod
    def request_timeout(cls, ttl: float, op_timeout: float, options: Mapping[str, Any]
                        ) -> float:
        """Seconds it waits for one master's reply (what a delay must stay under for a
        quorum to form): option ``node-timeout``, else ``ttl / 20``, at most the op timeout,
        at least 10 ms."""
        given = options.get("node-timeout")
        return float(given) if given is not None else max(0.01, min(op_timeout, ttl / 20))

    # one node ----------------------------------------------------------------------------------
    def lock_instance(self, i: int, value: str) -> Any:
        """SET NX PX on master ``i``: truthy when it took the lock."""
        return self.clients[i].set(self.key, value, nx=True, px=self.ttl_ms)

    def token_of(self, answers: list[Any]) -> int | None:
        return None

    # the algorithm -----------------------------------------------------------------------------
    def try_once(self, value: str) -> Grant | None:
        start = time.monotonic()
        answers: list[Any] = []
        for i in range(len(self.clients)):
            try:
                answer = self.lock_instance(i, value)
            except redis.exceptions.RedisError:
                continue  # down, cut off or slow: this master does not count
            if answer:
                answers.append(answer)
        elapsed = time.monotonic() - start
        drift = self.ttl * DRIFT_FACTOR + DRIFT_FIXED
        validity = self.ttl - elapsed - drift
        if len(answers) >= self.quorum and validity > 0:
            return Grant(token=self.token_of(answers), validity=round(validity, 4), handle=value)
        self.unlock_all(value)
        return None

    def acquire(self, timeout: float) -> Grant | None:
        return retried(lambda: self.try_once(uuid.uuid4().hex), timeout,
                       lambda: self.rng.uniform(0, RETRY_DELAY))

    def unlock_all(self, value: str) -> tuple[int, int]:
        """Compare-and-delete on every master: (deleted, did not answer). A master that did
        not answer may still have our key (a restarted one with persistence does), whether
        or not the request reached it."""
        deleted = unknown = 0
        for script in self._unlock:
            try:
                deleted += int(script(keys=[self.key], args=[value]) or 0)
            except redis.exceptions.RedisError:
                unknown += 1
        return deleted, unknown

    def release(self, grant: Grant) -> bool:
        """True when a majority still had our key (and deleted it); False when too few did and
        the others all answered (it had expired or been taken); Indeterminate when the masters
        that did not answer decide."""
        deleted, unknown = self.unlock_all(str(grant.handle))
        if deleted >= self.quorum:
            return True
        if deleted + unknown >= self.quorum:
            raise Indeterminate(f"released on {deleted} masters, {unknown} did not answer")
        return False

    def close(self) -> None:
        for c in self.clients:
            c.close()


class FencedRedlockLock(RedlockLock):
    """Redlock plus a per-master counter: token = the largest counter of the OK masters."""

    name = "redlock-fenced"
    summary = "Redlock plus a per-master INCR; token = max of the quorum's (weak)"
    tokens = True

    def __init__(self, config: LockConfig) -> None:
        super().__init__(config)
        self._lock_and_count = [c.register_script(SET_AND_INCR) for c in self.clients]

    def lock_instance(self, i: int, value: str) -> Any:
        return self._lock_and_count[i](keys=[self.key, f"{self.key}:version"],
                                       args=[value, self.ttl_ms])

    def token_of(self, answers: list[Any]) -> int | None:
        return max(int(a) for a in answers)
