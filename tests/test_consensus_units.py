"""The pure parts of the ZooKeeper and etcd support: configs, probes' parsing, tokens, the
relay (on loopback sockets, no server), the leader nemeses (with a fake backend), the careful
client's hold, spec checks, and that etcd3 0.12 imports and its lock's retry loop works."""

from __future__ import annotations

import json
import random
import socket
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from dbs.etcd import EtcdDB, etcd_config, metric
from dbs.faketime import jvm_log_year
from dbs.fourletter import ServerState, parse_srvr, pick_leader
from dbs.zookeeper import ZooKeeperDB, myid, zoo_cfg
from harness.controller import spec as specs
from harness.controller.netfilter import GID_BASE, node_gid
from harness.controller.registry import default_registry
from harness.core import capabilities
from harness.core.capabilities import HasLeader
from harness.core.cluster import NemesisContext, Node
from harness.core.errors import UsageError
from harness.core.locks import Grant
from nemesis.partition import Partition
from nemesis.process_faults import PauseNode
from workloads.locks.etcd import lease_ttl, prefix_end
from workloads.locks.zookeeper import sequence_of
from workloads.mutex import MutexParams, MutexWorkload
from workloads.relay import Relay

CLUSTER = [Node(f"n{i}", f"127.9.0.{i + 1}", 2181) for i in (1, 2, 3)]


# configs -------------------------------------------------------------------------------------
def test_zoo_cfg_names_every_server_and_enables_the_probes() -> None:
    cfg = zoo_cfg(CLUSTER[1], CLUSTER, Path("/node"))
    lines = dict(line.split("=", 1) for line in cfg.splitlines())
    assert lines["tickTime"] == "200" and lines["minSessionTimeout"] == "400"
    assert lines["clientPortAddress"] == "127.9.0.3" and lines["dataDir"] == "/node"
    assert lines["server.3"] == "127.9.0.4:2888:3888"
    assert "srvr" in lines["4lw.commands.whitelist"]
    assert myid(CLUSTER[2], CLUSTER) == 3
    files = ZooKeeperDB().files(CLUSTER[0], CLUSTER, Path("/node"))
    assert files["myid"] == "1\n"


def test_zookeeper_reconfigures_only_in_a_run_whose_nemeses_need_membership() -> None:
    """A run without a membership fault keeps the configuration (and verdicts) it had before
    dynamic reconfiguration: no reconfigEnabled, standaloneEnabled or skipACL."""
    db = ZooKeeperDB()
    db.configure_for({capabilities.HasLeader, capabilities.LinkLayer})
    plain = db.files(CLUSTER[0], CLUSTER, Path("/node"))["zoo.cfg"]
    argv = db.argv(CLUSTER[0], Path("/node"))
    assert "reconfig" not in plain and "standalone" not in plain
    assert not any("skipACL" in a for a in argv)
    db.configure_for({capabilities.Membership, capabilities.HasLeader})
    changing = db.files(CLUSTER[0], CLUSTER, Path("/node"))["zoo.cfg"]
    assert set(changing.splitlines()) - set(plain.splitlines()) == {
        "reconfigEnabled=true", "standaloneEnabled=false"}
    assert set(db.argv(CLUSTER[0], Path("/node"))) - set(argv) == {"-Dzookeeper.skipACL=yes"}


def test_a_single_zookeeper_is_standalone() -> None:
    assert "server." not in zoo_cfg(CLUSTER[0], CLUSTER[:1], Path("/n"))


def test_etcd_config_is_json_yaml_with_the_whole_cluster() -> None:
    node = Node("n2", "127.9.0.3", 2379)
    cluster = [Node(f"n{i}", f"127.9.0.{i + 1}", 2379) for i in (1, 2, 3)]
    cfg = json.loads(etcd_config(node, cluster, Path("/node")))
    assert cfg["name"] == "n2" and cfg["data-dir"] == "/node/data"
    assert cfg["listen-client-urls"] == "http://127.9.0.3:2379"
    assert cfg["initial-cluster"].split(",")[2] == "n3=http://127.9.0.4:2380"
    assert EtcdDB().argv(node, Path("/node"))[-2:] == ["--config-file", "/node/etcd.conf.yml"]


def test_both_dbs_are_registered_with_three_nodes_and_a_leader_probe() -> None:
    for name in ("zookeeper", "etcd"):
        db = default_registry().load("dbs", name)
        assert db.default_nodes == 3 and issubclass(db, HasLeader)
    assert not issubclass(default_registry().load("dbs", "redis"), HasLeader)


