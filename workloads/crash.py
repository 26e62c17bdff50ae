"""Crash points: named steps where a client process can be told to die, SIGKILL, mid-protocol.

A process that crashes between two commands of a lock protocol (``SETNX`` done, ``EXPIRE``
not yet) is the failure some locks never recover from. Waiting for that to happen by chance
takes forever, so the ``crash-client`` nemesis *arms* one client through the controller: the
step's name goes into that client's crash file and the client is sent SIGUSR1; its handler
reads the file once, and from then on :func:`point` (a comparison of two strings, nothing
more, so unarmed clients pay nothing) kills the process with SIGKILL at that step: no
cleanup, no last journal line, exactly like a crash. Just before, it notes in the file where it
died, for the record.

Steps: a lock names its own (``crash_steps``, e.g. ``after-setnx``); the workload has
``holding`` (right after entering the critical section). The nemesis may ask for ``auto``:
the lock's first own step, else ``holding``.
"""

from __future__ import annotations

import os
import signal
from pathlib import Path
from typing import Any

AUTO = "auto"
HOLDING = "holding"
ARM_SIGNAL = signal.SIGUSR1

_file: Path | None = None
_auto = HOLDING
_armed: str | None = None


def configure(path: str | os.PathLike[str] | None, lock_steps: tuple[str, ...] = ()) -> None:
    """In a client process: be armed through ``path`` on SIGUSR1; ``auto`` means the lock's
    first step."""
    global _file, _auto
    _file = Path(path) if path else None
    _auto = lock_steps[0] if lock_steps else HOLDING
    if _file is not None:
        signal.signal(ARM_SIGNAL, _rearm)
        _rearm()  # armed before the process started


def _rearm(signum: int = 0, frame: Any = None) -> None:
    global _armed
    try:
        step = armed_step(_file.read_text()) if _file is not None else ""
    except OSError:
        step = ""
    _armed = (_auto if step == AUTO else step) or None


def armed_step(text: str) -> str:
    return text.split("\n", 1)[0].strip()


def point(step: str) -> None:
    """If this process is armed for ``step``: note it, then SIGKILL this process, and with it
    its process group when it leads one (a client and the lock program it started)."""
    if _armed is None or _armed != step:
        return
    if _file is not None:
        try:
            with _file.open("a") as fh:
                fh.write(f"crashed-at {step}\n")
        except OSError:
            pass
    if os.getpgrp() == os.getpid():
        os.killpg(os.getpid(), signal.SIGKILL)
    os.kill(os.getpid(), signal.SIGKILL)


def crashed_at(path: Path) -> str | None:
    """The step a client noted before it died (None: it did not die at a crash point)."""
    try:
        lines = path.read_text().splitlines()
    except OSError:
        return None
    for line in lines:
        if line.startswith("crashed-at "):
            return line.removeprefix("crashed-at ").strip()
    return None
