"""``redis-sentinel``: a primary (n1), replicas (n2, n3, ...) and three Sentinels.

The deployment the Redis docs describe: three machines, each running a ``redis-server`` and a
Sentinel. So the Sentinels are *companions* of n1..n3 (``s1`` on n1's address, port 26379,
...): a partition that cuts a machine off cuts both of its processes, as it would in real life,
while killing or pausing ``n1`` hits only its Redis. Clients find the primary through the
Sentinels, as redis-py's ``Sentinel.master_for`` does (``client_options`` tells them where).

Replication is Redis's own, asynchronous, with default replica settings: that is what loses a
lock on failover. Sentinel timings are short so that a failover fits in a 30 s run:
``down-after-milliseconds`` 1000 and ``failover-timeout`` 3000 (a partitioned primary is
replaced in about 3 s; an old primary that comes back is turned into a replica within the
Sentinels' 10 s INFO period).

Every process binds its outgoing connections to its own address (``bind-source-addr``) and
announces it, so that iptables rules between node addresses really cut replication and
Sentinel gossip on the local backend, where all addresses are on one loopback interface.

With the link layer's doors (``route_peers``: the ``lag-replication`` fault, or ``--links
proxy`` on the local backend) every Redis is known to the others by its door: replicas follow
the primary's door, announce their own (so Sentinel, which tells replicas where their new
primary is after a failover, hands out doors too) and the Sentinels monitor the primary's door.
Replication and the Sentinels' links to each Redis then run through the proxy, which knows
who dials by their source address; the Sentinels talk to each other directly.

Membership (``capabilities.Membership``, the ``membership`` nemesis on a replica, target
``follower``): ``REPLICAOF NO ONE`` detaches it and ``SENTINEL RESET`` has every Sentinel
forget it; back, the node starts on an empty directory (its own, or ``data-MEMBER`` for a
replacement) and ``REPLICAOF`` the primary makes it a replica again (``adds_running``: added
once it runs), the Sentinels reset again. A member is its node with the name of its data
directory (``CONFIG GET dir``), listed when the primary's ``INFO replication`` has it online
and a majority of the Sentinels' ``SENTINEL REPLICAS`` up too (None: fewer); the primary is
not removed (that is a failover: it raises, so the fault was not injected).
"""

from __future__ import annotations

import hashlib
import shutil
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar

from dbs.base import DB
from dbs.redis import RedisDB, base_conf, connect
from harness.core.cluster import Node
from harness.core.errors import HarnessError, UsageError

if TYPE_CHECKING:
    import redis

SERVICE = "mymaster"
SENTINEL_PORT = 26379
SENTINELS = 3
QUORUM = 2
DOWN_AFTER_MS = 1000
FAILOVER_TIMEOUT_MS = 3000
PROBE_TIMEOUT = 0.5


def _client(host: str, port: int, timeout: float = PROBE_TIMEOUT) -> redis.Redis:
    return connect(host, port, timeout)


