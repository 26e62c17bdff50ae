"""The local backend (the embedded default): each node a real server process on this machine.

DB node ``i`` listens on 127.0.0.(i+2), client ``p`` connects from 127.0.1.(p+1) and the
protected resource is 127.0.2.1, so iptables can cut any link between two of them. Each node has
its data directory under ``<run>/nodes/<name>`` and its log at ``<run>/logs/<name>.log``.

Runs side by side (parallel CI jobs, a test suite next to a manual run) each claim a *slot*: slot
0 is the addresses above, slot ``s`` moves them to 127.s.x.y. A slot is held with a file lock for
as long as the controller lives and is only taken if all its addresses are free, so a run killed
with -9 whose servers still listen keeps its slot busy until ``harness clean``.

A DB that runs as a user of its own (``user``: PostgreSQL refuses root) gets its node
directory in scratch space that user can reach (:func:`harness.controller.places.scratch_dir`,
removed at teardown; its log stays in the run), owned by that user, and its ``init_argv`` is
run once, as that user, before the first start.

Clients whose library opens sockets in C (libpq) cannot bind their own address: in runs with
partitions each client runs with a group id of its own whose connections iptables rewrites to
the client's address (the servers' trick, :mod:`harness.controller.netfilter`).
When the run has a link layer, the proxy shows DB node ``i`` on 127.s.4.(i+2) (its "door"): the
clients' listeners and the doors its peers dial are there, so a cut between an endpoint and a
node also cuts what goes through the node's door (:meth:`LocalBackend.addresses`), and bytes the
proxy holds for a cut link wait, as on a real network, until the heal.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import pwd
import shutil
import signal
import socket
import subprocess
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

from dbs.faketime import faketime_env, libfaketime
from harness.controller import netfilter, syncfs_mounts, vdso_clock
from harness.controller.backends.process_nodes import (
    ProcessNodes,
    last_lines,
    stop_signal,
)
from harness.controller.places import active_dir, scratch_dir
from harness.controller.procs import ProcessTable
from harness.controller.store import RunDir
from harness.core.capabilities import (
    ClientLinks,
    Iptables,
    LinkLayer,
    PacketRules,
    PeerLinks,
    PowerLoss,
)
from harness.core.cluster import Node
from harness.core.errors import HarnessError

SLOTS = 64


class LocalBackend(ProcessNodes):
    name = "local"

    def __init__(self, run: RunDir, procs: ProcessTable, run_id: str) -> None:
        self.run = run
        self.procs = procs
        self.net = netfilter.Netfilter(run_id)
        self.dbs: dict[str, Any] = {}
        self.hosts: dict[str, str] = {}
        self._cut = False
        self._lossy = False
        self._doors = False
        self._used_iptables = False
        self._partitions = False
        self._source_nat: dict[str, int] = {}  # node address -> the group id its server runs as
        self.slot = 0
        self._slot_fd: int | None = None
        self.env: dict[str, dict[str, str]] = {}
        self.clock_modes: dict[str, str] = {}  # node -> the clock(s) libfaketime fakes there
        self._started: set[str] = set()  # nodes started at least once in this run
        self.scratch = scratch_dir(run_id)
        self.syncfs: syncfs_mounts.SyncMounts | None = None
        self._syncfs_nodes: list[str] = []

    # addresses -------------------------------------------------------------------------------
    def node_host(self, index: int) -> str:
        return f"127.{self.slot}.0.{index + 2}"

    def client_host(self, process: int) -> str:
        return f"127.{self.slot}.1.{process + 1}"

    def resource_host(self) -> str:
        return f"127.{self.slot}.2.1"

    def prepare(self, port: int, nodes: int, clients: int, resource_port: int | None = None
                ) -> None:
        self.claim_slot(port, nodes, resource_port)

    def claim_slot(self, port: int, nodes: int, resource_port: int | None = None) -> int:
        """Take the first slot that no live run holds and whose addresses are all free."""
        for slot in range(SLOTS):
            fd = os.open(active_dir() / f"slot-{slot}.lock", os.O_CREAT | os.O_RDWR, 0o644)
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except OSError:
                os.close(fd)
                continue
            self.slot = slot
            hosts = [(self.node_host(i), port) for i in range(nodes)]
            hosts.append((self.resource_host(), resource_port or port))
            if all(is_free(h, p) for h, p in hosts):
                self._slot_fd = fd
                os.ftruncate(fd, 0)
                os.write(fd, f"{os.getpid()} {self.run.path}\n".encode())
                return slot
            os.close(fd)
        self.slot = 0
        raise HarnessError(f"all {SLOTS} address slots are busy (127.s.0.x:{port}); "
                           "`harness clean` removes what dead runs left")

    def client_networks(self) -> list[str]:
        return ["127.0.0.0/8"]

    def door_host(self, host: str) -> str | None:
        """Where the link layer shows the DB endpoint at ``host``: 127.s.4.x."""
        octets = host.split(".")
        return ".".join([octets[0], octets[1], "4", octets[3]])

    def enable_doors(self) -> None:
        self._doors = True

    def addresses(self, name: str) -> list[str]:
        """The addresses an endpoint is reached at: its own, and its door when the run has a
        link layer (DB nodes only)."""
        host = self.hosts[name]
        if self._doors and name in self.dbs:
            return [host, self.door_host(host) or host]
        return [host]

    def _pairs(self, a: str, b: str) -> list[tuple[str, str]]:
        """Address pairs that carry traffic between endpoints ``a`` and ``b`` (never door to
        door: the proxy's legs leave from the endpoints' own addresses)."""
        ha, hb = self.addresses(a), self.addresses(b)
        return [(x, y) for x in ha for y in hb if x == ha[0] or y == hb[0]]

    def register_endpoint(self, name: str, host: str) -> None:
        self.hosts[name] = host

    def client_group(self, process: int) -> int | None:
        if not self._partitions:
            return None
        return self._snat_group(self.client_host(process))

    def _snat_group(self, address: str) -> int:
        if address not in self._source_nat:
            self._source_nat[address] = self.net.source_nat(address)
            self._used_iptables = True
        return self._source_nat[address]

    def environment_unmet(self, capability: type) -> str | None:
        if capability is ClientLinks:
            return None  # every client has its own loopback address
        if capability is Iptables:
            try:
                netfilter.check_available()
            except HarnessError as e:
                return str(e)
            return None
        if capability in (LinkLayer, PacketRules):
            return None
        if capability is PowerLoss:
            return syncfs_mounts.unavailable()
        if capability is PeerLinks:  # the doors tell peers apart by their source addresses
            try:
                netfilter.check_available()
            except HarnessError as e:
                return f"links between nodes go through the link layer only with {e}"
            return None
        return f"the local backend has no {getattr(capability, '__name__', capability)}"

    # nodes -----------------------------------------------------------------------------------
    def node_dir(self, node: Node) -> Path:
        db = self.dbs.get(node.name)
        if db is not None and db.user:
            return self.scratch / node.name
        return self.run.node_dir(node.name)

    def preflight(self, db: Any, nodes: list[Node], partitions: bool) -> None:
        db.check_environment()
        for node in nodes:
            port_free(node)
        if partitions:
            netfilter.check_available()
            self._partitions = True

    def provision(self, db: Any, nodes: list[Node]) -> None:
        user = db.user
        for node in nodes:
            self.dbs[node.name] = db
            self.hosts[node.name] = node.host
            d = self.node_dir(node)
            d.mkdir(parents=True, exist_ok=True)
            for fname, content in db.files(node, nodes, d).items():
                (d / fname).write_text(content)
            if user:
                entry = pwd.getpwnam(user)
                for path in (d, *d.rglob("*")):
                    os.chown(path, entry.pw_uid, entry.pw_gid)
            argv = db.init_argv(node, d)
            if argv:
                self._init(node, argv, user)

    def _init(self, node: Node, argv: list[str], user: str | None) -> None:
        """The DB's one-time init (initdb), as its user; its output goes to the node's log."""
        log = self.log_file(node)
        log.parent.mkdir(parents=True, exist_ok=True)
        entry = pwd.getpwnam(user) if user else None
        with log.open("ab") as fh:
            try:
                proc = subprocess.run(argv, stdout=fh, stderr=subprocess.STDOUT,
                                      stdin=subprocess.DEVNULL, timeout=120,
                                      user=entry.pw_uid if entry else None,
                                      group=entry.pw_gid if entry else None,
                                      extra_groups=[] if entry else None)
            except (OSError, subprocess.TimeoutExpired) as e:
                raise HarnessError(f"{node.name}: {argv[0]} failed: {e}") from None
        if proc.returncode != 0:
            raise HarnessError(f"{node.name}: {os.path.basename(argv[0])} exited "
                               f"{proc.returncode}: {last_lines(log)}")

    def enable_clock(self, node: Node, clock: str = "wall") -> None:
        """Start this node's server under libfaketime (the wall clock, or ``"both"``); its
        offset is read from a file."""
        db = self.dbs[node.name]
        lib = libfaketime()
        if lib is None:
            raise HarnessError("libfaketime not found (Debian package libfaketime): run "
                               "`bash setup.sh`")
        path = os.environ.get("PATH", "/usr/bin:/bin")
        host_dir = db.host_faketime_dir()
        if host_dir is not None:
            path = f"{host_dir}:{path}"
        clock_file = self.clock_file(node)
        clock_file.write_text("+0s\n")
        self.env[node.name] = {**os.environ, "PATH": path,
                               **faketime_env(lib, str(clock_file), clock)}
        self.clock_modes[node.name] = clock

    def clock_file(self, node: Node) -> Path:
        return self.node_dir(node) / "faketime"

    def start(self, node: Node) -> None:
        db = self.dbs[node.name]
        group = None
        if self._partitions:  # servers dial from 127.0.0.1: give them their address (netfilter)
            group = self._snat_group(node.host)
        # A db may start differently on this machine (``local_argv``: a cache of this
        # machine's, say); ``first`` is the first start of any of its nodes in this run.
        first = not any(type(self.dbs[n]) is type(db) for n in self._started)
        argv = db.local_argv(node, self.node_dir(node), first)
        self._started.add(node.name)
        if self.syncfs is not None and node.name in self._syncfs_nodes:
            self.syncfs.mount(node.name, self.node_dir(node))
        self.procs.spawn(node.name, argv, self.log_file(node), env=self.env.get(node.name),
                         group=group, user=db.user)
        vdso_clock.reapply(self.procs, db, node.name)  # restarted while patched: again

    def mount_host_dirs(self, db: Any) -> None:
        return None  # the nodes run on this host: check_environment finds what they lack

    def enable_power_loss(self, names: list[str]) -> None:
        self.syncfs = syncfs_mounts.SyncMounts(self.run, self.procs)
        self._syncfs_nodes = list(names)

    def _syncfs(self, node: Node) -> syncfs_mounts.SyncMounts:
        if self.syncfs is None:
            raise HarnessError(f"{node.name}: its data directory is not on the power-loss "
                               "filesystem")
        return self.syncfs

    def drop_unsynced(self, node: Node) -> dict[str, Any]:
        return self._syncfs(node).drop(node.name)

    def reachable_dir(self, node: Node) -> Path:
        return self.node_dir(node)

    def write_back(self, node: Node) -> dict[str, Any]:
        return self._syncfs(node).write_back(node.name)

    # network ---------------------------------------------------------------------------------
    def _apply(self, links: Iterable[tuple[str, str]],
               rules_of: Callable[[str, str], list[list[str]]]) -> bool:
        """Add ``rules_of(x, y)`` for every address pair of the links: were there any?"""
        rules = [r for a, b in links for ha, hb in self._pairs(a, b) for r in rules_of(ha, hb)]
        self._used_iptables = True
        self.net.apply(rules)
        return bool(rules)

    def cut(self, links: Iterable[tuple[str, str]]) -> None:
        drop = self.net.drop_rules
        self._cut = self._apply(links, lambda x, y: drop(x, y) + drop(y, x)) or self._cut

    def cut_oneway(self, links: Iterable[tuple[str, str]]) -> None:
        self._cut = self._apply(links, self.net.oneway_rules) or self._cut

    def heal(self) -> None:
        if self._cut:
            self.net.heal()
            self._cut = False

    def lose(self, links: Iterable[tuple[str, str]], probability: float, *,
             both_ways: bool = True) -> None:
        lose = self.net.oneway_rules
        self._lossy = self._apply(links, lambda x, y: lose(x, y, probability) + (
            lose(y, x, probability) if both_ways else [])) or self._lossy

    def heal_loss(self) -> None:
        if self._lossy:
            self.net.heal_loss()
            self._lossy = False

    def lost_packets(self) -> int:
        return self.net.dropped() if self._used_iptables else 0

    def teardown(self) -> None:
        for name in list(self.dbs):
            self.procs.send(name, signal.SIGCONT, group=True)
        # The run is over and its data read back: a server that needs no clean stop (it
        # declares no stop_signal) is killed at once, and all are waited for together.
        graceful = [n for n in self.dbs if self.dbs[n].stop_signal]
        for name in self.dbs:
            self.procs.send(name, stop_signal(self.dbs[name]) if name in graceful
                            else signal.SIGKILL, group=True)
        for name in self.dbs:
            if not self.procs.wait_gone(name, 3.0 if name in graceful else 5.0):
                self.procs.send(name, signal.SIGKILL, group=True)
                self.procs.wait_gone(name, 5.0)
        if self.syncfs is not None:
            self.syncfs.unmount_all()
        if self.scratch.is_dir():
            shutil.rmtree(self.scratch, ignore_errors=True)
        if self._used_iptables:
            with contextlib.suppress(HarnessError):
                self.net.teardown()
        if self._slot_fd is not None:
            os.close(self._slot_fd)
            self._slot_fd = None


def is_free(host: str, port: int) -> bool:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # as servers do: TIME_WAIT is ok
        try:
            s.bind((host, port))
        except OSError:
            return False
    return True


def port_free(node: Node) -> None:
    if not is_free(node.host, node.port):
        raise HarnessError(
            f"{node.name}: cannot listen on {node.host}:{node.port} (address in use); "
            "another run may be active: `harness clean`"
        )
