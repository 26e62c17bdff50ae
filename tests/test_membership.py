"""The ``membership`` nemesis (issue 45): a member removed while the lock is held, added back on
an empty data directory (or replaced by a new member), each change read back from the cluster's
member list. Real etcd 3.4 clusters and a ZooKeeper 3.8 ensemble for the runs; the config
rewrite and the retry of a refused change without servers."""

from __future__ import annotations

import json
import shutil
import threading
from pathlib import Path
from types import SimpleNamespace

import pytest

from dbs.etcd import EtcdDB, etcd_config
from dbs.redis_sentinel import RedisSentinelDB
from harness.controller.spec import nemesis_target, parse_nemeses
from harness.core.cluster import Node
from harness.core.errors import HarnessError, UsageError
from harness.core.fault_run import FaultRun
from harness.core.schedule import Schedule, Step
from nemesis import membership
from nemesis.membership import MembershipChange, retried
from tests.consensus_runs import RunResult, run
from tests.harness_runs import harness

NODES = [Node(f"n{i}", f"127.0.0.{i}", 2379) for i in (1, 2, 3)]
needs_etcd = pytest.mark.skipif(shutil.which("etcd") is None,
                                reason="etcd missing: run `bash setup.sh`")
needs_redis = pytest.mark.skipif(shutil.which("redis-server") is None,
                                 reason="redis-server missing: run `bash setup.sh`")


def test_harness_list_words_each_change() -> None:
    out = harness("list").stdout
    assert "membership  " in out and "add it back and restart it on an empty data" in out
    assert "membership-replace" in out and "a new member on a new data directory" in out


def test_a_db_without_membership_is_refused_naming_those_with_it(tmp_path: Path) -> None:
    """The flags are declared on the capability, their defaults on every DB: asking which DBs
    have it (issubclass refuses a protocol with flags) names them, a crash never."""
    assert (EtcdDB.adds_running, EtcdDB.removes_leader) == (False, True)
    assert (RedisSentinelDB.adds_running, RedisSentinelDB.removes_leader) == (True, False)
    proc = harness("run", "--db", "redis", "--nemesis", "membership", "--store", str(tmp_path))
    assert proc.returncode == 64, proc.stderr
    assert proc.stderr.strip() == ("harness: --nemesis membership needs a db whose members can "
                                   "be removed and added while it runs (redis-sentinel, "
                                   "zookeeper, etcd), not 'redis'")


def test_the_report_words_the_removal_and_what_came_back() -> None:
    run_ = FaultRun("membership", 0, "leader", ("n2",), 3.0, 6.5, {"added": "n2-r1"})
    assert MembershipChange.describe(run_) == ("a removal of member n2 at 3.0 s for 3.5 s, "
                                               "n2-r1 added on an empty data directory")


def test_a_member_joins_on_an_empty_data_directory(tmp_path: Path) -> None:
    (tmp_path / "etcd.conf.yml").write_text(etcd_config(NODES[1], NODES, tmp_path))
    (tmp_path / "data" / "member").mkdir(parents=True)
    cluster = {"n1": "http://127.0.0.1:2380", "n2": "http://127.0.0.2:2380",
               "n3": "http://127.0.0.3:2380"}
    EtcdDB().join_empty(NODES[1], tmp_path, "n2", cluster)
    config = json.loads((tmp_path / "etcd.conf.yml").read_text())
    assert not (tmp_path / "data").exists(), "re-added empty: what it held is gone"
    assert config["initial-cluster-state"] == "existing"
    assert config["data-dir"] == str(tmp_path / "data") and config["name"] == "n2"
    assert config["initial-cluster"] == ",".join(f"{k}={v}" for k, v in cluster.items())
    (tmp_path / "data" / "member").mkdir(parents=True)  # the member ran again
    words = EtcdDB().join_empty(NODES[1], tmp_path, "n2-r1", {**cluster, "n2-r1": cluster["n2"]})
    config = json.loads((tmp_path / "etcd.conf.yml").read_text())
    assert (tmp_path / "data" / "member").is_dir(), "a replacement leaves the old data as it was"
    assert config["data-dir"] == str(tmp_path / "data-n2-r1") and config["name"] == "n2-r1"
    assert words == ["n2-r1 joins n1, n2, n2-r1, n3 on an empty data-n2-r1"]


