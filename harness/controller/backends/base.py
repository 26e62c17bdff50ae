"""The Backend role: where nodes live. Node operations are the same whatever the nodes run in,
and only the controller knows which backend it drives."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any, Protocol

from harness.core.cluster import Node


class Backend(Protocol):
    name: str

    def prepare(self, port: int, nodes: int, clients: int, resource_port: int | None = None
                ) -> None:
        """Claim addresses (and create containers, networks) for this many nodes and clients;
        the resource's server listens on ``resource_port`` (default: ``port``)."""

    def register_endpoint(self, name: str, host: str) -> None:
        """Name a client's address, so that ``cut`` can name it."""

    def node_host(self, index: int) -> str:
        """The address of DB node ``index`` (0-based)."""

    def client_host(self, process: int) -> str:
        """The source address client ``process`` connects from."""

    def resource_host(self) -> str: ...

    def client_networks(self) -> list[str]:
        """Where clients must connect from their own address (CIDR blocks)."""

    def client_group(self, process: int) -> int | None:
        """The group id client ``process`` must run with so that even connections it does
        not bind itself (libpq's, in C) leave from its address; None: not needed (no
        partitions in this run)."""

    def environment_unmet(self, capability: type) -> str | None:
        """None if this backend gives the environment capability (iptables), else why not."""

    def preflight(self, db: Any, nodes: list[Node], partitions: bool) -> None:
        """Raise HarnessError, one line, if these nodes cannot run here."""

    def mount_host_dirs(self, db: Any) -> None:
        """Before :meth:`prepare`: give the nodes this host's ``db.host_dirs`` (or raise
        HarnessError, one line, saying which is missing)."""

    def provision(self, db: Any, nodes: list[Node]) -> None:
        """Write each node's files; then, once, the DB's ``init_argv`` (as its ``user``)."""

    def start(self, node: Node) -> None: ...

    def stop(self, node: Node) -> None: ...

    def kill(self, node: Node) -> None: ...

    def pause(self, node: Node) -> None: ...

    def resume(self, node: Node) -> None: ...

    def is_running(self, node: Node) -> bool: ...

    def answers(self, node: Node) -> bool: ...

    def wait_ready(self, node: Node, timeout: float) -> None: ...

    def enable_clock(self, node: Node, clock: str = "wall") -> None:
        """Before its first start: run this node's server under libfaketime, faking the wall
        clock alone (``"wall"``) or the monotonic clock too (``"both"``)."""

    def set_clock(self, node: Node, offset: float, clock: str = "wall") -> None:
        """Move the node's clock ``clock`` to ``offset`` seconds from the true time (0 heals)."""

    def cut(self, links: Iterable[tuple[str, str]]) -> None:
        """Drop traffic both ways between each pair of endpoints (node or client names)."""

    def cut_oneway(self, links: Iterable[tuple[str, str]]) -> None:
        """Drop what the first endpoint of each pair sends the second, nothing else."""

    def heal(self) -> None:
        """Remove every cut this run made."""

    def lose(self, links: Iterable[tuple[str, str]], probability: float, *,
             both_ways: bool = True) -> None:
        """Drop packets between each pair with ``probability`` (iptables statistic)."""

    def heal_loss(self) -> None: ...

    def lost_packets(self) -> int: ...

    def door_host(self, host: str) -> str | None:
        """Where the link layer shows the DB endpoint at ``host`` (its listeners for it and
        the doors its peers dial); None: on the proxy's loopback, and no doors."""

    def enable_doors(self) -> None:
        """The run's nodes have doors: cuts cover them too."""

    def enable_power_loss(self, names: list[str]) -> None:
        """Mount the filesystem that forgets unsynced data over these nodes' data directories
        at their first start (backends with the PowerLoss capability); said before
        :meth:`prepare`, so that the nodes' machines can be made ready for it."""

    def teardown(self) -> None:
        """Stop every node and remove everything this backend created."""
