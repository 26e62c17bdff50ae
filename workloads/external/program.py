"""One lock program, as a child of the client process: started, greeted, asked, stopped.

The program runs in the client's process group (never a session of its own), so that the
``pause`` nemesis, which stops the client's whole group, freezes it with the client, runtime
threads and all; the kernel kills it when the client dies (``PR_SET_PDEATHSIG``). Its stdin
and stdout carry the protocol (:mod:`workloads.external.protocol`); what it writes to stderr is
copied line by line into the client's log, and its last words are quoted when it dies.

Waiting for an answer counts only the time this process was running: while the whole group
is stopped (a pause of the client), the clock runs on but neither side can do anything, and a
program must not be declared hung because it was frozen together with us.
"""

from __future__ import annotations

import collections
import contextlib
import os
import select
import signal
import subprocess
import sys
import threading
import time
from typing import IO, Any

from harness.core.lifetime import die_with_parent
from workloads.external import protocol
from workloads.external.protocol import Hello, ProtocolError, Reply

SLICE = 0.1  # seconds per select(): the unit of counted waiting
SLACK = 0.05  # a select() that overran its slice by more than this was frozen, not waiting
CLOSE_GRACE = 1.0  # seconds a program has to exit after its stdin closes
LAST_WORDS = 5  # stderr lines kept to quote


class ProgramError(Exception):
    """The program did not answer as the protocol says (dead, hung, garbled): one line."""


