"""etcd: a cluster of ``etcd`` members from Debian's ``etcd-server`` package (etcd 3.4).

Only a config file, a command line and probes: the backend decides where the process runs. Every
member uses the standard ports (client 2379, peer 2380) on its own address. The raft timings are
etcd's defaults (heartbeat 100 ms, election timeout 1 s), so the shortest lease etcd grants is
1.5 s, rounded up to 2 s; the lock's ``--ttl`` becomes the lease TTL (whole seconds).

The JSON gateway (``/v3/...`` over plain HTTP, for libraries such as etcd3gw and tooz's etcd
driver) is on: etcd 3.4 started from a config file turns it off unless ``enable-grpc-gateway``
says so. The probes use the plain HTTP endpoints: ``/health`` (true only when the member sees a
leader and a quorum answers a read) for readiness, and ``/metrics``
(``etcd_server_is_leader``) for the leader.

Pre-vote is on (etcd 3.5's default; 3.4's is off): see :func:`etcd_config`.

Clock faults: etcd is a Go program, which reads the clock through the vDSO and not through
libc, so libfaketime never reaches it. Its clocks are moved by patching the running server's
vDSO (``clock_mechanism = "vdso"``, :mod:`harness.controller.vdso_clock`): the wall clock, the
monotonic clock (which etcd's lessor and raft's ticker read), or both. The wall clock is read
back from the ``Date`` header of its HTTP answers (Go's ``net/http`` writes it from
``time.Now()``): it has whole seconds, so :meth:`EtcdDB.read_clock` answers the middle of the
second it names (within 0.5 s plus the request's time of the node's clock, inside the clock
nemesis's 1 s tolerance); :func:`date_edge` waits for the header to turn to the next second,
which pins the node's clock to a few ms. The monotonic clock is read back from the patch in
the server process (the offset and the clock ids it moves: the controller, which patched it,
gives the DB a reader of it in ``vdso_clocks``), the only place a follower shows it; the
leader's moved monotonic clock also shows in a lease's remaining TTL (``ttl_left``).

What the clocks do to leases (etcd 3.4, measured in tests/test_etcd_clock.py): only the leader's
lessor counts them down, on the monotonic clock (``Remaining()``); its revoke loop pops leases
from a heap ordered by the wall clock (``expiry.UnixNano()``) and revokes one only if
``Remaining()`` agrees. So a wall jump alone revokes nothing early; a monotonic jump alone makes
a lease run out (its TTL reads negative, and a keepalive of it waits for the revocation) but it
is revoked at its wall-clock end, which makes a lease kept alive past its TTL end early; both
clocks moved together revoke at once.

Membership (``capabilities.Membership``, the ``membership`` nemesis): the member list, ``member
remove`` and ``member add`` through the JSON gateway (``/v3/cluster/member/...``), each member
matched to its node by its peer URL (a replacement member has a name of its own). A member
joins on an empty data directory with ``initial-cluster-state: existing`` and the member list
``member add`` answered, written into its config file (:meth:`EtcdDB.join_empty`).

With the link layer's doors (``route_peers``) every member advertises its door as its peer URL
(and ``initial-cluster`` names every member by its door, so all members agree on the member
IDs, which etcd derives from those URLs); each still listens on its own address. Raft's
messages between members then run through the proxy, which names the member by its source
address.
"""

from __future__ import annotations

import email.utils
import json
import os
import platform
import shutil
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import ClassVar

from dbs.base import DB
from harness.core.cluster import Node
from harness.core.errors import HarnessError

PEER_PORT = 2380
HEARTBEAT_MS = 100
ELECTION_MS = 1000
PROBE_TIMEOUT = 0.5
_OPENER = urllib.request.build_opener(urllib.request.ProxyHandler({}))  # never via a proxy


