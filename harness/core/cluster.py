"""What a nemesis may touch, as protocols the controller implements.

A nemesis never knows which backend runs the nodes (local processes, containers, SSH hosts): it
asks the cluster for node operations (:class:`NodeOps`), the client processes for theirs
(:class:`ClientOps`) and the live history for who holds the lock now (:class:`LiveView`), all
through the :class:`NemesisContext` it is handed. Jepsen's split of ``control``, ``net`` and
``db`` is the model.
"""

from __future__ import annotations

import random
import threading
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol


@dataclass(frozen=True)
class Node:
    """One server process (or a client's address). ``name`` is also its name in the history
    and in partitions (``n1``, ``s1``, ``resource``, ``c3``)."""

    name: str
    host: str
    port: int

    @property
    def endpoint(self) -> dict[str, object]:
        return {"name": self.name, "host": self.host, "port": self.port}


def client_name(process: int) -> str:
    """The endpoint name of client ``process`` in cuts and fault targets."""
    return f"c{process}"


def process_of(target: str) -> int:
    """The process number of a client endpoint name (``c3`` -> 3)."""
    return int(target.removeprefix("c"))


class NodeOps(Protocol):
    """Node and network operations, whatever the nodes run in."""

    def start(self, node: Node) -> None: ...

    def kill(self, node: Node) -> None:
        """SIGKILL the node's server and wait until it is gone."""

    def pause(self, node: Node) -> None: ...

    def resume(self, node: Node) -> None: ...

    def is_running(self, node: Node) -> bool: ...

    def answers(self, node: Node) -> bool:
        """Does the node answer its DB's readiness probe right now (one short probe)?"""

    def wait_ready(self, node: Node, timeout: float) -> None: ...

    def set_clock(self, node: Node, offset: float) -> None:
        """Move the node's wall clock ``offset`` seconds from the true time (0 heals)."""

    def cut(self, links: Iterable[tuple[str, str]]) -> None:
        """Drop traffic both ways between each pair of endpoints (node or client names)."""

    def heal(self) -> None:
        """Remove every cut this run made."""


class ClientOps(Protocol):
    """The client processes, by history process number."""

    processes: list[int]
    doomed: set[int]  # clients armed to crash: their death is not a harness failure

    def alive(self) -> list[int]: ...

    def pause(self, process: int) -> bool: ...

    def resume(self, process: int) -> bool: ...

    def arm_crash(self, process: int, step: str) -> None:
        """Tell the client to SIGKILL itself when it next reaches ``step``."""

    def disarm_crash(self, process: int) -> None: ...

    def crashed_at(self, process: int) -> str | None:
        """The step at which the client noted it crashed, if it did."""


class LiveView(Protocol):
    """The history as it grows: who holds the lock, who waits for it."""

    def holders(self) -> list[int]:
        """Clients that believe they hold the lock now, longest-holding first."""

    def waiters(self) -> list[int]:
        """Clients blocked in an acquire now, longest-waiting first."""

    def forget(self, process: int) -> None:
        """A client that is gone holds and wants nothing any more."""


@dataclass
class NemesisContext:
    """Everything a nemesis is given. ``db`` is the DB role object: a nemesis asks it for
    capabilities (``harness.core.capabilities``), never for its class."""

    cluster: NodeOps
    nodes: Sequence[Node]
    clients: ClientOps
    live: LiveView
    rng: random.Random
    ttl: float
    db: Any = None
    options: dict[str, Any] = field(default_factory=dict)
    # Set when the run is over and the schedule heals: long verifications may be cut short.
    finishing: threading.Event = field(default_factory=threading.Event)

    def node(self, name: str) -> Node:
        for n in self.nodes:
            if n.name == name:
                return n
        raise KeyError(f"no DB node {name!r} (nodes: {', '.join(n.name for n in self.nodes)})")
