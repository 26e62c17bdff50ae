"""The ``counter`` workload: a non-atomic increment under the lock.

One session: ``acquire`` -> ``read`` the shared counter -> hold a random time -> ``write``
read+1 -> ``release``. If two clients are ever inside at once, both read the same value and one
increment is lost: the damage a broken lock does to real data. The resource's log records each
increment with the value it was computed from, so the checker can name the colliding pairs.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from harness.core.history import INFO, INVOKE, OK
from harness.core.locks import Grant
from workloads.mutex import MutexWorkload, lock_checks


class CounterWorkload(MutexWorkload):
    name = "counter"
    summary = "read the resource's counter, hold, write it + 1 (non-atomic): lost updates"

    @classmethod
    def checkers(cls, spec: Mapping[str, Any]) -> list[tuple[str, dict[str, Any]]]:
        return [("mutex", {}), ("lost-updates", {}), ("linearizable", {"model": "mutex"}),
                ("stats", {}), *lock_checks(spec)]

    def critical_section(self, grant: Grant) -> None:
        j, name = self.journal, self.p.lock_name
        value = {"session": self.session}
        j.record(INVOKE, "read", value, lock=name)
        try:
            current = self.resource.read_counter(self.p.lock_name)
        except Exception as e:
            j.record(INFO, "read", value, lock=name, error=f"{type(e).__name__}: {e}"[:200])
            return
        j.record(OK, "read", {**value, "counter": current}, lock=name)
        self.stop.wait(self.rng.uniform(self.p.hold_min, self.p.hold_max))
        self.write_increment(grant, current)

    def write_increment(self, grant: Grant, current: int) -> None:
        token = grant.token if self.fenced else None
        value = {"kind": "increment", "session": self.session, "from": current,
                 "to": current + 1}
        self.write_value("increment", value, token, (current, current + 1))
