"""The client processes of a run: started, signalled, armed to crash, stopped.

Each client is ``python -m workloads.client CONFIG.json``, its own process (and session), tied
to the controller so that it dies with it. A client whose lock is an external program
(:mod:`workloads.locks.external`) starts it in its own process group: a pause stops the whole
group (the JVM's or the Go runtime's threads too), and a kill kills it all.
:class:`Clients` is what a nemesis may do to them (:class:`harness.core.cluster.ClientOps`).
"""

from __future__ import annotations

import os
import signal
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

from harness.controller import vdso_clock
from harness.controller.client_clock import ClockHelper
from harness.controller.procs import ProcessTable, descendants
from harness.controller.store import RunDir
from harness.controller.vdso_clock import VdsoError
from harness.core.atomic import write_text
from harness.core.client_config import ClientConfig
from harness.core.cluster import client_name
from harness.core.errors import HarnessError
from workloads.client import CLOCK_SIGNAL
from workloads.crash import ARM_SIGNAL, crashed_at

STOP_TIMEOUT = 10.0
PROBE_WAIT = 1.0  # seconds a client has to answer a clock probe (a paused one never does)


@dataclass
class Clients:
    """The client processes, by history process number."""

    procs: ProcessTable
    run: RunDir
    processes: list[int]
    doomed: set[int] = field(default_factory=set)
    clock_helper: ClockHelper = field(default_factory=ClockHelper)

    def spawn(self, process: int, config: ClientConfig, group: int | None = None) -> None:
        """``group``: the group id the client runs with (the backend rewrites the source
        address of that group's connections to the client's own)."""
        path = self.run.client_config(process)
        path.parent.mkdir(parents=True, exist_ok=True)
        write_text(path, config.to_json())
        self.procs.spawn(client_name(process), [sys.executable, "-m", "workloads.client",
                                                str(path)],
                         self.run.client_log(process), tie_to_controller=True, group=group)

    def _signal(self, process: int, sig: int) -> bool:
        return self.procs.send(client_name(process), sig)

    def pid(self, process: int) -> int | None:
        return self.procs.pid(client_name(process))

    def alive(self) -> list[int]:
        return [p for p in self.processes if self.pid(p) is not None]

    def dead(self) -> list[int]:
        """Clients that died although nobody meant them to."""
        return [p for p in self.processes if self.pid(p) is None and p not in self.doomed]

    def pause(self, process: int) -> bool:
        return self.procs.send(client_name(process), signal.SIGSTOP, group=True)

    def resume(self, process: int) -> bool:
        return self.procs.send(client_name(process), signal.SIGCONT, group=True)

    def move_clock(self, process: int, clock: str, offset: float) -> float | None:
        pid = self.pid(process)
        return None if pid is None else move_tree(self.clock_helper, pid, clock, offset)

    def read_clock(self, process: int) -> tuple[float, float] | None:
        pid = self.pid(process)
        return None if pid is None else read_tree(pid, self.run.clock_file(process))

    # crashes on purpose (the crash-client nemesis) --------------------------------------------
    # A client armed for a crash may die at any moment from then on: the run must not take
    # its death for a harness failure, and faults must not pick it any more.
    def arm_crash(self, process: int, step: str) -> None:
        self.doomed.add(process)
        write_text(self.run.crash_file(process), step + "\n")
        self._signal(process, ARM_SIGNAL)

    def disarm_crash(self, process: int) -> None:
        self.run.crash_file(process).unlink(missing_ok=True)
        self._signal(process, ARM_SIGNAL)

    def crashed_at(self, process: int) -> str | None:
        return crashed_at(self.run.crash_file(process))

    def stop_all(self) -> list[int]:
        """SIGTERM to every client at once (each finishes its op, journals it and exits),
        then wait for them together; a client that does not exit in time is killed. Returns
        the clients killed (each stuck in whatever it was doing)."""
        names = [client_name(p) for p in self.processes]
        self.procs.send_all(names, signal.SIGCONT, group=True)  # a stopped one cannot act
        self.procs.send_all(names, signal.SIGTERM)  # on SIGTERM
        self.clock_helper.close()
        deadline = time.monotonic() + STOP_TIMEOUT
        killed = []
        for p in self.processes:
            if not self.procs.wait_gone(client_name(p), max(0.0, deadline - time.monotonic())):
                self.procs.stop(client_name(p), timeout=0.1, sig=signal.SIGKILL)
                killed.append(p)
        return killed


def move_tree(helper: ClockHelper, pid: int, clock: str, offset: float) -> float:
    """Move ``clock`` of ``pid`` and of every process it started (a lock program: the clock
    the lock reads) through a patch of each one's vDSO, written by ``helper``
    (:mod:`harness.controller.client_clock`); a patch dies with its process. The offset read
    back from ``pid``'s patch."""
    moved = helper.move(pid, clock, offset)
    for child in descendants(pid):
        try:
            helper.move(child, clock, offset)
        except HarnessError:
            if os.path.exists(f"/proc/{child}"):
                raise  # a child that ended meanwhile has no clock left to move
    return moved


def read_tree(pid: int, path: Path) -> tuple[float, float] | None:
    """``pid``'s own read-back (:func:`probe_clock`, answered in ``path``), or, when a process
    it started (a lock program, which answers no probe) reads its wall clock moved less far
    (its vDSO patch, read from /proc now), that process's: the least moved clock of the tree
    is the one a lock may have read."""
    seen = probe_clock(pid, path)
    for child in descendants(pid):
        try:
            moved = vdso_clock.moved_clocks(child).get("wall", 0.0)
        except VdsoError:
            continue  # ended meanwhile
        if seen is not None and abs(moved) < abs(seen[0]):
            seen = (moved, time.monotonic())
    return seen


def probe_clock(pid: int, path: Path) -> tuple[float, float] | None:
    """Process ``pid``'s wall clock against ours, as it reads it itself, and when it read it
    (our monotonic clock): the probe of :func:`workloads.client.answer_clock_probes`,
    answered in ``path`` (its wall clock less its monotonic one, which nothing moves here,
    against ours); None when it does not answer within :data:`PROBE_WAIT` s (gone, paused),
    or does not catch the probe's signal (yet): the signal would kill it."""
    if not catches(pid, CLOCK_SIGNAL):
        return None
    path.unlink(missing_ok=True)
    try:
        os.kill(pid, CLOCK_SIGNAL)
    except OSError:
        return None
    deadline = time.monotonic() + PROBE_WAIT
    while time.monotonic() < deadline:
        try:
            wall, mono = map(float, path.read_text().split())
        except (OSError, ValueError):
            time.sleep(0.002)
            continue
        return (wall - mono) - (time.time() - time.monotonic()), mono
    return None


def catches(pid: int, sig: int) -> bool:
    """Has process ``pid`` a handler for ``sig`` (its ``SigCgt`` mask)?"""
    try:
        with open(f"/proc/{pid}/status") as fh:
            mask = next(int(x.split()[1], 16) for x in fh if x.startswith("SigCgt:"))
    except (OSError, StopIteration, ValueError, IndexError):
        return False
    return bool(mask >> (sig - 1) & 1)
