"""Async locks: a lock whose ``acquire``/``release`` are coroutines runs on an event loop that
its client process owns, on a thread of its own that keeps running between calls (so the
library's background tasks, a lease renewal say, run as they would in an application). The
workload calls it like any other lock, through :class:`AsyncLockRunner`.

A SIGSTOP freezes that thread with the rest of the process: a paused holder's renewal task is
paused too, exactly as for a renewal thread.
"""

from __future__ import annotations

import asyncio
import inspect
import threading
from collections.abc import Coroutine
from typing import Any, TypeVar

from harness.core.locks import Grant

T = TypeVar("T")
CALL_SLACK = 5.0  # seconds past an acquire's own timeout before the call itself is given up


def is_async(lock: Any) -> bool:
    return inspect.iscoroutinefunction(getattr(lock, "acquire", None))


class AsyncLockRunner:
    """Runs an async lock's coroutines on a loop thread; looks like a plain lock."""

    def __init__(self, lock: Any) -> None:
        self.lock = lock
        self.loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self.loop.run_forever, name="lock-loop",
                                        daemon=True)
        self._thread.start()
        for attr in ("reentrant", "crash_steps", "timeout_errors", "workload_defaults"):
            if hasattr(type(lock), attr):
                setattr(self, attr, getattr(type(lock), attr))
        if callable(getattr(lock, "held", None)):
            self.held = self._held

    def setup(self) -> None:
        """The lock's ``async def setup()``, if it has one, awaited on the loop (the client
        calls this once, bounded, before the first op: :mod:`workloads.lock_setup`)."""
        setup = getattr(self.lock, "setup", None)
        if setup is not None:
            self._call(setup(), None)

    def _call(self, coro: Coroutine[Any, Any, T], timeout: float | None) -> T:
        future = asyncio.run_coroutine_threadsafe(coro, self.loop)
        return future.result(None if timeout is None else timeout + CALL_SLACK)

    def acquire(self, timeout: float) -> Grant | None:
        return self._call(self.lock.acquire(timeout), timeout)

    def release(self, grant: Grant) -> bool:
        return self._call(self.lock.release(grant), None)

    def _held(self, grant: Grant) -> bool:
        held = self.lock.held(grant)
        return self._call(held, 5.0) if inspect.isawaitable(held) else bool(held)

    def close(self) -> None:
        close = getattr(self.lock, "close", None)
        try:
            if close is not None:
                result = close()
                if inspect.isawaitable(result):
                    self._call(result, 5.0)
        finally:
            self.loop.call_soon_threadsafe(self.loop.stop)
            self._thread.join(5)