class RedisSentinelDB(RedisDB):
    name: ClassVar[str] = "redis-sentinel"
    summary: ClassVar[str] = ("a primary, replicas and 3 Sentinels (one per machine n1..n3); "
                              "clients find the primary through Sentinel")
    default_nodes: ClassVar[int] = 3
    min_nodes: ClassVar[int] = SENTINELS
    default_lock: ClassVar[str] = "redis-setnx"
    adds_running: ClassVar[bool] = True  # REPLICAOF: a member is added once its node runs
    removes_leader: ClassVar[bool] = False  # the primary leaves by failover: membership's
    # default target here is a replica

    def __init__(self, binary: str | None = None, persistence: str = "none") -> None:
        super().__init__(binary, persistence)
        self.sentinels: list[Node] = []
        self.by_address: dict[str, str] = {}
        self.doors: dict[tuple[str, int], tuple[str, int]] = {}

    # capabilities: RoutedPeers, Replication ----------------------------------------------------
    def peer_ports(self) -> list[int]:
        return [self.port]

    def route_peers(self, doors: Mapping[tuple[str, int], tuple[str, int]]) -> None:
        self.doors = dict(doors)

    def replication_links(self, nodes: Sequence[Node]) -> list[tuple[str, str]]:
        """Every (replica, primary) pair that can replicate: a failover may promote any node."""
        return [(a.name, b.name) for a in nodes for b in nodes if a.name != b.name]

    def known_as(self, node: Node) -> Node:
        """The address the other processes know ``node`` by: its door, if it has one."""
        host, port = self.doors.get((node.name, node.port), (node.host, node.port))
        return Node(node.name, host, port)

    def files(self, node: Node, cluster: list[Node], node_dir: Path) -> dict[str, str]:
        conf = super().files(node, cluster, node_dir)["redis.conf"]
        me = self.known_as(node)
        lines = [
            f"replica-announce-ip {me.host}",
            f"replica-announce-port {me.port}",
            f"bind-source-addr {node.host}",
            "repl-diskless-sync-delay 0",  # replicas in sync at start without a 5 s wait
        ]
        primary = self.known_as(cluster[0])
        if node.name != primary.name:
            lines.append(f"replicaof {primary.host} {primary.port}")
        return {"redis.conf": conf + "\n".join(lines) + "\n"}

    # capabilities: HasCompanions, HasLeader, Failover (harness/core/capabilities.py) --------
    def companions(self, nodes: list[Node]) -> list[tuple[Any, list[Node]]]:
        """Three Sentinels, one on each of the first three machines."""
        if len(nodes) < SENTINELS:
            raise UsageError(f"--db redis-sentinel needs at least {SENTINELS} nodes (a primary "
                             f"and replicas, with a Sentinel on each of the first "
                             f"{SENTINELS}), got {len(nodes)}")
        self.by_address = {n.host: n.name for n in nodes}
        self.by_address.update({self.known_as(n).host: n.name for n in nodes})
        self.sentinels = [Node(f"s{i + 1}", n.host, SENTINEL_PORT)
                          for i, n in enumerate(nodes[:SENTINELS])]
        return [(SentinelProcess(self.known_as(nodes[0]), len(nodes) - 1,
                                 [self.known_as(n) for n in nodes[1:]]), self.sentinels)]

    def client_options(self) -> dict[str, Any]:
        return {"sentinels": [s.endpoint for s in self.sentinels], "service": SERVICE}

    def leader(self, nodes: list[Node]) -> str | None:
        """The primary a majority of the Sentinels names now (None: no majority agrees)."""
        votes: dict[str, int] = {}
        for s in self.sentinels:
            addr = primary_seen_by(s)
            if addr is not None:
                votes[addr] = votes.get(addr, 0) + 1
        for addr, n in votes.items():
            if n >= len(self.sentinels) // 2 + 1:
                return self.by_address.get(addr)
        return None

    # capability: Membership ------------------------------------------------------------------
    def members(self, nodes: Sequence[Node]) -> dict[str, str | None]:
        """The primary, and each replica the primary lists online (in sync): its member (the
        name of its data directory) if a majority of the Sentinels lists it up too (a Sentinel
        cut off from it does not), else None. (Up, not in sync: a Sentinel asks a new replica
        its INFO every 10 s.)"""
        import redis

        primary = self._primary(nodes)
        listed = [{self.by_address.get(str(r.get("ip"))) for r in x if not r.get("is_sdown")}
                  for x in map(self._sentinel, self.sentinels) if x is not None]
        out: dict[str, str | None] = {primary.name: self._member(primary)}
        try:
            info = _ask(primary, lambda c: c.info("replication"))
        except redis.exceptions.RedisError as e:
            raise HarnessError(f"{primary.name}: INFO replication: {e!r}") from None
        for key, r in info.items():
            name = self.by_address.get(str(r.get("ip"))) if key.startswith("slave") else None
            if name is not None and r.get("state") == "online":
                node = next(n for n in nodes if n.name == name)
                agree = sum(name in x for x in listed) > len(self.sentinels) // 2
                out[name] = self._member(node) if agree else None
        return out

    def remove_member(self, nodes: Sequence[Node], name: str) -> None:
        if self._primary(nodes).name == name:
            raise HarnessError(f"{name} is the primary: a replica is removed (that is failover)")
        self._change(next(n for n in nodes if n.name == name), None)

    def add_member(self, nodes: Sequence[Node], name: str, member: str) -> None:
        self._change(next(n for n in nodes if n.name == name), self._primary(nodes))

    def joining(self, nodes: Sequence[Node], name: str, member: str) -> dict[str, str]:
        """The primary the added replica is to follow ({name: host port})."""
        p = self._primary(nodes)
        return {p.name: f"{self.known_as(p).host} {self.known_as(p).port}"}

    def join_empty(self, node: Node, node_dir: Path, member: str,
                   cluster: Mapping[str, str]) -> list[str]:
        """``redis.conf`` without ``replicaof`` (``add_member`` makes it a replica), its data
        directory emptied: the node's own, or ``data-MEMBER`` for a replacement. (Sentinel's
        ``CONFIG REWRITE`` at a failover quotes the ``dir`` it leaves.)"""
        data = node_dir / f"data-{member}" if member != node.name else node_dir
        if data != node_dir:
            shutil.rmtree(data, ignore_errors=True)
        data.mkdir(exist_ok=True)
        for f in [*data.glob("*.rdb"), *data.glob("appendonly*")]:
            shutil.rmtree(f) if f.is_dir() else f.unlink()
        path = node_dir / "redis.conf"
        lines = path.read_text().splitlines()
        inner = Path(next(x for x in lines if x.startswith("dir ")).split(" ", 1)[1].strip('"'))
        inner = inner.parent if inner.name.startswith("data-") else inner  # as the node sees it
        kept = [x for x in lines if not x.startswith(("replicaof ", "dir "))]
        inner = inner / data.name if data != node_dir else inner
        path.write_text("\n".join([*kept, f"dir {inner}"]) + "\n")
        return [f"{member} starts on an empty {data.name}, to follow {', '.join(cluster)}"]

    def _primary(self, nodes: Sequence[Node]) -> Node:
        name = self.leader(list(nodes))
        if name is None:
            raise HarnessError("no primary that a majority of the Sentinels agrees on")
        return next(n for n in nodes if n.name == name)

    def _member(self, node: Node) -> str:
        """The member a node is: the name of its data directory (``CONFIG GET dir``)."""
        import redis

        try:
            d = Path(str(_ask(node, lambda c: c.config_get("dir"))["dir"])).name
        except redis.exceptions.RedisError as e:
            raise HarnessError(f"{node.name}: CONFIG GET dir: {e!r}") from None
        return d.removeprefix("data-") if d.startswith("data-") else node.name

    def _change(self, node: Node, primary: Node | None) -> None:
        """``REPLICAOF`` (the primary, or NO ONE), then ``SENTINEL RESET`` on every Sentinel;
        a refusal raises."""
        import redis

        to = (self.known_as(primary).host, self.known_as(primary).port) if primary else (
            "NO", "ONE")
        try:
            _ask(node, lambda c: c.execute_command("REPLICAOF", *to))
        except redis.exceptions.RedisError as e:
            raise HarnessError(f"{node.name} refused REPLICAOF {to}: {e!r}") from None
        for s in self.sentinels:
            try:
                _ask(s, lambda c: c.execute_command("SENTINEL", "RESET", SERVICE))
            except redis.exceptions.RedisError as e:
                raise HarnessError(f"{s.name} refused SENTINEL RESET: {e!r}") from None

    @staticmethod
    def _sentinel(s: Node) -> list[dict[str, Any]] | None:
        """The replicas a Sentinel lists (None: it does not answer)."""
        import redis

        try:
            return list(_ask(s, lambda c: c.sentinel_slaves(SERVICE)))
        except redis.exceptions.RedisError:
            return None

    def role(self, node: Node) -> str | None:
        """``master`` or ``slave`` as the node itself says (None: it does not answer)."""
        import redis

        c = _client(node.host, node.port)
        try:
            return str(c.role()[0])
        except redis.exceptions.RedisError:
            return None
        finally:
            c.close()


