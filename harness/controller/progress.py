"""Progress while a run goes: elapsed, ops, active fault, lock overlaps so far (counted as the
mutex checker counts them, see :class:`harness.controller.live.LiveState`).

On a terminal one line is rewritten in place; otherwise (CI logs) a line every few seconds.
"""

from __future__ import annotations

import sys
import time
from typing import TextIO

from harness.controller.live import LiveState


class Progress:
    def __init__(self, stream: TextIO | None = None, *, quiet: bool = False,
                 every: float = 5.0) -> None:
        self.stream = stream or sys.stderr
        self.quiet = quiet
        self.tty = self.stream.isatty()
        self.every = 1.0 if self.tty else every
        self._last = 0.0
        self._open = False

    def line(self, text: str) -> None:
        if self.quiet:
            return
        self.done()
        print(text, file=self.stream, flush=True)

    def due(self) -> bool:
        """Would :meth:`tick` print now?"""
        return not self.quiet and time.monotonic() - self._last >= self.every

    def tick(self, elapsed: float, limit: float, live: LiveState, fault: str) -> None:
        if not self.due():
            return
        self._last = time.monotonic()
        text = (f"[{elapsed:5.1f}/{limit:.0f} s] ops {live.ops:6d}  acquired {live.acquired:5d}"
                f"  fault {fault:<18}  overlaps so far {live.overlaps}")
        if self.tty:
            print("\r" + text, end="", file=self.stream, flush=True)
            self._open = True
        else:
            print(text, file=self.stream, flush=True)

    def fraction(self, label: str, done: int, total: int) -> None:
        """``label: 42% of 241 MiB``, as often as :meth:`tick` prints."""
        if self.quiet or total <= 0 or time.monotonic() - self._last < self.every:
            return
        self._last = time.monotonic()
        text = f"{label}: {min(100, 100 * done // total):3d}% of {total / 2**20:.0f} MiB"
        if self.tty:
            print("\r" + text, end="", file=self.stream, flush=True)
            self._open = True
        else:
            print(text, file=self.stream, flush=True)

    def done(self) -> None:
        if self._open:
            print(file=self.stream, flush=True)
            self._open = False
