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

Clock faults are refused: etcd is a Go program, which reads the clock through the vDSO and not
through libc, so libfaketime never reaches it.

With the link layer's doors (``route_peers``) every member advertises its door as its peer URL
(and ``initial-cluster`` names every member by its door, so all members agree on the member
IDs, which etcd derives from those URLs); each still listens on its own address. Raft's
messages between members then run through the proxy, which names the member by its source
address.
"""

from __future__ import annotations

import json
import shutil
import urllib.error
import urllib.request
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import ClassVar

from harness.core.cluster import Node
from harness.core.errors import HarnessError

PEER_PORT = 2380
HEARTBEAT_MS = 100
ELECTION_MS = 1000
PROBE_TIMEOUT = 0.5
_OPENER = urllib.request.build_opener(urllib.request.ProxyHandler({}))  # never via a proxy
CLOCK_REFUSAL = ("etcd is a Go program: it reads the clock through the vDSO, not libc, so "
                 "libfaketime cannot shift it and a clock fault would be a silent no-op")


class EtcdDB:
    name: ClassVar[str] = "etcd"
    summary: ClassVar[str] = "an etcd cluster (Debian's etcd-server, 3.4; lease TTL = --ttl)"
    default_nodes: ClassVar[int] = 3
    port: ClassVar[int] = 2379
    default_lock: ClassVar[str] = "etcd"
    debian_packages: ClassVar[dict[str, str]] = {"etcd": "etcd-server"}

    def __init__(self, binary: str | None = None) -> None:
        self.binary = binary or shutil.which("etcd") or "etcd"
        self.doors: dict[tuple[str, int], tuple[str, int]] = {}

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
        return CLOCK_REFUSAL


def url(host: str, port: int) -> str:
    return f"http://{host}:{port}"


def etcd_config(node: Node, cluster: list[Node], node_dir: Path,
                doors: Mapping[tuple[str, int], tuple[str, int]] | None = None) -> str:
    """The member's YAML config (etcd --config-file). JSON is YAML, and needs no yaml library."""
    def peer(n: Node) -> str:
        return url(*(doors or {}).get((n.name, PEER_PORT), (n.host, PEER_PORT)))

    config = {
        "name": node.name,
        "data-dir": str(node_dir / "data"),
        "listen-client-urls": url(node.host, node.port),
        "advertise-client-urls": url(node.host, node.port),
        "listen-peer-urls": url(node.host, PEER_PORT),
        "initial-advertise-peer-urls": peer(node),
        "initial-cluster": ",".join(f"{n.name}={peer(n)}" for n in cluster),
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
