"""Moving a client process's clocks from a helper process, never from the controller.

The controller is every client's parent, and a parent that ptraces its own child shares the
child's stop notifications between its tracing and its ``Popen.poll()``: a poll (any thread
asking whether the client is alive) can take the ptrace stop for the child's end, and the run
then calls the client dead (seen: "client 1 exited early", its log empty, under a clock moved
20 times a second). So the vDSO patch (:mod:`harness.controller.vdso_clock`) is written by a
helper, ``python -m harness.controller.client_clock``, started on the first move: it is no
client's parent, so the stops are its own. It reads one request a line (``PID CLOCK
OFFSET``) and answers one JSON line (``{"offset": ...}``, or ``{"error": ...}``); it ends when
its stdin closes (the controller's end).
"""

from __future__ import annotations

import json
import select
import subprocess
import sys
import threading
from typing import IO

from harness.controller import vdso_clock
from harness.core.errors import HarnessError

ANSWER_TIMEOUT_S = 15.0  # a move takes milliseconds; past this the helper is stuck


class ClockHelper:
    """The helper process, started on the first request; one request at a time."""

    def __init__(self) -> None:
        self._proc: subprocess.Popen[str] | None = None
        self._mu = threading.Lock()

    def move(self, pid: int, clock: str, offset: float) -> float:
        """Set ``clock`` of ``pid`` to ``offset`` s from the true time; the offset read back."""
        with self._mu:
            if self._proc is None or self._proc.poll() is not None:
                self._proc = subprocess.Popen(
                    [sys.executable, "-m", "harness.controller.client_clock"],
                    stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, bufsize=1)
            stdin, stdout = self._proc.stdin, self._proc.stdout
            assert stdin is not None and stdout is not None
            try:
                stdin.write(f"{pid} {clock} {offset!r}\n")
                stdin.flush()
                ready, _, _ = select.select([stdout], [], [], ANSWER_TIMEOUT_S)
                line = stdout.readline() if ready else None
            except OSError as e:
                raise HarnessError(f"the client clock helper is gone: {e}") from None
            if line is None:  # stuck (a thread it waits for never stops): its tracees go free
                self._proc.kill()
                self._proc.wait()
                self._proc = None
                raise HarnessError(f"pid {pid}: the client clock helper did not answer within "
                                   f"{ANSWER_TIMEOUT_S:g} s (killed)")
        if not line:
            raise HarnessError("the client clock helper ended without an answer")
        answer = json.loads(line)
        if "error" in answer:
            raise HarnessError(f"pid {pid}: {answer['error']}")
        return float(answer["offset"])

    def close(self) -> None:
        with self._mu:
            if self._proc is not None:
                if self._proc.stdin is not None:
                    self._proc.stdin.close()
                try:
                    self._proc.wait(5)
                except subprocess.TimeoutExpired:
                    self._proc.kill()
                self._proc = None


def serve(lines: IO[str], out: IO[str]) -> None:
    for line in lines:
        try:
            pid_s, clock, offset_s = line.split()
            pid = int(pid_s)
            vdso_clock.shift(pid, clock, float(offset_s))
            moved = vdso_clock.moved_clocks(pid)
            answer: dict[str, object] = {"offset": max(moved.values(), key=abs) if moved
                                         else 0.0}
        except (ValueError, OSError, HarnessError) as e:
            answer = {"error": str(e)[:300]}
        out.write(json.dumps(answer) + "\n")
        out.flush()


if __name__ == "__main__":
    serve(sys.stdin, sys.stdout)
