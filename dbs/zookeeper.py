"""ZooKeeper: an ensemble of QuorumPeerMain JVMs from Debian's ``zookeeper`` package.

Only config files, a command line and probes: the backend decides where the JVM runs. Every node
uses the standard ports (client 2181, quorum 2888, election 3888) on its own address.

Timings are short so that faults bite inside a 30 s test: ``tickTime`` 200 ms, so a session can
be as short as 400 ms (2 ticks); the lock's ``--ttl`` becomes the session timeout the client asks
for (2 s by default). A follower that misses ``syncLimit`` (5 ticks = 1 s) of its leader drops
out, and a leader that loses its quorum for as long steps down. The four-letter words ``srvr``,
``ruok`` and ``mntr`` are enabled: readiness (the node serves: it is in a quorum with a leader)
and leader detection use them, never a client session.

With the link layer's doors (``route_peers``: ``lag-replication``, a delay on the links between
nodes, or ``--links proxy`` on the local backend) each server's ``zoo.cfg`` names the *other*
servers by their doors (its own line keeps its own address, which it binds): followers reach
the leader's quorum port and each other's election ports through the proxy, which names them by
their source address, so the links between the servers can be delayed and stalled.

Membership (``capabilities.Membership``, the ``membership`` nemesis): dynamic reconfiguration
(``reconfigEnabled``, ``standaloneEnabled=false`` and ``skipACL``, which ``reconfig`` needs
without a super user) in the runs whose nemeses need it alone (:meth:`ZooKeeperDB.configure_for`;
off with doors: each server would name the others differently), the
ensemble's configuration read back from ``/zookeeper/config`` and changed with ``reconfig``
(kazoo) on another server; a member is its server id (``n2`` the node's own, ``n2-r1`` a new
one that replaces it). A server joins with the configuration ``reconfig`` answered in its
``zoo.cfg``, its ``myid`` and an empty ``version-2`` (:meth:`ZooKeeperDB.join_empty`).
"""

from __future__ import annotations

import os
import re
import shutil
from collections.abc import Collection, Mapping, Sequence
from pathlib import Path
from typing import ClassVar

from dbs.base import DB
from dbs.faketime import jvm_clock_support
from dbs.fourletter import four_letter, pick_leader, server_state
from dbs.jvm_archive import JvmArchive
from dbs.zookeeper_tail_log import repair
from harness.core.capabilities import Membership
from harness.core.cluster import Node
from harness.core.errors import HarnessError

SESSION_CLOCKS = re.compile(r"sid=0x([0-9a-f]+),.*?\best=(\d+),.*?\blresp=(\d+)")
CONS_LINE = re.compile(r"^\s*/([0-9.]+):\d+\[\d+\]\((.*)\)\s*$", re.M)
TICK_MS = 200
INIT_LIMIT = 25  # ticks a follower has to connect and sync at start (5 s)
SYNC_LIMIT = 5  # ticks a follower may lag its leader (1 s)
MIN_SESSION_MS = 2 * TICK_MS
MAX_SESSION_MS = 60_000  # so a long --ttl is honoured rather than silently capped
PEER_PORT = 2888
ELECTION_PORT = 3888

ZOOKEEPER_JAR = "/usr/share/java/zookeeper.jar"  # its manifest names the dependencies
SLF4J_SIMPLE_JAR = "/usr/share/java/slf4j-simple.jar"  # logs to stderr: the node's log
MAIN_CLASS = "org.apache.zookeeper.server.quorum.QuorumPeerMain"
JVM_FLAGS = (
    "-Xms32m", "-Xmx256m",
    "-XX:+UseSerialGC",  # two cores shared with other runs: no parallel GC threads
    "-XX:TieredStopAtLevel=1",  # C1 only: a faster start, and speed is not what we test
    "-XX:-UsePerfData",  # no /tmp/hsperfdata files
    "-Djava.net.preferIPv4Stack=true",
    "-Dzookeeper.admin.enableServer=false",
    "-Dorg.slf4j.simpleLogger.showDateTime=true",
    "-Dorg.slf4j.simpleLogger.dateTimeFormat=HH:mm:ss.SSS",
    "-Dorg.slf4j.simpleLogger.log.org.apache.zookeeper.server.NIOServerCnxn=warn",
)
RECONFIG_FLAGS = ("-Dzookeeper.skipACL=yes",)  # reconfig asks for the super user otherwise


