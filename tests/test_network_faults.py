"""The network faults without servers: what is refused before a run starts (one line, exit 64),
how a schedule holds conditions in the background, what the history records of each fault, and
the report's fault lanes."""

from __future__ import annotations

import dataclasses
import random
import re
import threading
import time
from pathlib import Path
from typing import Any, ClassVar

import pytest

from dbs.redis import RedisDB
from harness.controller.faults import FaultRunner, generate
from harness.controller.spec import TestSpec
from harness.core.cluster import NemesisContext, Node
from harness.core.errors import UsageError
from harness.core.journal import JournalWriter, read_journal
from harness.core.options import Option
from harness.core.schedule import Schedule, Step, from_dict
from harness.presentation.report.model import fault_windows
from nemesis.delay import Delay
from nemesis.loss import Loss
from nemesis.stall_grant import StallGrant
from tests.harness_runs import harness


@pytest.mark.parametrize(("args", "message"), [
    (["--nemesis", "delay", "--nemesis-opt", "delay=-0.1"],
     "--nemesis-opt delay='-0.1': must be at least 0"),
    (["--nemesis", "loss", "--nemesis-opt", "loss=1.5"],
     "--nemesis-opt loss='1.5': must be at most 1"),
    (["--nemesis", "loss", "--nemesis-opt", "loss=0"], "--nemesis-opt loss='0': must be at least"),
    (["--nemesis", "stall-grant", "--nemesis-opt", "stall=1"],
     "--nemesis stall-grant: stall=1 is not longer than --ttl 2"),
    (["--nemesis", "stall-grant", "--op-timeout", "2"],
     "--op-timeout 2: --nemesis stall-grant needs the client to wait at least 4 s"),
    (["--db", "zookeeper", "--nemesis", "stall-grant"],
     "--nemesis stall-grant: zookeeper does not speak Redis's protocol, the only one in which "
     "the link layer tells a grant from another reply"),
    (["--nemesis", "lag-replication"], "--nemesis lag-replication needs a db that replicates"),
    (["--db", "redis-masters", "--nemesis", "delay", "--nemesis-opt", "delay-links=peers"],
     "--nemesis delay: redis-masters's nodes do not talk to each other"),
    (["--db", "redis-masters", "--nemesis", "lag-replication"],
     "--nemesis lag-replication needs a db that replicates between its nodes (redis-sentinel, "
     "zookeeper, etcd), not 'redis-masters'"),
    (["--nemesis", "loss", "--nemesis-opt", "loss-links=peers"],
     "--nemesis loss: redis's nodes do not talk to each other"),
    (["--nemesis", "delay", "--nemesis-opt", "delay-direction=sideways"],
     "expected one of both, up, down"),
    (["--nemesis", "partition-oneway", "--nemesis-opt", "oneway=both"],
     "expected one of in, out"),
    (["--links", "tunnel"], "--links 'tunnel': use direct or proxy"),
    (["--op-timeout", "-1"], "--op-timeout must be a positive number"),
])
def test_bad_network_fault_options_are_one_line_and_exit_64(args: list[str], message: str
                                                           ) -> None:
    proc = harness("run", *args, "--time-limit", "1")
    assert proc.returncode == 64, proc.stderr
    assert proc.stderr.count("\n") == 1 and message in proc.stderr, proc.stderr


def test_the_op_timeout_follows_what_the_stall_needs() -> None:
    spec = TestSpec(nemesis=["stall-grant"]).validate()
    assert spec.op_timeout == 4.0  # a 3 s stall at ttl 2, plus a second
    spec = TestSpec(nemesis=["stall-grant"], nemesis_options={"stall": "5"}).validate()
    assert spec.op_timeout == 6.0
    assert TestSpec(nemesis=["pause"]).validate().op_timeout == 1.0
    assert TestSpec(nemesis=["pause"], op_timeout=2.5).validate().op_timeout == 2.5
    assert StallGrant.refuse(RedisDB(), {"stall": 2.5}, 2.0, None) is None


def test_the_spec_carries_the_locks_own_wait_for_a_reply_and_whether_release_waits() -> None:
    redlock = TestSpec(db="redis-masters", lock="redlock", nemesis=["delay"]).validate()
    assert redlock.request_timeout == 0.1 and redlock.release_waits is True  # TTL / 20
    assert TestSpec(db="redis-masters", lock="redlock", ttl=10.0, nemesis=["delay"]
                    ).validate().request_timeout == 0.5
    assert TestSpec(nemesis=["delay"]).validate().request_timeout == 1.0  # its op timeout
    stalled = TestSpec(nemesis=["stall-grant"]).validate()
    assert stalled.request_timeout == stalled.op_timeout == 4.0