def _ask(node: Node, call: Any) -> Any:
    c = _client(node.host, node.port, 2.0)
    try:
        return call(c)
    finally:
        c.close()


def sentinel_id(node: Node) -> str:
    """A Sentinel's run id (40 hex digits), the same whoever computes it."""
    return hashlib.sha1(f"lock-harness-sentinel {node.host}:{node.port}".encode()).hexdigest()


def primary_seen_by(sentinel: Node) -> str | None:
    import redis

    c = _client(sentinel.host, sentinel.port)
    try:
        addr = c.sentinel_get_master_addr_by_name(SERVICE)
    except redis.exceptions.RedisError:
        return None
    finally:
        c.close()
    return None if not addr else str(addr[0])


class SentinelProcess(DB):
    """One Sentinel (``redis-server --sentinel``): the companion process of a machine."""

    name: ClassVar[str] = "redis-sentinel-process"
    summary: ClassVar[str] = "Redis Sentinel"
    default_nodes: ClassVar[int] = SENTINELS
    port: ClassVar[int] = SENTINEL_PORT
    debian_packages: ClassVar[dict[str, str]] = {"redis-server": "redis-server"}

    def __init__(self, primary: Node, replicas: int, replica_nodes: list[Node] | None = None,
                 binary: str = "redis-server") -> None:
        self.primary = primary
        self.replicas = replicas
        self.replica_nodes = list(replica_nodes or [])
        self.binary = binary

    def check_environment(self) -> None:
        RedisDB(self.binary).check_environment()

    def files(self, node: Node, cluster: list[Node], node_dir: Path) -> dict[str, str]:
        p = self.primary
        lines = [
            *base_conf(node, node_dir),
            f"sentinel announce-ip {node.host}",
            f"bind-source-addr {node.host}",
            f"sentinel monitor {SERVICE} {p.host} {p.port} {QUORUM}",
            f"sentinel down-after-milliseconds {SERVICE} {DOWN_AFTER_MS}",
            f"sentinel failover-timeout {SERVICE} {FAILOVER_TIMEOUT_MS}",
            f"sentinel parallel-syncs {SERVICE} 1",
            # Who is who, told up front (Sentinel would learn it from hello messages every
            # 2 s and from the primary's INFO every 10 s): ready at once, no discovery wait.
            f"sentinel myid {sentinel_id(node)}",
            *(f"sentinel known-sentinel {SERVICE} {s.host} {s.port} {sentinel_id(s)}"
              for s in cluster if s.name != node.name),
            *(f"sentinel known-replica {SERVICE} {r.host} {r.port}" for r in self.replica_nodes),
        ]
        return {"sentinel.conf": "\n".join(lines) + "\n"}

    def argv(self, node: Node, node_dir: Path) -> list[str]:
        return [self.binary, str(node_dir / "sentinel.conf"), "--sentinel"]

    def ready(self, node: Node) -> bool:
        """Ready when it sees every replica in sync and every other Sentinel: before that a
        failover could not happen (or could pick nobody)."""
        import redis

        c = _client(node.host, node.port)
        try:
            master = c.sentinel_master(SERVICE)
            replicas = c.sentinel_slaves(SERVICE)
        except redis.exceptions.RedisError:
            return False
        finally:
            c.close()
        linked = [r for r in replicas if r.get("master-link-status") == "ok"
                  and not r.get("is_sdown")]
        return (len(linked) >= self.replicas
                and int(master.get("num-other-sentinels", 0)) >= SENTINELS - 1)

    def clock_fault_support(self) -> str | None:
        return "clock faults target the Redis nodes, not their Sentinels"