class ZooKeeperDB(DB):
    name: ClassVar[str] = "zookeeper"
    summary: ClassVar[str] = (f"a ZooKeeper ensemble (Debian's zookeeper, tickTime {TICK_MS} ms; "
                              "session timeout = --ttl)")
    default_nodes: ClassVar[int] = 3
    port: ClassVar[int] = 2181
    default_lock: ClassVar[str] = "zookeeper"
    debian_packages: ClassVar[dict[str, str]] = {"java": "default-jre-headless",
                                                 ZOOKEEPER_JAR: "zookeeper",
                                                 SLF4J_SIMPLE_JAR: "libslf4j-java"}
    # the JVM under libfaketime: its wall clock (currentTimeMillis) alone, or its monotonic
    # clock too (nanoTime: the clock its session tracker expires sessions by); the monotonic
    # clock alone is both moved by libfaketime and the wall clock set back by the vDSO patch
    clock_mechanism: ClassVar[str] = "libfaketime"
    clocks: ClassVar[tuple[str, ...]] = ("wall", "monotonic", "both")

    persistence_words: ClassVar[dict[str, str]] = {
        "none": "forceSync=no: the transaction log is written, not fsynced (a kill loses none "
                "of it, a power loss what the kernel had not written)",
        "forcesync": "forceSync=yes: each transaction fsynced before it is acknowledged"}
    persistence_modes: ClassVar[tuple[str, ...]] = tuple(persistence_words)

    def __init__(self, java: str | None = None, persistence: str = "none") -> None:
        self.java = java or shutil.which("java") or "java"
        self.persistence = persistence
        self.doors: dict[tuple[str, int], tuple[str, int]] = {}
        self.ids: dict[int, tuple[str, str]] = {}  # server id -> (node, member)
        self.reconfig = False  # dynamic reconfiguration: a run whose nemeses need Membership

    def configure_for(self, needs: Collection[type]) -> None:
        self.reconfig = Membership in needs

    def jvm_flags(self) -> tuple[str, ...]:
        return JVM_FLAGS + RECONFIG_FLAGS if self.reconfig else JVM_FLAGS

    def check_environment(self) -> None:
        if shutil.which(self.java) is None:
            raise HarnessError(f"java not found ({self.java}): ZooKeeper needs a JVM; run the "
                               "set-up command `bash setup.sh`")
        if not os.path.exists(ZOOKEEPER_JAR):
            raise HarnessError(f"{ZOOKEEPER_JAR} not found (Debian package zookeeper): run the "
                               "set-up command `bash setup.sh`")

    def files(self, node: Node, cluster: list[Node], node_dir: Path) -> dict[str, str]:
        self.ids = {myid(n, cluster): (n.name, n.name) for n in cluster}
        return {"zoo.cfg": zoo_cfg(node, cluster, node_dir, self.doors,
                                   force_sync=self.persistence == "forcesync",
                                   reconfig=self.reconfig),
                "myid": f"{myid(node, cluster)}\n"}

    # capabilities: RoutedPeers, Replication ----------------------------------------------------
    def peer_ports(self) -> list[int]:
        return [PEER_PORT, ELECTION_PORT]

    def route_peers(self, doors: Mapping[tuple[str, int], tuple[str, int]]) -> None:
        self.doors = dict(doors)

    def replication_links(self, nodes: Sequence[Node]) -> list[tuple[str, str]]:
        """Followers replicate from the leader over the connection they make to it: any node
        may lead (after an election), so every (follower, leader) pair."""
        return [(a.name, b.name) for a in nodes for b in nodes if a.name != b.name]

    # capability: Membership ------------------------------------------------------------------
    def members(self, nodes: Sequence[Node]) -> dict[str, str | None]:
        """Node -> its member, from the ensemble's configuration (``/zookeeper/config``)."""
        return {self.ids[i][0]: self.ids[i][1] for i in server_lines(self._ask(nodes, None))
                if i in self.ids}

    def remove_member(self, nodes: Sequence[Node], name: str) -> None:
        found = [i for i in server_lines(self._ask(nodes, None))
                 if self.ids.get(i, ("",))[0] == name]
        if not found:
            raise HarnessError(f"{name} is not a member of the ZooKeeper ensemble")
        self._ask([n for n in nodes if n.name != name], ("", str(found[0])))

    def add_member(self, nodes: Sequence[Node], name: str, member: str) -> None:
        """``reconfig -add``: the node's own server id for its own member, a new one for a
        replacement (kept across tries, so a try again asks for the same server)."""
        node = next(n for n in nodes if n.name == name)
        sid = next((i for i, v in self.ids.items() if v == (name, member)), max(self.ids) + 1)
        self.ids[sid] = (name, member)
        self._ask([n for n in nodes if n.name != name],
                  (f"server.{sid}={node.host}:{PEER_PORT}:{ELECTION_PORT}:participant;"
                   f"{node.host}:{node.port}", ""))

    def joining(self, nodes: Sequence[Node], name: str, member: str) -> dict[str, str]:
        """The ensemble's configuration (``server.N``: its line) an added server joins."""
        return {f"server.{i}": v for i, v in server_lines(self._ask(nodes, None)).items()}

    def join_empty(self, node: Node, node_dir: Path, member: str,
                   cluster: Mapping[str, str]) -> list[str]:
        """``zoo.cfg`` with ``cluster``'s server lines (the dynamic file ZooKeeper split them
        into is no longer named), ``myid`` the member's server id, ``version-2`` empty: in the
        node's directory for its own member (what it held removed), in ``data-MEMBER`` for a
        replacement (the old one left as it was)."""
        sid = next(k.removeprefix("server.") for k, v in cluster.items()
                   if v.startswith(f"{node.host}:"))
        data = node_dir / f"data-{member}" if member != node.name else node_dir
        shutil.rmtree(data / "version-2", ignore_errors=True)
        data.mkdir(exist_ok=True)
        (data / "myid").write_text(f"{sid}\n")
        path = node_dir / "zoo.cfg"
        kept = [x for x in path.read_text().splitlines()
                if not x.startswith(("server.", "dynamicConfigFile=", "dataDir="))]
        inner = Path(next(x for x in path.read_text().splitlines()
                          if x.startswith("dataDir=")).split("=", 1)[1])
        inner = inner / data.name if data != node_dir else inner
        path.write_text("\n".join([*kept, f"dataDir={inner}",
                                   *(f"{k}={v}" for k, v in cluster.items())]) + "\n")
        return [f"{member} (server.{sid}) joins {', '.join(sorted(cluster))} on an empty "
                f"{'data' if data == node_dir else data.name}"]

    @staticmethod
    def _ask(nodes: Sequence[Node], change: tuple[str, str] | None) -> str:
        """The ensemble's configuration, after ``change`` (joining, leaving) if any, from the
        first of ``nodes`` that answers; a refusal raises. (kazoo: see :meth:`read_clocks`.)"""
        from kazoo.client import KazooClient
        from kazoo.exceptions import KazooException
        from kazoo.handlers.threading import KazooTimeoutError

        client = KazooClient(hosts=",".join(f"{n.host}:{n.port}" for n in nodes), timeout=4.0)
        try:
            client.start(timeout=5.0)
            if change is None:
                client.sync("/zookeeper/config")
                data = client.get("/zookeeper/config")[0]
            else:
                data = client.reconfig(change[0] or None, change[1] or None, None)[0]
        except (KazooException, KazooTimeoutError) as e:
            verb = "reconfig" if change else "the configuration read"
            raise HarnessError(f"ZooKeeper refused {verb} {change or ''}: {e!r}") from None
        finally:
            client.stop()
            client.close()
        return data.decode(errors="replace")

    def argv(self, node: Node, node_dir: Path) -> list[str]:
        classpath = f"{ZOOKEEPER_JAR}:{SLF4J_SIMPLE_JAR}"
        return [self.java, *self.jvm_flags(), "-cp", classpath, MAIN_CLASS,
                str(node_dir / "zoo.cfg")]

    def local_argv(self, node: Node, node_dir: Path, first: bool) -> list[str]:
        """On this machine: the same, with the class-data-sharing archive of this machine's
        cache (:mod:`dbs.jvm_archive`), which shortens the ensemble's start
        by about a fifth."""
        argv = self.argv(node, node_dir)
        archive = JvmArchive("zookeeper", self.java, [ZOOKEEPER_JAR, SLF4J_SIMPLE_JAR],
                             self.jvm_flags())
        return [argv[0], *archive.flags_for(first), *argv[1:]]

    def repair_before_restart(self, node: Node, data_dir: Path, aside: Path) -> list[str]:
        """An empty tail transaction log (created, then the server killed before its header
        was written, or the power lost before it was synced) moved aside, as ZooKeeper 3.9.3
        deletes it at its start (ZOOKEEPER-2332): 3.8.0 would not start on it."""
        return repair(data_dir, aside)

    def ready(self, node: Node) -> bool:
        """Serving: a member of a quorum that has a leader (or standalone)."""
        return server_state(node.host, node.port).serving

    def leader(self, nodes: list[Node]) -> str | None:
        return pick_leader({n.name: server_state(n.host, n.port) for n in nodes})

    def connected_from(self, node: Node) -> list[str] | None:
        """The source addresses of the sessions connected now (``cons``; this probe's own
        connection is not a session and is left out)."""
        reply = four_letter(node.host, node.port, "cons", timeout=1.0)
        if not reply:
            return None
        return [m.group(1) for m in CONS_LINE.finditer(reply) if "sid=" in m.group(0)]

    def clock_fault_support(self) -> str | None:
        return jvm_clock_support(self.java)

    def read_clock(self, node: Node) -> float:
        """The node's wall clock, in seconds since the epoch (see :meth:`read_clocks`)."""
        return self.read_clocks(node)[0]

    def read_monotonic(self, node: Node) -> float:
        """The node's monotonic clock, in seconds (the base of its machine's)."""
        return self.read_clocks(node)[1]

    def read_clocks(self, node: Node) -> tuple[float, float]:
        """(wall, monotonic) as the server reports them in ``cons`` for a session of ours:
        ``est``, the JVM's ``currentTimeMillis`` when it accepted our connection, and
        ``lresp`` after one request, its ``Time.currentElapsedTime()`` (``nanoTime`` in ms),
        the clock its session tracker expires sessions by. Both in milliseconds. (kazoo is
        imported here: the DB classes load with the standard library alone, :mod:`dbs.base`.)"""
        from kazoo.client import KazooClient
        from kazoo.exceptions import KazooException
        from kazoo.handlers.threading import KazooTimeoutError

        client = KazooClient(hosts=f"{node.host}:{node.port}", timeout=2.0)
        try:
            client.start(timeout=3.0)
            sid = client.client_id[0] if client.client_id else None
            client.exists("/")
            reply = four_letter(node.host, node.port, "cons", timeout=1.0)
        except (KazooException, KazooTimeoutError) as e:
            raise HarnessError(f"{node.name}: no session to read its clock: {e!r}") from None
        finally:
            client.stop()
            client.close()
        for m in SESSION_CLOCKS.finditer(reply):
            if sid is not None and int(m.group(1), 16) == sid:
                return int(m.group(2)) / 1000, int(m.group(3)) / 1000
        raise HarnessError(f"{node.name}: cons does not list our session's clocks")


