"""The ``idempotent`` workload: make the operation safe to repeat, and the lock stops mattering.

Seed 003's reframe. The lock guards a queue of jobs: a holder reads the resource's next job
``k``, works a while, then applies it: the balance grows by job ``k``'s amount. Every
application carries the idempotency key ``job-k``, which the resource stores in the same
transaction as the effect; a key it has seen is not applied again (a *duplicate*). So when the
lock breaks and two holders both take job ``k``, or a client retries an application whose
outcome it never learnt (with the same key), the job still takes effect once.

The ``idempotent`` checker confirms it from the resource's log and final state: each key
applied once, every acknowledged key applied, the balance equal to one execution of each
applied job. Lock overlaps are reported, informational.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, ClassVar

from harness.core.history import INFO
from harness.core.locks import Grant
from harness.core.resource import Write
from workloads.mutex import MutexWorkload, lock_checks

RETRIES = 3  # tries of one application whose outcome is unknown, with the same key


def amount(job: int) -> int:
    """What job ``job`` adds to the balance (1..9: sums show a job applied twice)."""
    return job % 9 + 1


class IdempotentWorkload(MutexWorkload):
    name: ClassVar[str] = "idempotent"
    summary: ClassVar[str] = ("take the next job under the lock and apply it with an "
                              "idempotency key: each job must take effect once")
    needs_tokens: ClassVar[bool] = False
    fenced: ClassVar[bool] = False
    default_resource: ClassVar[str] = "postgres"  # keys stored transactionally with the effect

    @classmethod
    def checkers(cls, spec: Mapping[str, Any]) -> list[tuple[str, dict[str, Any]]]:
        return [("idempotent", {}), ("mutex", {"overlaps_informational": True}),
                ("stats", {}), *lock_checks(spec)]

    def critical_section(self, grant: Grant) -> None:
        seen = self.read(self.begin(grant))
        if seen is None:
            return
        job = seen.job
        self.stop.wait(self.rng.uniform(self.p.hold_min, self.p.hold_max))
        key = f"job-{job}" if self.p.lock_name == "lock" else f"{self.p.lock_name}:job-{job}"
        value = {"kind": "apply", "session": self.session, "key": key, "job": job,
                 "amount": amount(job)}
        for attempt in range(RETRIES):
            done = self.send({**value, "attempt": attempt + 1}, grant,
                             self.application(key, job))
            if done is not None or self.outcome != INFO:
                return
            if self.section is not None and self.section.via is not None:
                return  # the lock's transaction is gone: a retry could not join it

    def application(self, key: str, job: int) -> Write:
        return Write(self.p.process, self.session, "apply", self.p.lock_name, key=key,
                     amount=amount(job), job=job)