class EtcdDB(DB):
    name: ClassVar[str] = "etcd"
    summary: ClassVar[str] = "an etcd cluster (Debian's etcd-server, 3.4; lease TTL = --ttl)"
    default_nodes: ClassVar[int] = 3
    port: ClassVar[int] = 2379
    default_lock: ClassVar[str] = "etcd"
    debian_packages: ClassVar[dict[str, str]] = {"etcd": "etcd-server"}
    # Go reads the clocks through the vDSO: the running server's vDSO is patched (ptrace)
    clock_mechanism: ClassVar[str] = "vdso"
    clocks: ClassVar[tuple[str, ...]] = ("wall", "monotonic", "both")

    def __init__(self, binary: str | None = None) -> None:
        self.binary = binary or shutil.which("etcd") or "etcd"
        self.doors: dict[tuple[str, int], tuple[str, int]] = {}
        # node -> what the patch in its server moves ({clock: offset}), once its clock moved
        self.vdso_clocks: dict[str, Callable[[], dict[str, float]]] = {}

    def check_environment(self) -> None:
        if shutil.which(self.binary) is None:
            raise HarnessError(f"etcd not found ({self.binary}): run the set-up command "
                               "`bash setup.sh` (Debian package etcd-server)")

    def files(self, node: Node, cluster: list[Node], node_dir: Path) -> dict[str, str]:
        return {"etcd.conf.yml": etcd_config(node, cluster, node_dir, self.doors)}

    # capabilities: RoutedPeers, Replication ----------------------------------------------------
    def peer_ports(self) -> list[int]:
        return [PEER_PORT]

    def route_peers(self, doors: Mapping[tuple[str, int], tuple[str, int]]) -> None:
        self.doors = dict(doors)

    def replication_links(self, nodes: Sequence[Node]) -> list[tuple[str, str]]:
        """Raft members stream to each other both ways: every pair, each way."""
        return [(a.name, b.name) for a in nodes for b in nodes if a.name != b.name]

    # capability: Membership ------------------------------------------------------------------
    def members(self, nodes: Sequence[Node]) -> dict[str, str | None]:
        """Node -> its member's name (None: added, not started), from the first node that
        answers ``member list``."""
        return {n: m.get("name") or None for n, m in self._listed(nodes).items()}

    def remove_member(self, nodes: Sequence[Node], name: str) -> None:
        listed = self._listed(nodes)
        if name not in listed:
            raise HarnessError(f"{name} is not a member of the etcd cluster")
        self._ask([n for n in nodes if n.name != name], "remove", {"ID": listed[name]["ID"]})

    def add_member(self, nodes: Sequence[Node], name: str, member: str) -> None:
        node = next(n for n in nodes if n.name == name)
        self._ask([n for n in nodes if n.name != name], "add",
                  {"peerURLs": [peer_url(node, self.doors)]})

    def joining(self, nodes: Sequence[Node], name: str, member: str) -> dict[str, str]:
        """The members (name: peer URL) ``member`` joins, itself the one not started yet."""
        return {m.get("name") or member: m["peerURLs"][0]
                for m in self._ask(nodes, "list", {})["members"]}

    def join_empty(self, node: Node, node_dir: Path, member: str,
                   cluster: Mapping[str, str]) -> list[str]:
        """The config rewritten for ``member`` joining ``cluster`` on an empty data directory:
        ``data`` for the node's own name (what it held is removed), ``data-MEMBER`` for a
        replacement (the old one left as it was)."""
        path = node_dir / "etcd.conf.yml"
        config = json.loads(path.read_text())
        data = f"data-{member}" if member != node.name else "data"
        shutil.rmtree(node_dir / data, ignore_errors=True)
        config.update({"name": member, "initial-cluster-state": "existing",
                       "data-dir": str(Path(config["data-dir"]).parent / data),
                       "initial-cluster": ",".join(f"{k}={v}" for k, v in cluster.items())})
        path.write_text(json.dumps(config, indent=1) + "\n")
        return [f"{member} joins {', '.join(sorted(cluster))} on an empty {data}"]

    def _listed(self, nodes: Sequence[Node]) -> dict[str, dict]:
        """Node -> its entry in the member list (matched by peer URL)."""
        names = {peer_url(n, self.doors): n.name for n in nodes}
        return {names[u]: m for m in self._ask(nodes, "list", {})["members"]
                if (u := (m.get("peerURLs") or [""])[0]) in names}

    @staticmethod
    def _ask(nodes: Sequence[Node], verb: str, body: dict) -> dict:
        """``/v3/cluster/member/VERB`` of the first node that answers; a refusal raises."""
        why = "no node answered"
        for node in nodes:
            try:
                return post(node, f"/v3/cluster/member/{verb}", body)
            except urllib.error.HTTPError as e:
                raise HarnessError(f"etcd refused member {verb} {body or ''}: "
                                   f"{e.read().decode(errors='replace')[:200]}") from None
            except (OSError, ValueError) as e:
                why = f"{node.name}: {e}"
        raise HarnessError(f"etcd member {verb}: {why}")

    def argv(self, node: Node, node_dir: Path) -> list[str]:
        return [self.binary, "--config-file", str(node_dir / "etcd.conf.yml")]

    def started(self, node: Node) -> bool:
        """May the next member start? Once this one serves its peers. A new member first asks
        every other member's peer URL whether it is already part of the cluster, each with a
        1 s timeout: a member that listens but does not serve yet (started a few ms after it)
        costs the whole second, two of them 2 s, on every run. Started one after another,
        each finds the others refusing or answering, and goes on at once."""
        return http_get(Node(node.name, node.host, PEER_PORT), "/members") is not None

    def ready(self, node: Node) -> bool:
        """Healthy: the member has a leader and a quorum answers."""
        body = http_get(node, "/health")
        try:
            return body is not None and json.loads(body).get("health") == "true"
        except ValueError:
            return False

    def leader(self, nodes: list[Node]) -> str | None:
        for node in nodes:
            body = http_get(node, "/metrics")
            if body is not None and metric(body, "etcd_server_is_leader") == 1.0:
                return node.name
        return None

    def clock_fault_support(self) -> str | None:
        if platform.machine() != "x86_64":
            return f"etcd's clocks are moved by a vDSO patch for x86_64, not {platform.machine()}"
        if os.geteuid() != 0:
            return "etcd's clocks are moved by patching its vDSO with ptrace, which needs root"
        return None

    def read_clock(self, node: Node, clock: str | None = None) -> float:
        """The node's clock, as seconds since the epoch: the wall clock from the ``Date``
        header (the middle of its second); the monotonic clock as the controller's wall clock
        plus the offset the patch in the node's server adds to it (none: not patched). With no
        ``clock``, the one its faults move: the monotonic clock when its patch moves that
        alone, else the wall clock."""
        read = self.vdso_clocks.get(node.name)
        moved = read() if read is not None else {}
        if clock is None:
            clock = "monotonic" if moved and "wall" not in moved else "wall"
        if clock == "monotonic":
            return time.time() + moved.get("monotonic", 0.0)
        return date_header(node) + 0.5