# probes --------------------------------------------------------------------------------------
SRVR_LEADER = """Zookeeper version: 3.8.0-debian, built on 2022-10-07
Latency min/avg/max: 0/0.5/3
Received: 12
Zxid: 0x300000004
Mode: leader
Node count: 6
"""


def test_srvr_replies_are_parsed() -> None:
    s = parse_srvr(SRVR_LEADER)
    assert s == ServerState("leader", 0x300000004) and s.serving and s.epoch == 3
    down = parse_srvr("This ZooKeeper instance is not currently serving requests\n")
    assert down.mode is None and not down.serving
    assert not parse_srvr("").serving


def test_of_two_self_declared_leaders_the_newest_epoch_wins() -> None:
    states = {"n1": ServerState("leader", 0x200000009), "n2": ServerState("leader", 0x300000001),
              "n3": ServerState("follower", 0x300000001)}
    assert pick_leader(states) == "n2"
    assert pick_leader({"n1": ServerState(None, None)}) is None


def test_prometheus_metrics_are_read_by_name() -> None:
    text = ("# HELP etcd_server_is_leader ...\netcd_server_is_leader 1\n"
            "etcd_server_is_leader_total 7\netcd_server_has_leader 1\n")
    assert metric(text, "etcd_server_is_leader") == 1.0
    assert metric(text, "etcd_server_missing") is None


def test_jvm_log_timestamps_tell_the_year() -> None:
    out = "[2027-12-27T04:39:53.288+0000] Use of CLOCK_MONOTONIC is supported\n"
    assert jvm_log_year(out) == 2027
    assert jvm_log_year("openjdk version 17") is None


def test_etcd_clocks_are_moved_by_its_vdso() -> None:
    """etcd is a Go program: libfaketime cannot reach it, its vDSO is patched (as root)."""
    assert EtcdDB.clock_mechanism == "vdso" and EtcdDB.clocks == ("wall", "monotonic", "both")
    assert EtcdDB().clock_fault_support() is None  # the tests run as root on x86_64


def test_every_node_address_gets_its_own_group_id() -> None:
    gids = {node_gid(f"127.{s}.0.{n}") for s in range(64) for n in range(2, 12)}
    assert len(gids) == 64 * 10 and min(gids) > GID_BASE and max(gids) < 2**32 - 1


# tokens and lease times ----------------------------------------------------------------------
def test_the_zookeeper_token_is_the_znode_sequence_number() -> None:
    assert sequence_of("3f2a9c__lock__0000000042") == 42
    with pytest.raises(ValueError):
        sequence_of("3f2a9c__lock__")


def test_etcd_leases_are_whole_seconds_never_shorter() -> None:
    assert [lease_ttl(t) for t in (0.2, 1.0, 1.5, 2.0)] == [1, 1, 2, 2]
    assert prefix_end(b"/mutex/lock/") == b"/mutex/lock0"


def test_etcd3_012_imports_and_its_lock_retry_loop_runs_with_our_tenacity() -> None:
    """etcd3 0.12 needs protobuf < 4 (its generated code) and a tenacity that still accepts
    the old wait(previous_attempt_number, delay_since_first_attempt) its lock() passes."""
    import etcd3
    import tenacity
    from etcd3 import etcdrpc

    assert etcd3.__version__ == "0.12.0" and etcdrpc.RangeRequest(limit=1).limit == 1
    waits: list[int] = []

    def wait(previous_attempt_number: int, delay_since_first_attempt: float) -> float:
        waits.append(previous_attempt_number)
        return 0

    @tenacity.retry(retry=tenacity.retry_never, stop=tenacity.stop_after_delay(5), wait=wait)
    def flaky() -> str:
        if len(waits) < 2:
            raise tenacity.TryAgain
        return "ok"

    assert flaky() == "ok" and waits == [1, 2]


# relay ---------------------------------------------------------------------------------------
@pytest.fixture
def echo_server() -> Iterator[tuple[str, int]]:
    srv = socket.socket()
    srv.bind(("127.0.0.1", 0))
    srv.listen(4)

    def serve() -> None:
        while True:
            try:
                conn, _ = srv.accept()
            except OSError:
                return
            with conn:
                while data := conn.recv(4096):
                    conn.sendall(data.upper())

    threading.Thread(target=serve, daemon=True).start()
    yield srv.getsockname()
    srv.close()


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def test_the_relay_carries_bytes_both_ways_and_fails_over(echo_server: tuple[str, int]) -> None:
    dead = ("127.0.0.1", free_port())  # nobody listens there: refused
    relay = Relay([dead, echo_server], connect_timeout=1.0)
    try:
        for _ in range(2):
            with socket.create_connection(relay.address, timeout=5) as c:
                c.sendall(b"lease keepalive")
                assert c.recv(100) == b"LEASE KEEPALIVE"
        assert relay.upstream_order()[0] == echo_server  # it remembers the one that worked
    finally:
        relay.close()


