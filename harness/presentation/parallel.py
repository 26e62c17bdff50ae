"""Runs in child processes, N at a time: what ``harness suite --jobs N`` and the replays of
``harness explore --jobs N`` share.

Each item's work runs in a worker thread (it waits on its child process; the child does the
work, so threads are enough). The caller hears of each finished item in the main thread, in
the order they finish, so it can print one line per run. Only the main thread sees Ctrl-C:
then nothing more starts, the children running are sent SIGINT (they heal and save what they
recorded, as a run alone does) and, past the grace, SIGKILL; their work returns as interrupted.
"""

from __future__ import annotations

import os
import signal
import threading
import time
from collections.abc import Callable, Sequence
from concurrent.futures import FIRST_COMPLETED, Future, ThreadPoolExecutor, wait
from typing import Any, TypeVar

from harness.core.errors import UsageError
from harness.presentation.runs import STOP_GRACE_S, interrupt_children

T = TypeVar("T")
R = TypeVar("R")
POLL_S = 0.1  # how often the loop looks for a Ctrl-C heard


def cores() -> int:
    """The cores this process may run on."""
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except (AttributeError, OSError):
        return max(1, os.cpu_count() or 1)


def check_jobs(jobs: int | None) -> int:
    """``--jobs``: at least 1; None is the default, the number of cores."""
    if jobs is None:
        return cores()
    if not 1 <= jobs <= 64:
        raise UsageError(f"--jobs must be 1 to 64 runs at once, got {jobs}")
    return jobs


class _CtrlC:
    """Ctrl-C heard as a count, not raised: wherever it lands in the main thread (in ``wait``,
    in ``done``, between two bytecodes), the loop sees it on its next turn. Only the main
    thread can install it; elsewhere nothing is heard (signals only reach the main thread)."""

    def __init__(self) -> None:
        self.presses = 0
        self._before: Any = None

    def __enter__(self) -> _CtrlC:
        if threading.current_thread() is threading.main_thread():
            self._before = signal.signal(signal.SIGINT, self._press)
        return self

    def _press(self, signum: int, frame: Any) -> None:
        self.presses += 1

    def __exit__(self, *exc: object) -> None:
        if self._before is not None:
            signal.signal(signal.SIGINT, self._before)


def run_all(items: Sequence[T], work: Callable[[T], R], jobs: int, *,
            done: Callable[[int, R], None], stop: Callable[[R], bool] = lambda r: False,
            ) -> tuple[list[R | None], bool]:
    """``work(item)`` for each item, at most ``jobs`` at once, started in the order given;
    ``done(index, result)`` in the main thread as each finishes. Once a result is ``stop``
    (a run interrupted) or Ctrl-C comes, nothing more starts and the ones running end
    (Ctrl-C interrupts them). The results by index (None: never started) and whether it was
    interrupted."""
    results: list[R | None] = [None] * len(items)
    interrupted = False
    queue = iter(enumerate(items))
    pool = ThreadPoolExecutor(max_workers=max(1, jobs), thread_name_prefix="run")
    pending: dict[Future[R], int] = {}

    def start_next() -> None:
        for i, item in queue:
            pending[pool.submit(work, item)] = i
            return

    with _CtrlC() as ctrl_c:
        try:
            for _ in range(max(1, jobs)):
                start_next()
            while pending:
                finished, _ = wait(pending, timeout=POLL_S, return_when=FIRST_COMPLETED)
                if ctrl_c.presses and not interrupted:
                    interrupted = True
                    ask_to_stop(pending, ctrl_c)
                for fut in sorted(finished, key=lambda f: pending[f]):
                    i = pending.pop(fut)
                    results[i] = fut.result()
                    done(i, results[i])  # type: ignore[arg-type]
                    if stop(results[i]):  # type: ignore[arg-type]
                        interrupted = True
                    if not interrupted and not ctrl_c.presses:
                        start_next()
                interrupted = interrupted or bool(ctrl_c.presses)
        finally:
            pool.shutdown(wait=True)
    return results, interrupted


def ask_to_stop(pending: dict[Future[R], int], ctrl_c: _CtrlC) -> None:
    """SIGINT to the children running; SIGKILL to those still running after the grace, or at
    a second Ctrl-C."""
    interrupt_children(signal.SIGINT)
    deadline = time.monotonic() + STOP_GRACE_S
    running = [f for f in pending if not f.done()]
    while running and time.monotonic() < deadline and ctrl_c.presses < 2:
        wait(running, timeout=min(POLL_S, max(0.0, deadline - time.monotonic())))
        running = [f for f in running if not f.done()]
    if running:
        interrupt_children(signal.SIGKILL)
