"""Running a search's runs ahead of it, N at a time, without changing what it finds.

Hypothesis asks about one schedule at a time, and the answer decides what it asks next; a
schedule's K replays stop at the first that passes. Both are sequential. But until the first
failure, what hypothesis asks does not depend on the answers (they are all "passes"), so the
schedules it will generate are known in advance (:func:`generated`: the same seeded search,
answered "passes" without running anything); and while replay r of a schedule runs, replay r+1
is the one needed next if r fails. :class:`Lookahead` runs the run the search needs now, and
fills the other slots with the runs it is most likely to need next: the next generated
schedules' first replays, then the further replays of the schedule at hand. The search still
consumes the answers in its own order, one at a time, so it takes the same path as with one
job, and counts against its budget only the runs it consumed; the runs made ahead and never
asked for are *spare* (recorded, never counted as the search's; those still running when the
search ends are stopped).
"""

from __future__ import annotations

from collections.abc import Callable
from concurrent.futures import FIRST_COMPLETED, Future, ThreadPoolExecutor, wait
from dataclasses import dataclass
from typing import Generic, TypeVar

from harness.core.errors import EXIT_INVALID
from harness.core.schedule import Schedule

R = TypeVar("R")
Key = tuple[str, int]  # a schedule's key and a replay's index (0-based)


@dataclass
class Spare(Generic[R]):
    """A run made ahead that the search never asked for."""

    schedule: Schedule
    replay: int
    outcome: R


class Lookahead(Generic[R]):
    """``run(schedule, replay)`` in up to ``jobs`` worker threads; :meth:`outcome` is what the
    search calls, in its order."""

    def __init__(self, run: Callable[[Schedule, int], R], jobs: int, replays: int,
                 upcoming: list[Schedule], limit: int,
                 on_interrupt: Callable[[], None] | None = None) -> None:
        self.run = run
        self.jobs = jobs
        self.replays = replays
        self.upcoming = upcoming
        self.position = {s.key(): i for i, s in enumerate(upcoming)}
        self.limit = limit  # runs started at most, ahead included (the needed ones always run)
        self.on_interrupt = on_interrupt
        self.pool = ThreadPoolExecutor(max_workers=jobs, thread_name_prefix="explore")
        self.started: dict[Key, Future[R]] = {}
        self.schedules: dict[Key, Schedule] = {}
        self.used: set[Key] = set()
        self.stopping = False

    def outcome(self, schedule: Schedule, replay: int) -> R:
        """The outcome of ``schedule``'s replay ``replay``: run now, or already run ahead;
        while it runs, the other slots run what is likely needed next."""
        key = (schedule.key(), replay)
        self.used.add(key)
        needed = self.started.get(key) or self._start(schedule, replay)
        while not needed.done():
            self._fill(schedule, replay)
            try:
                wait([f for f in self.started.values() if not f.done()],
                     return_when=FIRST_COMPLETED)
            except KeyboardInterrupt:
                self.stopping = True
                if self.on_interrupt is not None:
                    self.on_interrupt()
        return needed.result()

    def close(self) -> list[Spare[R]]:
        """Start nothing more; the runs still under way were made ahead and will not be asked
        for: stop them (``on_interrupt``: they heal and save) and wait for them. The spare
        runs, in start order."""
        self.stopping = True
        self.pool.shutdown(wait=False, cancel_futures=True)
        if self.on_interrupt is not None and any(
                not f.done() for f in self.started.values() if not f.cancelled()):
            self.on_interrupt()
        self.pool.shutdown(wait=True)
        return [Spare(self.schedules[k], k[1], f.result()) for k, f in self.started.items()
                if k not in self.used and not f.cancelled()]

    def _start(self, schedule: Schedule, replay: int) -> Future[R]:
        key = (schedule.key(), replay)
        self.schedules[key] = schedule
        fut = self.pool.submit(self.run, schedule, replay)
        self.started[key] = fut
        return fut

    def _fill(self, schedule: Schedule, replay: int) -> None:
        while not self.stopping and len(self.started) < self.limit:
            running = sum(not f.done() for f in self.started.values())
            if running >= self.jobs:
                return
            nxt = self._next(schedule, replay)
            if nxt is None:
                return
            self._start(*nxt)

    def _next(self, schedule: Schedule, replay: int) -> tuple[Schedule, int] | None:
        """The run most likely needed next that has not started: the next generated schedules'
        first replays (most schedules pass: the search moves on), then this schedule's further
        replays while none of its replays so far has passed."""
        at = self.position.get(schedule.key())
        if at is not None:
            for s in self.upcoming[at + 1:]:
                if (s.key(), 0) not in self.started:
                    return s, 0
        for r in range(replay + 1, self.replays):
            key = (schedule.key(), r)
            if key in self.started:
                continue
            earlier = [self.started.get((schedule.key(), q)) for q in range(r)]
            if any(f is not None and f.done() and not invalid(f.result()) for f in earlier):
                return None  # a replay passed: the schedule does not fail K of K
            return schedule, r
        return None


def invalid(outcome: object) -> bool:
    return getattr(outcome, "code", None) == EXIT_INVALID