class NoWaitLock:
    """A lock that says it waits no time at all for a reply (a plugin's mistake)."""

    dbs = ("redis",)

    def acquire(self, timeout: float) -> None:
        return None

    def release(self, grant: Any) -> bool:
        return True

    @classmethod
    def request_timeout(cls, ttl: float, op_timeout: float, options: Any) -> float:
        return 0.0


def test_a_lock_whose_wait_for_a_reply_is_no_time_is_one_line() -> None:
    with pytest.raises(UsageError, match=re.escape(
            "lock tests.test_network_faults:NoWaitLock: request_timeout must be a positive "
            "number of seconds, got 0.0")):
        TestSpec(lock="tests.test_network_faults:NoWaitLock", nemesis=["delay"]).validate()


def delay_with(wait: float, **options: Any) -> tuple[dict[str, Any], dict[str, Any] | None]:
    ctx = dataclasses.replace(context(), op_timeout=wait, options=options)
    nem = Delay()
    return nem.shape(ctx), nem.expect(ctx, ["c0", "c3", "n1"])


def test_the_default_delay_is_the_locks_own_so_that_ops_complete_under_it() -> None:
    shape, expect = delay_with(0.1)  # Redlock: 0.1 s a master
    assert (shape["delay"], shape["jitter"]) == (0.02, 0.01)  # round trips of 20-60 ms
    assert expect == {"slowed": {"processes": [0, 3], "at-least": 0.02}, "completes": [0, 3]}
    shape, _ = delay_with(1.0)  # the others: as before
    assert (shape["delay"], shape["jitter"]) == (0.2, 0.1)
    shape, _ = delay_with(4.0)  # a long wait does not make the delay longer
    assert (shape["delay"], shape["jitter"]) == (0.2, 0.1)


def test_an_explicit_delay_wins_over_the_locks_own() -> None:
    shape, expect = delay_with(0.1, delay=0.2)
    assert (shape["delay"], shape["jitter"]) == (0.2, 0.1)
    assert expect == {"slowed": {"processes": [0, 3], "at-least": 0.2}, "completes": [0, 3]}
    shape, _ = delay_with(0.1, **{"delay-jitter": 0.0})
    assert (shape["delay"], shape["jitter"]) == (0.02, 0.0)
    _, expect = delay_with(0.1, delay=0.001)  # too small to prove slowness; still to complete
    assert expect == {"completes": [0, 3]}
    assert Delay().parameters(dataclasses.replace(context(), op_timeout=0.1)) == {
        "delay": 0.02, "delay-jitter": 0.01}


def test_a_lossy_link_claims_its_clients_ops_complete_under_it() -> None:
    assert Loss().expect(context(), ["c0", "c3", "n1"]) == {"completes": [0, 3]}
    assert Loss().expect(context(), ["n1", "n2"]) is None  # the peers: no client to judge


# schedules -------------------------------------------------------------------------------------
class Toy:
    """A nemesis that only journals: a condition or not."""

    name: ClassVar[str] = "toy"
    requires: ClassVar[tuple[type, ...]] = ()
    targets: ClassVar[tuple[str, ...]] = ()
    condition: ClassVar[bool] = False
    options: ClassVar[dict[str, Option]] = {"toy-level": Option(int, 3, "how much")}

    def __init__(self, name: str, condition: bool = False) -> None:
        self.name = name  # type: ignore[misc]
        self.condition = condition  # type: ignore[misc]
        self.on = threading.Event()
        self.overlapped = False

    def setup(self, ctx: NemesisContext) -> None: ...

    def select(self, ctx: NemesisContext, target: str | None = None) -> list[str]:
        return ["n1"]

    def duration(self, ctx: NemesisContext) -> float:
        return 0.2

    def start(self, ctx: NemesisContext, targets: list[str]) -> None:
        self.on.set()

    def stop(self, ctx: NemesisContext, targets: list[str]) -> None:
        self.on.clear()

    def teardown(self, ctx: NemesisContext) -> None:
        self.on.clear()

    def detail(self) -> dict[str, Any] | None:
        return None


def context() -> NemesisContext:
    return NemesisContext(cluster=None, nodes=[Node("n1", "127.0.0.2", 1)],  # type: ignore[arg-type]
                          clients=None, live=None, rng=random.Random(1), ttl=2.0)  # type: ignore[arg-type]