def test_a_refused_change_is_tried_again_then_raises(monkeypatch: pytest.MonkeyPatch) -> None:
    ctx = SimpleNamespace(finishing=threading.Event())
    monkeypatch.setattr(membership, "REFUSED_WAIT", 0.8)
    tries: list[int] = []

    def refused_twice() -> None:
        tries.append(1)
        if len(tries) < 3:
            raise HarnessError("etcd refused member remove: unhealthy cluster")

    got = retried(ctx, refused_twice, lambda: False, "refused")  # type: ignore[arg-type]
    assert got == {"refused": 2, "refused-why": "etcd refused member remove: unhealthy cluster"}
    assert retried(ctx, lambda: None, lambda: False, "refused") == {}  # type: ignore[arg-type]

    def never() -> None:
        raise HarnessError("etcd refused member remove: unhealthy cluster")
    with pytest.raises(HarnessError, match="unhealthy cluster"):
        retried(ctx, never, lambda: False, "refused")  # type: ignore[arg-type]
    lost = retried(ctx, never, lambda: True, "refused")  # type: ignore[arg-type]
    assert lost == {"refused-answer-lost": "etcd refused member remove: unhealthy cluster"}


def schedule(tmp_path: Path, *steps: Step) -> Path:
    path = tmp_path / "schedule.toml"
    path.write_text(Schedule(steps).to_toml())
    return path


def replay(store: Path, tmp_path: Path, steps: tuple[Step, ...], *args: str) -> RunResult:
    return run(store, "--db", "etcd", "--replay", str(schedule(tmp_path, *steps)), *args)


def starts(r: RunResult) -> list[dict]:
    return [op for op in r.history if op["process"] == "nemesis" and op["type"] == "info"
            and op["f"].startswith("membership") and op["value"] == "start"]


def stops(r: RunResult) -> list[dict]:
    return [op for op in r.history if op["process"] == "nemesis" and op["type"] == "info"
            and op["f"].startswith("membership") and op["value"] == "stop"]


@needs_etcd
@pytest.mark.servers
def test_the_leader_removed_under_a_hold_and_re_added_empty_keeps_the_lock(
        store: Path, tmp_path: Path) -> None:
    """The lease and the key's revision live in the quorum that stays: the lock holds. The
    step comes 6 s into the load, once etcd's members have been connected for the 5 s its
    strict reconfiguration check asks before it allows a removal."""
    r = replay(store, tmp_path, (Step(6.0, "membership", "leader", 3.0),),
               "--time-limit", "12", "--seed", "1")
    assert r.code == 0, r.output
    [start], [stop] = starts(r), stops(r)
    removed = start["targets"][0]
    assert start["detail"]["leader"] == removed  # the leader as the removal was asked for
    assert start["detail"]["holders"], "asked for while a client held the lock"
    assert removed not in start["detail"]["members"], "read back: no longer a member"
    assert stop["detail"]["members-after"][removed] == removed, "read back: a member again"
    assert stop["detail"]["joined"] == [f"{removed} joins n1, n2, n3 on an empty data"]
    assert r.check("faults")["fault-count"] == 1 and r.check("mutex")["valid"] is True


@needs_etcd
@pytest.mark.servers
@pytest.mark.slow
def test_fencing_tokens_keep_increasing_across_a_replaced_member(store: Path, tmp_path: Path
                                                                   ) -> None:
    r = replay(store, tmp_path, (Step(6.0, "membership", "follower", 3.0,
                                      {"member-change": "replace"}),
                                 Step(12.0, "membership", "leader", 3.0)),
               "--workload", "fenced", "--time-limit", "18", "--seed", "2")
    assert r.code == 0, r.story()
    first, second = stops(r)
    replaced = first["targets"][0]
    assert first["detail"]["added"] == f"{replaced}-r1"
    assert first["detail"]["members-after"][replaced] == f"{replaced}-r1"
    assert second["detail"]["change"] == "re-add-empty" and second["detail"]["added"]
    fencing = r.check("fencing")
    assert fencing["token-order-violation-count"] == 0 and fencing["writes-accepted"] > 0


@needs_etcd
@pytest.mark.servers
@pytest.mark.slow
def test_a_removal_the_cluster_refuses_is_not_injected(store: Path, tmp_path: Path) -> None:
    """With n3 down, removing n2 would leave one live member of two: etcd refuses it for as
    long as the nemesis tries, and the fault was not injected: unknown, never a pass."""
    r = replay(store, tmp_path, (Step(0.5, "kill", "node:n3", 13.0, background=True),
                                 Step(1.5, "membership", "node:n2", 2.0)),
               "--nemesis", "kill,membership", "--time-limit", "14", "--seed", "1")
    assert r.code == 2, r.output
    faults = r.check("faults")
    assert faults["not-injected-count"] == 1, faults
    assert "unhealthy cluster" in faults["not-injected"][0]["error"]


