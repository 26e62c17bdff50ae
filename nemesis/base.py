"""The Nemesis role, and what a nemesis may touch (its context).

A nemesis picks its targets from live state (``select``), then injects (``start``) and heals
(``stop``) its fault; ``teardown`` heals everything it could have done, whatever state it is in.
It drives nodes only through the backend's node operations and clients only through their
process handles, so it never knows which backend it runs on.
"""

from __future__ import annotations

import random
import signal
from dataclasses import dataclass, field
from typing import Any, Protocol

from harness.backends.base import Backend
from harness.dbs.base import Node
from harness.live import LiveState
from harness.procs import ProcessTable


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
