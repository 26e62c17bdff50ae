"""The ``lock`` workload: acquire, hold, release, and nothing else.

One session: ``acquire`` -> hold a random time -> ``release``. No resource is touched, so a
session costs exactly the lock's own requests: Jepsen's mutex test, and the shape of a lock
benchmark (``redis-benchmark`` of ``SET NX PX`` plus the compare-and-delete). What is judged is
the lock alone: overlapping grants (mutex), the grants' linearizability as a mutex, liveness
and availability. With nothing written there is nothing a resource could guard, so a resource
mode other than ``plain`` is refused.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from harness.core.locks import Grant
from workloads.mutex import MutexWorkload, lock_checks


class LockWorkload(MutexWorkload):
    name = "lock"
    summary = "acquire, hold, release: the lock's own requests only, no resource writes"
    resource_modes = ("plain",)  # nothing is written: there is nothing to fence or compare

    @classmethod
    def checkers(cls, spec: Mapping[str, Any]) -> list[tuple[str, dict[str, Any]]]:
        return [("mutex", {}), ("linearizable", {"model": "mutex"}), ("stats", {}),
                *lock_checks(spec)]

    def holds_nothing(self) -> bool:
        """A hold of 0 (``--hold 0``): every critical section is empty, unless a subclass or
        the instance has one of its own."""
        own = getattr(self.critical_section, "__func__", None) is LockWorkload.critical_section
        return own and self.p.hold_min == self.p.hold_max <= 0

    def critical_section(self, grant: Grant) -> None:
        low, high = self.p.hold_min, self.p.hold_max
        hold = low if low == high else self.rng.uniform(low, high)  # draw(low, high)
        if hold > 0:
            self.hold(grant, hold)
