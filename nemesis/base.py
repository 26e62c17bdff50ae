"""The Nemesis role, and what a nemesis may touch (its context).

A nemesis picks its targets from live state (``select``), then injects (``start``) and heals
(``stop``) its fault; ``teardown`` heals everything it could have done, whatever state it is in.
It drives nodes only through the backend's node operations and clients only through their
process handles, so it never knows which backend it runs on.
"""

from __future__ import annotations

import random
import signal
import threading
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

from harness.backends.base import Backend
from harness.dbs.base import Node
from harness.live import LiveState
from harness.procs import ProcessTable
from workloads.crash import crash_file


def client_name(process: int) -> str:
    return f"c{process}"


@dataclass
class Clients:
    """The client processes, by history process number."""

    procs: ProcessTable
    processes: list[int]

    def _signal(self, process: int, sig: int) -> bool:
        return self.procs.send(client_name(process), sig)

    def pause(self, process: int) -> bool:
        return self._signal(process, signal.SIGSTOP)

    def resume(self, process: int) -> bool:
        return self._signal(process, signal.SIGCONT)

    # crashes on purpose (the crash-client nemesis) --------------------------------------------
    # A client armed for a crash may die at any moment from then on: the run must not take
    # its death for a harness failure, and faults must not pick it any more.
    doomed: set[int] = field(default_factory=set)

    def alive(self) -> list[int]:
        return [p for p in self.processes if self.procs.pid(client_name(p)) is not None]

    def arm_crash(self, process: int, step: str) -> Path:
        """Tell the client to SIGKILL itself at ``step`` (see workloads/crash.py)."""
        self.doomed.add(process)
        path = crash_file(self.procs.run_dir, process)
        tmp = path.with_suffix(".tmp")
        tmp.write_text(step + "\n")
        tmp.replace(path)
        return path

    def disarm_crash(self, process: int) -> None:
        crash_file(self.procs.run_dir, process).unlink(missing_ok=True)


@dataclass
class NemesisContext:
    backend: Backend
    nodes: list[Node]
    clients: Clients
    live: LiveState
    rng: random.Random
    ttl: float
    db: Any = None
    options: dict[str, Any] = field(default_factory=dict)
    # Set when the run is over and the schedule heals: long verifications may be cut short.
    finishing: threading.Event = field(default_factory=threading.Event)

    def node(self, name: str) -> Node:
        return next(n for n in self.nodes if n.name == name)


class Nemesis(Protocol):
    name: str
    summary: str

    def setup(self, ctx: NemesisContext) -> None: ...

    def select(self, ctx: NemesisContext) -> list[str] | None:
        """Targets for the next fault, from live state; None when there is none right now."""

    def start(self, ctx: NemesisContext, targets: list[str]) -> None: ...

    def duration(self, ctx: NemesisContext) -> float:
        """How long the fault stays on."""

    def stop(self, ctx: NemesisContext, targets: list[str]) -> None: ...

    def teardown(self, ctx: NemesisContext) -> None:
        """Heal everything this nemesis can have done."""


class BaseNemesis:
    """Defaults: no setup, faults last a little longer than the lock's TTL."""

    name = "base"
    summary = ""

    def setup(self, ctx: NemesisContext) -> None:
        return None

    def duration(self, ctx: NemesisContext) -> float:
        return ctx.ttl + 2.0

    def teardown(self, ctx: NemesisContext) -> None:
        return None

    def detail(self) -> dict[str, Any] | None:
        """Extra facts about the fault just started, recorded in the history."""
        return None