def test_conditions_mixed_with_faults_are_held_in_the_background() -> None:
    nemeses = {"lag": Toy("lag", condition=True), "cut": Toy("cut")}
    s = generate(["lag", "cut"], nemeses, context(), 10.0, random.Random(3))  # type: ignore[arg-type]
    background = [x for x in s.steps if x.background]
    assert [x.fault for x in background] == ["lag"]
    assert background[0].at + background[0].duration == pytest.approx(10.0, abs=0.01)
    assert {x.fault for x in s.steps if not x.background} == {"cut"}
    assert all(x.at > background[0].at for x in s.steps if not x.background)
    # a condition alone comes and goes like any fault
    alone = generate(["lag"], nemeses, context(), 10.0, random.Random(3))  # type: ignore[arg-type]
    assert len(alone.steps) > 1 and not any(x.background for x in alone.steps)
    # and a schedule keeps it as data
    assert from_dict(s.to_dict()) == s
    with pytest.raises(UsageError, match="background must be true or false"):
        from_dict({"steps": [{"at": 1, "fault": "lag", "background": "yes"}]})


def test_a_background_step_runs_under_the_others_and_each_records_its_parameters(
        tmp_path: Path) -> None:
    lag, cut = Toy("lag", condition=True), Toy("cut")
    seen_together = []
    original = cut.start

    def start(ctx: NemesisContext, targets: list[str]) -> None:
        seen_together.append(lag.on.is_set())
        original(ctx, targets)

    cut.start = start  # type: ignore[method-assign]
    schedule = Schedule((Step(0.05, "lag", duration=1.0, background=True),
                         Step(0.2, "cut", duration=0.2), Step(0.5, "cut", duration=0.2,
                                                              params={"toy-level": 7})))
    journal = JournalWriter(tmp_path / "nemesis.jsonl", "nemesis", time.monotonic_ns())
    runner = FaultRunner({"lag": lag, "cut": cut}, schedule, context(), journal)  # type: ignore[dict-item]
    runner.start()
    time.sleep(0.4)
    assert "lag(n1)" in runner.describe_active()
    time.sleep(1.0)
    runner.finish()
    journal.close()
    assert seen_together == [True, True]
    ops = read_journal(tmp_path / "nemesis.jsonl")
    starts = [o for o in ops if o["value"] == "start" and o["type"] == "info"]
    assert [(o["f"], o.get("background", False), o["params"]) for o in starts] == [
        ("lag", True, {"toy-level": 3}), ("cut", False, {"toy-level": 3}),
        ("cut", False, {"toy-level": 7})]
    windows = fault_windows([{"index": i, **o} for i, o in enumerate(ops)],
                            max(o["time"] for o in ops))
    assert [(w["f"], w["row"]) for w in windows] == [("lag", 0), ("cut", 1), ("cut", 1)]
    assert windows[2]["label"] == "cut n1 (toy-level=7)"


# peers through doors -------------------------------------------------------------------------
def test_zookeeper_names_the_other_servers_by_their_doors() -> None:
    from dbs.zookeeper import zoo_cfg

    cluster = [Node(f"n{i}", f"127.0.0.{i + 1}", 2181) for i in (1, 2, 3)]
    doors = {(n.name, port): (n.host.replace("127.0.0", "127.0.4"), port)
             for n in cluster for port in (2888, 3888)}
    cfg = zoo_cfg(cluster[1], cluster, Path("/node"), doors)
    assert "server.1=127.0.4.2:2888:3888" in cfg  # the others by their doors
    assert "server.2=127.0.0.3:2888:3888" in cfg  # itself as it binds
    assert "server.3=127.0.4.4:2888:3888" in cfg


def test_etcd_members_agree_on_door_urls() -> None:
    import json

    from dbs.etcd import etcd_config

    cluster = [Node(f"n{i}", f"127.0.0.{i + 1}", 2379) for i in (1, 2, 3)]
    doors = {(n.name, 2380): (n.host.replace("127.0.0", "127.0.4"), 2380) for n in cluster}
    configs = [json.loads(etcd_config(n, cluster, Path("/n"), doors)) for n in cluster]
    assert len({c["initial-cluster"] for c in configs}) == 1
    assert configs[0]["initial-cluster"].startswith("n1=http://127.0.4.2:2380,")
    assert configs[1]["initial-advertise-peer-urls"] == "http://127.0.4.3:2380"
    assert configs[1]["listen-peer-urls"] == "http://127.0.0.3:2380"
