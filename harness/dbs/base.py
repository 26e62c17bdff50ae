"""The DB role: how to configure, run and probe one node of a server."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import ClassVar, Protocol


@dataclass(frozen=True)
class Node:
    """One server process. ``name`` is also its name in the history and in partitions."""

    name: str
    host: str
    port: int
    role: str = "db"  # "db" (subject to faults) or "resource" (the protected resource)

    @property
    def endpoint(self) -> dict[str, object]:
        return {"name": self.name, "host": self.host, "port": self.port}


class DB(Protocol):
    name: ClassVar[str]
    summary: ClassVar[str]
    default_nodes: ClassVar[int]
    port: ClassVar[int]

    def check_environment(self) -> None:
        """Raise HarnessError with one line saying what is missing (binary, ...)."""

    def files(self, node: Node, cluster: list[Node], node_dir: Path) -> dict[str, str]:
        """Config files to write into ``node_dir`` before the first start."""

    def argv(self, node: Node, node_dir: Path) -> list[str]:
        """The command line that runs the server in the foreground, logging to stdout."""

    def ready(self, node: Node) -> bool:
        """Does the node answer now? (One short probe; the backend retries.)"""

    def clock_fault_support(self) -> str | None:
        """None if libfaketime reaches the server, else a one-line reason."""

    # Optional, for leader faults (partition-leader, pause-leader):
    #   leader(nodes) -> str | None        the name of the node that leads now, or None when
    #                                      none does (no quorum, election under way)
    # Optional, for clock faults:
    #   read_clock(node) -> float          the node's own clock, seconds since the epoch
    #   host_faketime_dir() -> Path        local backend: a directory to put first on PATH so
    #                                      that the server binary found works under libfaketime
    # Optional, for DBs made of more than one kind of process (Redis Sentinel):
    #   companions(nodes) -> [(DB, [Node])] helper processes the run starts once the nodes are
    #                                      ready; a companion may share a node's address (a
    #                                      second process on the same machine)
    #   client_options() -> dict           extra LockConfig.options for the clients (where the
    #                                      Sentinels are, say)
    # Optional, for crash-restart faults:
    #   persistence_modes: ClassVar[tuple[str, ...]]  what --persistence may say (default none)


def leader_of(db: object, nodes: list[Node]) -> str | None:
    """The current leader by the DB's own probe; None if it has none or cannot tell."""
    probe = getattr(db, "leader", None)
    return probe(nodes) if callable(probe) else None


def has_leader(db: object) -> bool:
    """Does this DB (class or instance) know how to find its leader?"""
    return callable(getattr(db, "leader", None))


def companions_of(db: object, nodes: list[Node]) -> list[tuple[DB, list[Node]]]:
    """The DB's helper processes and their nodes (none for most DBs)."""
    make = getattr(db, "companions", None)
    return list(make(nodes)) if callable(make) else []


def client_options_of(db: object) -> dict[str, object]:
    """Extra options the DB gives every client's lock (none for most DBs)."""
    get = getattr(db, "client_options", None)
    return dict(get()) if callable(get) else {}


def persistence_modes(db: object) -> tuple[str, ...]:
    return tuple(getattr(db, "persistence_modes", ("none",)))