class Program:
    """A running lock program: one request at a time. A call waits for one in flight (a
    release the workload stopped waiting for, past its release_timeout, still owns the pipe
    until it has its answer or its budget runs out)."""

    def __init__(self, argv: list[str], label: str, env: dict[str, str] | None = None) -> None:
        self.argv = argv
        self.label = label
        self._env = env
        self._proc: subprocess.Popen[bytes] | None = None
        self._buf = b""
        self._next_id = 0
        self._said: collections.deque[str] = collections.deque(maxlen=LAST_WORDS)
        self._stderr_done = threading.Event()
        self._calls = threading.Lock()
        self.hello: Hello | None = None

    # life ------------------------------------------------------------------------------------
    def start(self, greeting: dict[str, Any], timeout: float) -> Hello:
        """Spawn the program and exchange hellos; ProgramError (killed first) if it cannot."""
        try:
            self._proc = subprocess.Popen(
                self.argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                bufsize=0, close_fds=True, preexec_fn=die_with_parent,
                env={**os.environ, **(self._env or {}), "LOCK_HARNESS_PROTOCOL":
                     str(protocol.VERSION)})
        except OSError as e:
            raise ProgramError(f"cannot start {self.label}: {e.strerror or e}") from None
        threading.Thread(target=self._copy_stderr, args=(self._proc.stderr,),
                         name="program-stderr", daemon=True).start()
        try:
            self._send(greeting)
            self.hello = protocol.parse_hello(self._read_line(timeout, "hello"))
        except ProtocolError as e:
            self.kill()
            raise ProgramError(f"{self.label} broke the protocol at hello: {e}") from None
        except ProgramError:
            self.kill()
            raise
        return self.hello

    def _copy_stderr(self, pipe: IO[bytes] | None) -> None:
        """The program's stderr, line by line, into the client's; the last lines kept."""
        try:
            for raw in iter(pipe.readline, b"") if pipe is not None else ():
                line = raw.decode("utf-8", "replace").rstrip("\n")
                if line.strip():
                    self._said.append(line.strip())
                with contextlib.suppress(OSError, ValueError):
                    sys.stderr.write(line + "\n")
                    sys.stderr.flush()
        except (OSError, ValueError):
            pass
        finally:
            if pipe is not None:
                with contextlib.suppress(OSError):
                    pipe.close()
            self._stderr_done.set()

    def last_words(self) -> str:
        """What the program last wrote to stderr (one line), or ""."""
        return protocol.shorten(self._said[-1]) if self._said else ""

    @property
    def pid(self) -> int | None:
        return None if self._proc is None else self._proc.pid

    def alive(self) -> bool:
        return self._proc is not None and self._proc.poll() is None

    def exit_status(self) -> str:
        """How it ended, in words (``exited with code 1``, ``killed by SIGKILL``)."""
        if self._proc is None:
            return "never started"
        code = self._proc.poll()
        if code is None:
            return "still running"
        if code < 0:
            try:
                return f"killed by {signal.Signals(-code).name}"
            except ValueError:
                return f"killed by signal {-code}"
        return f"exited with code {code}"

    def kill(self) -> None:
        """SIGKILL the program (only it: the client shares its group) and reap it."""
        proc = self._proc
        if proc is None:
            return
        if proc.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                proc.kill()
        with contextlib.suppress(subprocess.TimeoutExpired):
            proc.wait(5)
        self._close_pipes()

    def close(self) -> None:
        """End the program: its stdin closes (EOF means "exit now"), then SIGKILL."""
        proc = self._proc
        if proc is None:
            return
        if proc.stdin is not None:
            with contextlib.suppress(OSError):
                proc.stdin.close()
        with contextlib.suppress(subprocess.TimeoutExpired):
            proc.wait(CLOSE_GRACE)
        self.kill()

    def _close_pipes(self) -> None:
        proc = self._proc
        if proc is None:
            return
        for pipe in (proc.stdin, proc.stdout):  # stderr: its copier closes it at its end
            if pipe is not None:
                with contextlib.suppress(OSError):
                    pipe.close()

    # requests ---------------------------------------------------------------------------------
    def call(self, op: str, budget: float, **fields: Any) -> Reply:
        """Send one request, wait up to ``budget`` seconds of running time for its answer.
        ProgramError when it cannot be had; the caller decides what to do with the program."""
        with self._calls:
            self._next_id += 1
            rid = self._next_id
            self._send(protocol.request(rid, op, **fields))
            line = self._read_line(budget, op)
        try:
            return protocol.parse_reply(line, rid, op)
        except ProtocolError as e:
            raise ProgramError(f"{self.label} broke the protocol ({op}): {e}") from None

    def _send(self, message: dict[str, Any]) -> None:
        proc = self._proc
        if proc is None or proc.stdin is None or proc.poll() is not None:
            raise ProgramError(self._gone("before the request"))
        try:
            proc.stdin.write(protocol.encode(message))
        except (BrokenPipeError, ValueError, OSError):
            raise ProgramError(self._gone("while it was sent a request")) from None

    def _read_line(self, budget: float, what: str) -> bytes:
        proc = self._proc
        assert proc is not None and proc.stdout is not None
        fd = proc.stdout.fileno()
        counted = 0.0
        while True:
            nl = self._buf.find(b"\n")
            if nl >= 0:
                line, self._buf = self._buf[:nl], self._buf[nl + 1:]
                return line
            if len(self._buf) > protocol.MAX_LINE:
                raise ProgramError(f"{self.label} wrote a line longer than "
                                   f"{protocol.MAX_LINE} bytes")
            left = budget - counted
            if left <= 0:
                raise ProgramError(f"{self.label} did not answer {what} within {budget:.1f} s")
            step = min(SLICE, left)
            began = time.monotonic()
            try:
                ready, _, _ = select.select([fd], [], [], step)
            except InterruptedError:  # a signal (SIGUSR1 arms a crash): keep waiting
                ready = []
            counted += min(time.monotonic() - began, step + SLACK)
            if ready:
                try:
                    data = os.read(fd, 65536)
                except OSError:
                    data = b""
                if not data:
                    with contextlib.suppress(subprocess.TimeoutExpired):
                        proc.wait(1.0)
                    raise ProgramError(self._gone(f"before it answered {what}"))
                self._buf += data

    def _gone(self, when: str) -> str:
        proc = self._proc
        if proc is not None:
            with contextlib.suppress(subprocess.TimeoutExpired):
                proc.wait(0.5)
        if proc is not None and proc.poll() is None:
            return f"{self.label} closed its stdout {when}"
        self._stderr_done.wait(0.5)  # its last words, when it had time to say them
        said = self.last_words()
        return (f"{self.label} {self.exit_status()} {when}"
                f"{f' (its last words: {said})' if said else ''}")
