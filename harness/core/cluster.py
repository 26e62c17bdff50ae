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

from harness.core import defaults


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


def client_of(target: object) -> int | None:
    """The client process a fault target names (``c3`` -> 3), None for a node or a link."""
    name = str(target)
    return int(name[1:]) if name.startswith("c") and name[1:].isdigit() else None


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

    def drop_unsynced(self, node: Node) -> dict[str, Any]:
        """Forget what the node's server wrote and did not sync (a power loss; backends with
        the PowerLoss capability): ``{"files": {path: bytes}, "bytes": n}``."""

    def repair_before_restart(self, node: Node) -> list[str]:
        """Have the node's DB repair its data directory as its fixed release would at its
        start (the node is down: killed, or its unsynced data dropped by a power loss); what
        was done, in words. A backend that cannot reach a node's directory (ssh) has none."""

    def join_empty(self, node: Node, member: str, cluster: dict[str, str]) -> list[str]:
        """Have the node's DB (capabilities.Membership) make the stopped node a new member
        ``member`` joining ``cluster`` ({name: peer address}) on an empty data directory;
        what was done, in words. A backend that cannot reach a node's directory has none."""

    def write_back(self, node: Node) -> dict[str, Any]:
        """Make durable what the node's server wrote so far (the kernel's writeback, which a
        server that has run a while has had): the same shape as :meth:`drop_unsynced`."""

    def set_clock(self, node: Node, offset: float, clock: str = "wall") -> None:
        """Move the node's clock ``offset`` seconds from the true time (0 heals): ``clock`` is
        ``"wall"``, ``"monotonic"`` or ``"both"`` (see capabilities.ClockFaults)."""

    def cut(self, links: Iterable[tuple[str, str]]) -> None:
        """Drop traffic both ways between each pair of endpoints (node or client names)."""

    def cut_oneway(self, links: Iterable[tuple[str, str]]) -> None:
        """Drop what the first endpoint of each pair sends the second; the second still
        reaches the first (a one-way partition). Healed by :meth:`heal`."""

    def heal(self) -> None:
        """Remove every cut this run made (two-way and one-way; not packet loss)."""

    def lose(self, links: Iterable[tuple[str, str]], probability: float, *,
             both_ways: bool = True) -> None:
        """Drop each packet between each pair of endpoints with ``probability`` (iptables
        ``statistic --mode random``); with ``both_ways`` False only what the first sends."""

    def heal_loss(self) -> None:
        """Remove every packet-loss rule this run made."""

    def lost_packets(self) -> int:
        """Packets the loss rules of this run have dropped so far (the rules' counters)."""


class LinkOps(Protocol):
    """The link layer: a proxy the run controls, through which every connection of a client to
    a DB endpoint runs (and, where the DB's peer addresses are the harness's to give, every
    connection between DB nodes). A link is named ``src>dst`` (``c3>n1``, ``n2>n1``); its
    direction ``up`` is what ``src`` sends, ``down`` what comes back.

    Shapes are kept per ``owner`` (the nemesis that set them) and add up, so one fault's heal
    never undoes another's. A stall holds one direction's bytes for some seconds, then
    delivers them all: from now, or (``trigger="next"``) from the next chunk the other
    direction carries, so that the reply to the next request is the one held, or
    (``trigger="grant"``, down) from the next reply that grants a lock on a link of one of
    ``groups``: that group's links are held, the grant first, and no other group's.
    """

    def links(self, src: str | None = None, dst: str | None = None) -> list[str]:
        """The links the layer carries (planned or seen), optionally from ``src`` / to
        ``dst`` (endpoint names)."""

    def peer_links(self) -> list[str]:
        """The links between DB nodes the layer carries (empty when their peers dial each
        other directly)."""

    def shape(self, links: Iterable[str], owner: str, *, delay: float = 0.0,
              jitter: float = 0.0, rate: float = 0.0, close_delay: float = 0.0,
              direction: str = "both") -> None:
        """Latency (plus uniform jitter), a bandwidth limit in bytes/s (0: none) and a
        delayed close, for ``owner``."""

    def unshape(self, owner: str, links: Iterable[str] | None = None) -> None: ...

    def stall(self, links: Iterable[str], seconds: float, *, direction: str = "down",
              trigger: str = "now", after: Iterable[str] | None = None,
              groups: Iterable[Iterable[str]] | None = None) -> None:
        """With ``after`` (and ``trigger="next"``), armed only once one of the ``after`` links
        carries a chunk up (a holder's release request arms the waiters' stalls)."""

    def unstall(self, links: Iterable[str] | None = None) -> None:
        """End every stall now: what was held is delivered."""

    def reset(self, links: Iterable[str]) -> int:
        """Reset (TCP RST) every open connection of the links; how many there were."""

    def stats(self, links: Iterable[str] | None = None) -> dict[str, dict[str, Any]]:
        """Per link: connections, and per direction bytes, chunks, time added, bytes a stall
        held, the current shape (``harness.controller.linkproxy`` has the fields)."""


