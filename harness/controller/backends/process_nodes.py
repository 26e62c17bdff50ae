"""Node operations both backends share: once a server runs, it is a host pid in the run's
ProcessTable (a child on the local backend, a process inside a container on the docker one),
and stopping, killing, pausing and probing it are the same signals and probes; moving its clock
is the same offset file for libfaketime (where the backend keeps it: ``clock_file``), or the
same patch of a Go server's vDSO, or both: the monotonic clock alone of a server under
libfaketime is both its clocks moved by the file and its wall clock moved back by the patch.

Pause, resume and kill signal the server's whole process group (PostgreSQL is a postmaster and
one backend per connection: stopping the postmaster alone would freeze nothing a client sees).
A DB may name the signal that stops it cleanly (``stop_signal``, default SIGTERM)."""

from __future__ import annotations

import signal
import time
from pathlib import Path
from typing import Any

from dbs.faketime import check_clock
from harness.controller import vdso_clock
from harness.controller.procs import ProcessTable
from harness.controller.store import RunDir
from harness.core.atomic import write_text
from harness.core.capabilities import clock_mechanism
from harness.core.cluster import Node
from harness.core.errors import HarnessError


class ProcessNodes:
    procs: ProcessTable
    dbs: dict[str, Any]
    run: RunDir
    clock_modes: dict[str, str]  # node -> the clock(s) libfaketime fakes there

    def log_file(self, node: Node) -> Path:
        return self.run.log(node.name)

    def clock_file(self, node: Node) -> Path:
        """Where this machine writes the offset libfaketime reads for the node's server."""
        raise NotImplementedError

    def set_clock(self, node: Node, offset: float, clock: str = "wall") -> None:
        if clock_mechanism(self.dbs.get(node.name)) == "vdso":  # a Go server: its vDSO patched
            vdso_clock.shift_node(self.procs, self.dbs[node.name], node.name, clock, offset)
            return
        if clock == "monotonic":  # libfaketime moves both clocks (its timed waits follow), the
            # vDSO patch sets the wall clock back as far, both while the server is stopped
            check_clock(node.name, self.clock_modes.get(node.name), "both")
            vdso_clock.shift_node(self.procs, self.dbs[node.name], node.name, "wall", -offset,
                                  lambda: write_offset(self.clock_file(node), offset))
            return
        check_clock(node.name, self.clock_modes.get(node.name), clock)
        write_offset(self.clock_file(node), offset)

    def reachable_dir(self, node: Node) -> Path:
        """The node directory its server is told about, as this process reaches it."""
        raise NotImplementedError

    def repair_before_restart(self, node: Node) -> list[str]:
        """The DB's repair of the node's directory after a crash, before its restart
        (``dbs.base.DB``), with what it takes out kept in ``<run>/repaired-aside/<node>``."""
        aside = self.run.path / "repaired-aside" / node.name
        return list(self.dbs[node.name].repair_before_restart(node, self.reachable_dir(node),
                                                                aside))

    def join_empty(self, node: Node, member: str, cluster: dict[str, str]) -> list[str]:
        """The DB's rewrite of the node's directory for a new member on empty data."""
        return list(self.dbs[node.name].join_empty(node, self.reachable_dir(node), member,
                                                   cluster))

    def stop(self, node: Node) -> None:
        self.procs.stop(node.name, timeout=5, sig=stop_signal(self.dbs.get(node.name)))

    def kill(self, node: Node) -> None:
        self.procs.kill(node.name, 5)  # the whole tree dead before anything restarts it

    def pause(self, node: Node) -> None:
        self.procs.send(node.name, signal.SIGSTOP, group=True)

    def resume(self, node: Node) -> None:
        self.procs.send(node.name, signal.SIGCONT, group=True)

    def is_running(self, node: Node) -> bool:
        return self.procs.pid(node.name) is not None

    def answers(self, node: Node) -> bool:
        return bool(self.dbs[node.name].ready(node))

    def wait_ready(self, node: Node, timeout: float) -> None:
        db = self.dbs[node.name]
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if not self.is_running(node):
                raise HarnessError(f"{node.name} ({db.name}) exited at start: "
                                   f"{last_lines(self.log_file(node))}")
            if db.ready(node):
                return
            time.sleep(0.05)
        raise HarnessError(f"{node.name} ({db.name}) not ready after {timeout:.0f} s; "
                           f"see {self.log_file(node)}")


def offset_text(offset: float) -> str:
    """libfaketime's relative offset format: "+60s", "-1.5s"."""
    return f"{offset:+.3f}s" if offset % 1 else f"{int(offset):+d}s"


def stop_signal(db: Any) -> int:
    """The signal that stops ``db``'s server cleanly (a DB's ``stop_signal``; SIGTERM)."""
    return int(db.stop_signal or signal.SIGTERM)


def write_offset(path: Path, offset: float) -> None:
    """The offset in libfaketime's format, written atomically."""
    write_text(path, offset_text(offset) + "\n")


def last_lines(path: Path, n: int = 2) -> str:
    try:
        lines = [x for x in path.read_text(errors="replace").splitlines() if x.strip()]
    except OSError:
        return "(no log)"
    return " | ".join(lines[-n:]) or "(empty log)"