def url(host: str, port: int) -> str:
    return f"http://{host}:{port}"


def peer_url(node: Node, doors: Mapping[tuple[str, int], tuple[str, int]]) -> str:
    """Where the other members reach ``node`` (its door, with the link layer's)."""
    return url(*doors.get((node.name, PEER_PORT), (node.host, PEER_PORT)))


def etcd_config(node: Node, cluster: list[Node], node_dir: Path,
                doors: Mapping[tuple[str, int], tuple[str, int]] | None = None) -> str:
    """The member's YAML config (etcd --config-file). JSON is YAML, and needs no yaml library."""
    config = {
        "name": node.name,
        "data-dir": str(node_dir / "data"),
        "listen-client-urls": url(node.host, node.port),
        "advertise-client-urls": url(node.host, node.port),
        "listen-peer-urls": url(node.host, PEER_PORT),
        "initial-advertise-peer-urls": peer_url(node, doors or {}),
        "initial-cluster": ",".join(f"{n.name}={peer_url(n, doors or {})}" for n in cluster),
        "initial-cluster-state": "new",  # ignored on a restart: the data dir exists then
        "initial-cluster-token": f"lock-harness-{cluster[0].host}",
        "heartbeat-interval": HEARTBEAT_MS,
        "election-timeout": ELECTION_MS,
        # etcd 3.5's default. Without it a member cut off in a minority keeps raising its term
        # and deposes the leader when it comes back; every new leader restarts every lease's
        # TTL, so under repeated minority partitions leases (and the locks on them) never end.
        "pre-vote": True,
        "enable-grpc-gateway": True,  # the JSON API (/v3/...) HTTP clients use
        "logger": "zap",
        "log-outputs": ["stderr"],
    }
    return json.dumps(config, indent=1) + "\n"


