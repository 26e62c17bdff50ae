"""Crash points: named steps where a client process can be told to die, SIGKILL, mid-protocol.

A process that crashes between two commands of a lock protocol (``SETNX`` done, ``EXPIRE``
not yet) is the failure some locks never recover from. Waiting for that to happen by chance
takes forever, so the ``crash-client`` nemesis *arms* one client: it writes the step's name
into that client's crash file (``<run>/clients/c<p>.crash``), and the client, which checks
the file at each crash point, kills itself with SIGKILL there: no cleanup, no last journal
line, exactly like a crash. Just before, it notes in the file where it died, for the record.

Steps: a lock names its own (``crash_steps``, e.g. ``after-setnx``); the workload has
``holding`` (right after entering the critical section). The nemesis may ask for ``auto``:
the lock's first own step, else ``holding``.
"""

from __future__ import annotations

import os
import signal
from pathlib import Path

AUTO = "auto"
HOLDING = "holding"

_file: Path | None = None
_auto = HOLDING


def crash_file(run_dir: Path, process: int) -> Path:
    """Where the nemesis arms client ``process`` (the run and the nemesis agree on this)."""
    return run_dir / "clients" / f"c{process}.crash"


def configure(path: str | os.PathLike[str] | None, lock_steps: tuple[str, ...] = ()) -> None:
    """In a client process: watch ``path``; ``auto`` means the lock's first step."""
    global _file, _auto
    _file = Path(path) if path else None
    _auto = lock_steps[0] if lock_steps else HOLDING


def armed_step(text: str) -> str:
    return text.split("\n", 1)[0].strip()


def point(step: str) -> None:
    """If this process is armed for ``step``: note it, then SIGKILL this process."""
    if _file is None:
        return
    try:
        armed = armed_step(_file.read_text())
    except OSError:
        return  # not armed: the common case, one failed open()
    if armed == step or (armed == AUTO and step == _auto):
        try:
            with _file.open("a") as fh:
                fh.write(f"crashed-at {step}\n")
        except OSError:
            pass
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
