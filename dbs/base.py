"""What every DB is: the members a DB class must declare and the optional ones, with their
defaults (:class:`harness.core.roles.DB` is the same as a protocol). Every DB subclasses
:class:`DB`, so the controller reads any member as a plain attribute.

Capabilities (a leader, companions, clock reading, ...: :mod:`harness.core.capabilities`) are
not here: a DB has one by implementing its methods, and a default would give it to every DB.

This module, like every DB module, imports the standard library alone at load time (a client
library is imported where a probe uses it): ``python3 -m harness.controller.packages`` reads
the DBs' ``debian_packages`` with the system Python, before the venv exists.
"""

from __future__ import annotations

from collections.abc import Collection
from pathlib import Path
from typing import ClassVar

from harness.core.cluster import Node


class DB:
    """The optional members, with their defaults. A DB class adds the required ones (the
    registry refuses a class without them): ``check_environment()``, ``files(node, cluster,
    node_dir)``, ``argv(node, node_dir)``, ``ready(node)``."""

    # required: what specs and the CLI call it, one line for `harness list`, its client port
    name: ClassVar[str]
    summary: ClassVar[str]
    port: ClassVar[int]
    # optional
    default_nodes: ClassVar[int] = 1
    min_nodes: ClassVar[int] = 1
    persistence_modes: ClassVar[tuple[str, ...]] = ("none",)
    default_lock: ClassVar[str | None] = None  # the --lock a run on it takes when none is given
    # What a host needs to run a node: {command or path: the Debian package that brings it}.
    # The one declaration of its packages: the ssh backend installs what a host lacks,
    # setup.sh and the node image install them all (harness.controller.packages).
    debian_packages: ClassVar[dict[str, str]] = {}
    # The apt repository those come from when it is not Debian's (None: Debian's): they are
    # left out of setup.sh's and the node image's lists, `harness setup --db NAME` installs them.
    apt_source: ClassVar[str | None] = None
    refused_backends: ClassVar[dict[str, str]] = {}  # backend -> why it cannot run a node
    # Directories of this host a node's server runs from, where the node image lacks them
    # (a package from outside Debian's): the docker backend mounts them read-only, same path.
    host_dirs: ClassVar[tuple[str, ...]] = ()
    stop_signal: ClassVar[int | None] = None  # None: SIGTERM to stop; killed at teardown
    user: str | None = None  # the server runs as this user, not root (PostgreSQL)
    # how its clocks are moved ("libfaketime" or "vdso") and which clock ids a fault may name
    clock_mechanism: ClassVar[str] = "libfaketime"
    clocks: ClassVar[tuple[str, ...]] = ("wall",)
    # the flags of capabilities.Membership (a DB without its methods has no use for them)
    adds_running: ClassVar[bool] = False
    removes_leader: ClassVar[bool] = True

    def configure_for(self, needs: Collection[type]) -> None:
        """Told, before its config files are written, the capabilities the run's nemeses need
        (ZooKeeper turns dynamic reconfiguration on for ``Membership`` alone): a run that needs
        none of them keeps the configuration it always had."""

    def init_argv(self, node: Node, node_dir: Path) -> list[str] | None:
        """A command run once, before the node's first start (PostgreSQL's initdb); None."""
        return None

    def local_argv(self, node: Node, node_dir: Path, first: bool) -> list[str]:
        """The command line on this machine (``first``: the first start of one of its nodes
        in the run); the same as :meth:`argv` unless a DB uses a cache of this machine's."""
        return self.argv(node, node_dir)

    def started(self, node: Node) -> bool:
        """May the next node start? At once, unless a DB starts its nodes one by one."""
        return True

    def host_faketime_dir(self) -> Path | None:
        """A directory to put first on PATH for a server under libfaketime on this host (or
        raise HarnessError saying why there is none); None: PATH as it is."""
        return None

    def repair_before_restart(self, node: Node, data_dir: Path, aside: Path) -> list[str]:
        """After a crash (a kill, or a power loss that dropped its unsynced data) and before the
        restart: undo what this DB's own fixed release would undo at its start, and nothing
        more, so that a node it would bring back comes back (ZooKeeper:
        :mod:`dbs.zookeeper_tail_log`). ``data_dir`` is the node directory as the harness
        reaches it; a file taken out of it goes into ``aside`` (the run's), as evidence. What
        was done, in words for the fault's detail; [] (the default): nothing."""
        return []
