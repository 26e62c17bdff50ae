"""Work on the next items of a stream done ahead in another thread, its results taken in the
stream's order: a big file's next block parsed by array operations (numpy lets the GIL go in
them) on the other core while this thread parses the one before it. One process, so its peak
memory is the whole of what the work takes.

The work is dealt in turn to the threads and to the caller's own thread (done when its result
is asked for): with ``threads`` threads, ``threads + 1`` pieces of work run at once, one
thread a core. With none (one core, or no core spare: :func:`spare_cores`), each piece is
done when its result is asked for, in order, as a plain loop would do it.

I/O: only /proc/loadavg, read by :func:`spare_cores`.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from typing import Any


def cores() -> int:
    """The cores this process may run on."""
    try:
        return len(os.sched_getaffinity(0))
    except (AttributeError, OSError):  # (not Linux)
        return os.cpu_count() or 1


def spare_cores() -> int:
    """The cores this process may run on that nothing else keeps busy: less those other
    threads are running or waiting for now (Linux's count of runnable threads, this one
    among them), else those the load average of the last minute says (a thread on a core
    another process keeps busy takes turns from this one's, and the two get in each other's
    way)."""
    try:
        with open("/proc/loadavg") as fh:
            busy = int(fh.read().split()[3].split("/")[0]) - 1
    except (OSError, IndexError, ValueError):  # (not Linux)
        try:
            busy = round(os.getloadavg()[0])
        except (AttributeError, OSError):  # (no load average)
            busy = 0
    return max(0, cores() - busy)


class Later:
    """Work not started: done by :meth:`result`, in the caller's thread."""

    __slots__ = ("args", "fn")

    def __init__(self, fn: Callable[..., Any], args: tuple[Any, ...]) -> None:
        self.fn = fn
        self.args = args

    def result(self) -> Any:
        return self.fn(*self.args)


class Ahead:
    """Deals work to ``threads`` threads and to the caller's (:class:`Later`), in turn; a
    ``with`` block ends the threads, work not begun cancelled and work begun waited for,
    however the block ends (a reader that gives up on a block leaves no thread behind)."""

    def __init__(self, threads: int) -> None:
        threads = max(0, threads)
        self.pool: Any = None
        self.depth = threads + 1  # pieces of work that run at once
        self.turn = 0
        self.begun: list[Any] = []  # the threads' work not known to be done
        if threads > 0:
            from concurrent.futures import ThreadPoolExecutor

            self.pool = ThreadPoolExecutor(threads, thread_name_prefix="ahead")

    def submit(self, fn: Callable[..., Any], *args: Any) -> Any:
        """``fn(*args)`` begun in a thread, or :class:`Later` (every ``depth``-th, and all of
        them with no thread); its ``result()`` returns or raises what the call does."""
        self.turn += 1
        if self.pool is None or self.turn % self.depth == 0:
            return Later(fn, args)
        job = self.pool.submit(fn, *args)
        self.begun = [*(j for j in self.begun if not j.done()), job]
        return job

    def quiet(self) -> None:
        """Waits until no thread works (what they share may then change)."""
        for job in self.begun:
            job.exception()  # (waits; the result or error stays for result())
        self.begun = []

    def __enter__(self) -> Ahead:
        return self

    def __exit__(self, *exc: object) -> None:
        if self.pool is not None:
            self.pool.shutdown(wait=True, cancel_futures=True)
            self.pool = None
