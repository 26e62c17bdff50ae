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

    # Optional, for clock faults:
    #   read_clock(node) -> float          the node's own clock, seconds since the epoch
    #   host_faketime_dir() -> Path        local backend: a directory to put first on PATH so
    #                                      that the server binary found works under libfaketime
