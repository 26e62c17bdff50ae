"""How a child process is tied to the process that starts it."""

from __future__ import annotations

import contextlib
import ctypes
import signal
from typing import Any

PR_SET_PDEATHSIG = 1

# Resolved once, in the parent: between fork and exec (where die_with_parent runs) a process
# with threads must not load libraries (the loader's lock may be held by a thread that is gone).
_libc: Any = None
with contextlib.suppress(OSError):
    _libc = ctypes.CDLL("libc.so.6", use_errno=True)


def die_with_parent() -> None:
    """preexec_fn: when the parent dies (even by SIGKILL), the kernel SIGKILLs the child too.

    Linux ties this to the parent *thread* that forked the child: start such children from a
    thread that lives as long as the process (the main thread)."""
    if _libc is not None:
        with contextlib.suppress(OSError, AttributeError):
            _libc.prctl(PR_SET_PDEATHSIG, signal.SIGKILL)