@pytest.mark.servers
@pytest.mark.slow
@pytest.mark.skipif(shutil.which("java") is None, reason="java missing: run `bash setup.sh`")
def test_zookeeper_reconfig_removes_the_leader_under_a_hold_and_re_adds_it_empty(
        store: Path, tmp_path: Path) -> None:
    """``reconfig -remove`` of the leader while the lock is held, ``-add`` on an empty
    ``version-2``: each change in ``/zookeeper/config`` before it counts; the lock holds."""
    r = run(store, "--db", "zookeeper", "--replay", str(schedule(
        tmp_path, Step(6.0, "membership", "leader", 4.0))), "--time-limit", "14", "--seed", "1")
    assert r.code == 0, r.story()
    [start], [stop] = starts(r), stops(r)
    removed = start["targets"][0]
    assert start["detail"]["leader"] == removed and removed not in start["detail"]["members"]
    assert stop["detail"]["members-after"][removed] == removed


# Redis Sentinel: a replica detached (REPLICAOF NO ONE), Sentinel reset, a new one REPLICAOF ---
def test_a_redis_replica_joins_on_an_empty_directory_with_no_replicaof(tmp_path: Path) -> None:
    node = Node("n2", "127.0.0.3", 6379)
    (tmp_path / "redis.conf").write_text("port 6379\ndir /inside\nreplicaof 127.0.0.2 6379\n")
    (tmp_path / "dump.rdb").write_text("the lock's key")
    words = RedisSentinelDB().join_empty(node, tmp_path, "n2", {"n1": "127.0.0.2 6379"})
    assert not (tmp_path / "dump.rdb").exists(), "re-added empty: what it held is gone"
    assert (tmp_path / "redis.conf").read_text() == "port 6379\ndir /inside\n", \
        "a master until add_member's REPLICAOF, its directory as the node sees it"
    (tmp_path / "dump.rdb").write_text("written again")  # and the file rewritten by Sentinel
    (tmp_path / "redis.conf").write_text('port 6379\ndir "/inside"\n')
    words = RedisSentinelDB().join_empty(node, tmp_path, "n2-r1", {"n1": "127.0.0.2 6379"})
    assert (tmp_path / "dump.rdb").exists(), "a replacement leaves the old data as it was"
    assert (tmp_path / "redis.conf").read_text() == "port 6379\ndir /inside/data-n2-r1\n"
    assert words == ["n2-r1 starts on an empty data-n2-r1, to follow n1"]
    RedisSentinelDB().join_empty(node, tmp_path, "n2", {"n1": "127.0.0.2 6379"})
    assert (tmp_path / "redis.conf").read_text() == "port 6379\ndir /inside\n"


@needs_redis
@pytest.mark.servers
def test_a_redis_replica_replaced_is_read_back_from_the_primary_and_the_sentinels(
        store: Path, tmp_path: Path) -> None:
    r = run(store, "--db", "redis-sentinel", "--replay", str(schedule(
        tmp_path, Step(3.0, "membership-replace", "follower", 3.0))), "--time-limit", "10",
        "--seed", "1")
    assert r.code == 0, r.story()
    [start], [stop] = starts(r), stops(r)
    replaced = start["targets"][0]
    assert start["detail"]["leader"] != replaced and replaced not in start["detail"]["members"]
    assert stop["detail"]["members-after"][replaced] == f"{replaced}-r1"
    assert r.check("faults")["fault-count"] == 1 and r.check("mutex")["valid"] is True


@needs_redis
@pytest.mark.servers
@pytest.mark.slow
def test_a_redis_primary_is_not_removed_so_the_fault_is_not_injected(
        store: Path, tmp_path: Path) -> None:
    """Sentinel's primary changes by a failover, not a removal: refused, not injected."""
    r = run(store, "--db", "redis-sentinel", "--replay", str(schedule(
        tmp_path, Step(1.0, "membership", "leader", 2.0))), "--time-limit", "12", "--seed", "1")
    assert r.code == 2, r.output
    faults = r.check("faults")
    assert faults["not-injected-count"] == 1, faults
    assert "is the primary" in faults["not-injected"][0]["error"]


def test_a_fault_aimed_at_a_follower_is_a_target_the_command_line_takes() -> None:
    """``follower`` is a node role of the nemeses (nemesis.base.node_target) and explore's;
    ``--nemesis membership-replace:follower`` was refused as an unknown target."""
    assert parse_nemeses("failover,membership-replace:follower") == [
        "failover", "membership-replace:follower"]
    assert nemesis_target("pause-node:follower") == "follower"
    with pytest.raises(UsageError, match="unknown target 'followers'"):
        parse_nemeses("pause-node:followers")
