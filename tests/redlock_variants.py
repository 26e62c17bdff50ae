"""Redlock variants for the stall-grant tests, loaded by path (``--lock
tests.redlock_variants:PatientRedlock``): they show *which* part of Redlock refuses a grant
that arrives after its lease ran out.

The published Redlock does not even wait for a late reply: its per-node timeout is TTL/20, so a
reply held for longer than the TTL is a timeout. These wait as long as the client's op timeout
for each node, so the late "OK" does arrive:

- ``PatientRedlock`` then checks the validity (TTL - elapsed - drift) as Redlock does, finds it
  gone and refuses the grant;
- ``CredulousRedlock`` skips that check: it believes the late grant, as a single SET NX PX does.
"""

from __future__ import annotations

import dataclasses

import redis

from harness.core.locks import Grant, LockConfig
from workloads.locks.redlock import RedlockLock


class PatientRedlock(RedlockLock):
    name = "patient-redlock"
    summary = "Redlock that waits up to the op timeout for each node"

    def __init__(self, config: LockConfig) -> None:
        patient = {**config.options, "node_timeout": config.op_timeout}
        super().__init__(dataclasses.replace(config, options=patient))


class CredulousRedlock(PatientRedlock):
    name = "credulous-redlock"
    summary = "patient Redlock without the validity check"

    def try_once(self, value: str) -> Grant | None:
        answers = 0
        for i in range(len(self.clients)):
            try:
                answers += bool(self.lock_instance(i, value))
            except redis.exceptions.RedisError:
                continue
        if answers >= self.quorum:
            return Grant(token=None, validity=self.ttl, handle=value)
        self.unlock_all(value)
        return None