def http_get(node: Node, path: str) -> str | None:
    try:
        with _OPENER.open(url(node.host, node.port) + path, timeout=PROBE_TIMEOUT) as resp:
            return resp.read().decode(errors="replace")
    except (OSError, urllib.error.URLError, ValueError):
        return None


def metric(text: str, name: str) -> float | None:
    """The value of an unlabelled Prometheus metric, or None."""
    for line in text.splitlines():
        if line.startswith(name + " "):
            try:
                return float(line.split()[1])
            except (IndexError, ValueError):
                return None
    return None


def date_header(node: Node) -> float:
    """The ``Date`` header of the node's answer to ``/version`` (whole seconds)."""
    try:
        with _OPENER.open(url(node.host, node.port) + "/version", timeout=PROBE_TIMEOUT) as resp:
            date = resp.headers.get("Date")
    except (OSError, urllib.error.URLError, ValueError) as e:
        raise HarnessError(f"{node.name}: no answer to read its clock from: {e}") from None
    if not date:
        raise HarnessError(f"{node.name}: its answer has no Date header")
    return email.utils.parsedate_to_datetime(date).timestamp()


def date_edge(node: Node, timeout: float = 5.0, window: float = 0.1
              ) -> tuple[float, float, float]:
    """(the node's clock, the controller's, the error bound) at the moment the node's ``Date``
    header turns to the next second: the turn happened between the start of the last request
    that showed the old second and the end of the first that shows the new one, so the
    controller's clock is the middle of that span and the bound half of it. A span wider than
    ``window`` (a slow request) waits for the next second's turn."""
    deadline = time.monotonic() + timeout
    started, seen = time.time(), date_header(node)
    while time.monotonic() < deadline:
        start = time.time()
        now = date_header(node)
        end = time.time()
        if now != seen and end - started <= window:
            return now, (started + end) / 2, (end - started) / 2
        started, seen = start, now
    raise HarnessError(f"{node.name}: no turn of its Date header measured within {window} s "
                       f"in {timeout} s")


def post(node: Node, path: str, body: dict) -> dict:
    """The JSON gateway's answer to ``body`` at ``path``."""
    req = urllib.request.Request(url(node.host, node.port) + path, data=json.dumps(body).encode())
    with _OPENER.open(req, timeout=PROBE_TIMEOUT * 4) as resp:
        return dict(json.loads(resp.read()))


def ttl_left(node: Node, lease: int) -> int:
    """The remaining TTL (whole seconds) etcd's leader reports for ``lease``: the leader's
    lessor counts it down on its monotonic clock."""
    return int(post(node, "/v3/lease/timetolive", {"ID": lease})["TTL"])


def grant(node: Node, ttl: int) -> int:
    """A new lease of ``ttl`` seconds (through the JSON gateway); its id."""
    return int(post(node, "/v3/lease/grant", {"TTL": ttl})["ID"])