def link_name(src: str, dst: str) -> str:
    return f"{src}>{dst}"


def link_ends(link: str) -> tuple[str, str]:
    src, _, dst = link.partition(">")
    return src, dst


class ClientOps(Protocol):
    """The client processes, by history process number."""

    processes: list[int]
    doomed: set[int]  # clients armed to crash: their death is not a harness failure

    def alive(self) -> list[int]: ...

    def pause(self, process: int) -> bool: ...

    def resume(self, process: int) -> bool: ...

    def move_clock(self, process: int, clock: str, offset: float) -> float | None:
        """Set the ``clock`` (wall, monotonic, both) of the client process and of the lock
        program it started ``offset`` seconds from the true time (0: back to it); the offset
        of the client's patch, None when the process is gone."""

    def read_clock(self, process: int) -> tuple[float, float] | None:
        """The client's wall clock less the true time, in seconds, as the client process
        reads it itself (or its lock program, when that one's moved less far), and when it
        was read (``time.monotonic()``: one clock on this host); None when it does not
        answer."""

    def arm_crash(self, process: int, step: str) -> None:
        """Tell the client to SIGKILL itself when it next reaches ``step``."""

    def disarm_crash(self, process: int) -> None: ...

    def crashed_at(self, process: int) -> str | None:
        """The step at which the client noted it crashed, if it did."""


class LiveView(Protocol):
    """The history as it grows: who holds the lock, who waits for it."""

    def holders(self) -> list[int]:
        """Clients that believe they hold the lock now, longest-holding first."""

    def held_since(self, process: int) -> float | None:
        """When the client's current hold began (seconds into the run), None if it holds
        nothing: two answers that differ are two holds, even of one client."""

    def holds(self) -> dict[int, float]:
        """Every client holding now and when its hold began, from one read (see
        :meth:`held_since`)."""

    def waiters(self) -> list[int]:
        """Clients blocked in an acquire now, longest-waiting first."""

    def now(self) -> float | None:
        """Seconds into the run now, on the clock of the holds' times (None: not known)."""

    def writes(self) -> dict[int, bool]:
        """Each holder that has begun a write in its current hold: True while a write is in
        flight, False between two writes."""

    def running(self, processes: list[int]) -> bool:
        """Has every one of ``processes`` invoked an op (or gone)?"""

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
    links: LinkOps | None = None  # the link layer, when the run has one
    op_timeout: float = defaults.OP_TIMEOUT  # how long a client waits for one request's reply
    # Set when the run is over and the schedule heals: long verifications may be cut short.
    finishing: threading.Event = field(default_factory=threading.Event)

    def node(self, name: str) -> Node:
        for n in self.nodes:
            if n.name == name:
                return n
        raise KeyError(f"no DB node {name!r} (nodes: {', '.join(n.name for n in self.nodes)})")
