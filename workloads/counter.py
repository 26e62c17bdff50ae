"""The ``counter`` workload: a non-atomic increment under the lock.

One session: ``acquire`` -> ``read`` the shared counter -> hold a random time -> ``write``
read+1 -> ``release``. If two clients are ever inside at once, both read the same value and one
increment is lost: the damage a broken lock does to real data. The resource's log records each
increment with the value it was computed from, so the checker can name the colliding pairs.
"""

from __future__ import annotations

from harness.history import INFO, INVOKE, OK
from workloads.locks.base import Grant
from workloads.mutex import MutexWorkload


class CounterWorkload(MutexWorkload):
    def critical_section(self, grant: Grant) -> None:
        j, name = self.journal, self.p.lock_name
        value = {"session": self.session}
        j.record(INVOKE, "read", value, lock=name)
        try:
            current = self.resource.read_counter()
        except Exception as e:
            j.record(INFO, "read", value, lock=name, error=f"{type(e).__name__}: {e}"[:200])
            return
        j.record(OK, "read", {**value, "counter": current}, lock=name)
        self.stop.wait(self.rng.uniform(self.p.hold_min, self.p.hold_max))
        self.write_increment(grant, current)

    def write_increment(self, grant: Grant, current: int) -> None:
        token = grant.token if self.p.fenced else None
        value = {"kind": "increment", "session": self.session, "from": current,
                 "to": current + 1}
        self.write_value("increment", value, token, (current, current + 1))