def test_a_relay_with_no_reachable_node_closes_the_connection() -> None:
    relay = Relay([("127.0.0.1", free_port())], connect_timeout=0.5)
    try:
        with socket.create_connection(relay.address, timeout=5) as c:
            assert c.recv(10) == b""
    finally:
        relay.close()


# leader nemeses ------------------------------------------------------------------------------
class FakeBackend:
    def __init__(self) -> None:
        self.cuts: list[tuple[str, str]] = []
        self.paused: list[str] = []
        self.healed = 0

    def cut(self, links: Any) -> None:
        self.cuts.extend(links)

    def heal(self) -> None:
        self.healed += 1

    def pause(self, node: Node) -> None:
        self.paused.append(node.name)

    def resume(self, node: Node) -> None:
        self.paused.remove(node.name)

    def answers(self, node: Node) -> bool:
        return node.name not in self.paused


class FakeDB:
    def __init__(self, leader: str | None) -> None:
        self.current = leader

    def leader(self, nodes: list[Node]) -> str | None:
        return self.current


def context(backend: FakeBackend, leader: str | None) -> NemesisContext:
    return NemesisContext(backend, CLUSTER, None, None, random.Random(1), 2.0,  # type: ignore[arg-type]
                          db=FakeDB(leader))


def test_partition_leader_cuts_the_leader_from_every_other_node() -> None:
    backend = FakeBackend()
    ctx = context(backend, "n2")
    nem = Partition.alias("partition-leader")()
    targets = nem.select(ctx)
    assert targets == ["n2"]
    nem.start(ctx, targets)
    assert sorted(backend.cuts) == [("n1", "n2"), ("n2", "n3")]
    nem.stop(ctx, targets)
    assert backend.healed == 1
    assert nem.select(context(backend, None)) is None  # an election under way


def test_pause_leader_pauses_and_resumes_the_leader() -> None:
    backend = FakeBackend()
    ctx = context(backend, "n3")
    nem = PauseNode.alias("pause-leader")()
    targets = nem.select(ctx)
    nem.start(ctx, targets or [])
    assert backend.paused == ["n3"]
    nem.stop(ctx, targets or [])
    assert backend.paused == []


# the careful client's hold -------------------------------------------------------------------
class FakeResource:
    def __init__(self) -> None:
        self.kinds: list[str] = []

    mode = "plain"

    def write(self, w: Any, via: Any = None) -> Any:
        from harness.core.resource import Written

        self.kinds.append(w.kind)
        return Written(len(self.kinds), True)


class LosingLock:
    """held() turns False after a few checks, like a listener seeing SUSPENDED."""

    def __init__(self, checks: int) -> None:
        self.checks = checks

    def held(self, grant: Grant) -> bool:
        self.checks -= 1
        return self.checks > 0


def test_a_lock_that_says_it_was_lost_stops_the_work_early(tmp_path: Path) -> None:
    from harness.core.journal import JournalWriter

    resource = FakeResource()
    journal = JournalWriter(tmp_path / "c0.jsonl", 0, 0)
    params = MutexParams(process=0, hold_min=5.0, hold_max=5.0)
    workload = MutexWorkload(params, LosingLock(3), resource,  # type: ignore[arg-type]
                             journal, threading.Event())
    workload.critical_section(Grant(token=1))
    assert resource.kinds == ["enter"]  # no exit write: the careful client stopped
    journal.close()


# spec ----------------------------------------------------------------------------------------
def test_a_db_alone_picks_its_own_lock() -> None:
    assert specs.TestSpec.from_dict({"db": "zookeeper"}).validate().lock == "zookeeper"
    spec = specs.TestSpec.from_dict({"db": "etcd", "nemesis": "none"}).validate()
    assert spec.lock == "etcd" and spec.nodes == 3


def test_clock_faults_on_etcd_are_accepted() -> None:
    spec = specs.TestSpec.from_dict({"db": "etcd", "nemesis": "clock"}).validate()
    assert spec.fault_names == ["clock"]


def test_leader_faults_need_a_db_with_a_leader() -> None:
    with pytest.raises(UsageError, match="needs a db with a leader"):
        specs.TestSpec.from_dict({"db": "redis", "nemesis": "pause-leader"}).validate()
    spec = specs.TestSpec.from_dict({"db": "zookeeper", "nemesis": "partition-leader,pause-leader"})
    assert spec.validate().nemesis == ["partition-leader", "pause-leader"]
