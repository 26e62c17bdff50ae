"""A lock's ``setup()``: called once in its client process, after the lock is built and before
the workload's first op, on the thread that then calls ``acquire`` (an async lock's runner
awaits its coroutine on the loop thread, the same way).

It is bounded: :data:`SETUP_BOUND` seconds, after which the client stops with one line in its
log and exits as could-not-run (the controller ends the run with exit 3, never a verdict). A
set-up is a few requests to a server the controller has already found ready (the DynamoDB
locks' ``CreateTable``: well under a second); 30 s is ten times the slowest start of a client
seen here under load (boto3's, 2-3 s), and short enough that a set-up that hangs (a server that
accepts and never answers) is reported while the person waits. The bound is kept by a watchdog
thread that ends the process, so a set-up stuck in a C call cannot outlive it; nothing is lost:
no op has been journalled yet.
"""

from __future__ import annotations

import os
import sys
import threading
from typing import Any

SETUP_BOUND = 30.0  # seconds


class LockSetupError(Exception):
    """The lock's ``setup()`` raised: the client cannot test it (could-not-run)."""


def set_up(lock: Any, bound: float = SETUP_BOUND) -> None:
    """Call ``lock.setup()`` if it has one; a raise becomes :class:`LockSetupError` (its
    traceback kept, so the client's line names where it failed); past ``bound`` seconds the
    process exits 70 after one line on stderr."""
    setup = getattr(lock, "setup", None)
    if setup is None:
        return
    finished = threading.Event()
    watchdog = threading.Thread(target=_expire, args=(finished, bound), daemon=True,
                                name="lock-setup-watchdog")
    watchdog.start()
    try:
        setup()
    except Exception as e:
        raise LockSetupError(f"the lock's setup() failed: {type(e).__name__}: {e}"
                             ).with_traceback(e.__traceback__) from e
    finally:
        finished.set()


def _expire(finished: threading.Event, bound: float) -> None:
    if finished.wait(bound):
        return
    print(f"client stopped: LockSetupError: the lock's setup() did not return within "
          f"{bound:g} s", file=sys.stderr, flush=True)
    sys.stdout.flush()
    os._exit(70)
