"""The ``counter`` workload: a non-atomic increment under the lock.

One session: ``acquire`` -> ``read`` the shared counter -> hold a random time -> ``write``
read+1 -> ``release``. If two clients are ever inside at once, both read the same value and one
increment is lost: the damage a broken lock does to real data. The resource's log records each
increment with the value it was computed from, so the checker can name the colliding pairs.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from harness.core.locks import Grant
from workloads.mutex import MutexWorkload, lock_checks, resource_mode


class CounterWorkload(MutexWorkload):
    name = "counter"
    summary = "read the resource's counter, hold, write it + 1 (non-atomic): lost updates"

    @classmethod
    def checkers(cls, spec: Mapping[str, Any]) -> list[tuple[str, dict[str, Any]]]:
        guarded = resource_mode(spec, cls.fenced) != "plain"
        return [("mutex", {"overlaps_informational": guarded}), ("lost-updates", {}),
                ("linearizable", {"model": "mutex", "informational": guarded}),
                ("stats", {}), *lock_checks(spec)]

    def critical_section(self, grant: Grant) -> None:
        seen = self.read(self.begin(grant))
        if seen is None:
            return
        self.stop.wait(self.rng.uniform(self.p.hold_min, self.p.hold_max))
        self.write_increment(grant, seen.counter)

    def write_increment(self, grant: Grant, current: int) -> None:
        value = {"kind": "increment", "session": self.session, "from": current,
                 "to": current + 1}
        self.write_value("increment", value, grant, (current, current + 1))