def myid(node: Node, cluster: list[Node]) -> int:
    return [n.name for n in cluster].index(node.name) + 1


def server_lines(config: str) -> dict[int, str]:
    """Server id -> its address line, from a configuration (``server.2=...``)."""
    out = {}
    for line in config.splitlines():
        key, _, value = line.partition("=")
        if key.startswith("server.") and key[7:].isdigit():
            out[int(key[7:])] = value
    return out


def zoo_cfg(node: Node, cluster: list[Node], node_dir: Path,
            doors: Mapping[tuple[str, int], tuple[str, int]] | None = None,
            force_sync: bool = False, reconfig: bool = False) -> str:
    lines = [
        f"tickTime={TICK_MS}",
        f"initLimit={INIT_LIMIT}",
        f"syncLimit={SYNC_LIMIT}",
        f"minSessionTimeout={MIN_SESSION_MS}",
        f"maxSessionTimeout={MAX_SESSION_MS}",
        f"dataDir={node_dir}",
        f"clientPortAddress={node.host}",
        f"clientPort={node.port}",
        "4lw.commands.whitelist=srvr,ruok,mntr,cons",
        "admin.enableServer=false",
        # A process crash leaves the page cache: fsync per transaction buys nothing under it
        # but jitter on a shared disk; a power loss is another matter (--persistence).
        f"forceSync={'yes' if force_sync else 'no'}",
        "preAllocSize=4096",  # KB per transaction log file (the default is 64 MB)
        "maxClientCnxns=0",
    ]
    if len(cluster) > 1:
        lines.append("quorumListenOnAllIPs=false")
        if reconfig and not doors:  # dynamic reconfiguration (Membership); see the module
            lines += ["reconfigEnabled=true", "standaloneEnabled=false"]
        for i, n in enumerate(cluster):
            host, quorum, election = n.host, PEER_PORT, ELECTION_PORT
            if doors and n.name != node.name:  # the others by their doors; itself as it binds
                host, quorum = doors.get((n.name, PEER_PORT), (host, quorum))
                election = doors.get((n.name, ELECTION_PORT), (host, election))[1]
            lines.append(f"server.{i + 1}={host}:{quorum}:{election}")
    return "\n".join(lines) + "\n"
