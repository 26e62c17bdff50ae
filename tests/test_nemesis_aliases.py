"""Every old nemesis name still works: each alias of a family (``partition-halves`` is the
``partition`` family with the shape ``halves``; ``clock-back`` the ``clock`` family with the
pattern ``back``; ``pause-leader``, ``kill-majority-delayed``; and the new
``membership-replace``) loads by its name, keeps its name in the history, is refused where
it was refused (the same one line), and picks its targets and cuts as it did."""

from __future__ import annotations

import random
import threading
from typing import Any

import pytest

from harness.controller.registry import Registry
from harness.controller.spec import TestSpec
from harness.core.cluster import NemesisContext, Node
from harness.core.errors import UsageError
from harness.core.roles import load_object
from nemesis import base, partition
from nemesis.clock import Clock
from nemesis.kill_majority import KillMajority
from nemesis.membership import MembershipChange
from nemesis.partition import Partition
from nemesis.process_faults import PauseNode

REG = Registry(entry_points=False)
LOCK = {"etcd": "etcd", "redis": "redis-setnx", "postgres": "pg-advisory"}
REPLICATING = "a db that replicates between its nodes (redis-sentinel, zookeeper, etcd)"

# alias: (family, db, the environment capability missing (None: all there), options, refusal
# (None: it runs there))
REFUSED = {
    "partition-halves": (Partition, "redis", None, {},
                         f"--nemesis partition-halves needs {REPLICATING}, not 'redis'"),
    "partition-one": (Partition, "postgres", None, {},
                      f"--nemesis partition-one needs {REPLICATING}, not 'postgres'"),
    "partition-ring": (Partition, "redis", None, {},
                       f"--nemesis partition-ring needs {REPLICATING}, not 'redis'"),
    "partition-bridge": (Partition, "etcd", "Iptables", {},
                         "--nemesis partition-bridge: no Iptables"),
    "partition-leader": (Partition, "redis", None, {},
                         "--nemesis partition-leader needs a db with a leader (redis-sentinel, "
                         "zookeeper, etcd), not 'redis'"),
    "partition-minority": (Partition, "etcd", "ClientLinks", {},
                           "--nemesis partition-minority: no ClientLinks"),
    "partition-oneway": (Partition, "etcd", "PacketRules", {"oneway": "out"},
                         "--nemesis partition-oneway: no PacketRules"),
    "clock-back": (Clock, "etcd", None, {"clock-pattern": "rate"},
                   "--nemesis clock-back: clock-back is clock-pattern back, not rate (use "
                   "--nemesis clock --nemesis-opt clock-pattern=rate)"),
    "clock-strobe": (Clock, "etcd", None, {"clock-id": "both"},
                     "--nemesis clock-strobe: clock-pattern strobe with a negative offset or a "
                     "flip back sets the monotonic clock back, which no clock does; use "
                     "clock-id wall"),
    "pause-leader": (PauseNode, "postgres", None, {},
                     "--nemesis pause-leader needs a db with a leader (redis-sentinel, "
                     "zookeeper, etcd), not 'postgres'"),
    "kill-majority-delayed": (KillMajority, "redis", None, {}, None),
    "membership-replace": (MembershipChange, "etcd", None, {"member-change": "re-add-empty"},
                           "--nemesis membership-replace: membership-replace is member-change "
                           "replace, not re-add-empty (use --nemesis membership --nemesis-opt "
                           "member-change=re-add-empty)"),
}


def aliases() -> list[str]:
    out = []
    for name in REG.names("nemeses"):
        family = load_object(REG.entry("nemeses", name).target)
        if name in getattr(family, "aliases", {}):
            out.append(name)
    return out


def check(name: str, db: str, missing: str | None, options: dict[str, Any]) -> None:
    """The run's spec resolved (the roles checked against each other), then checked against an
    environment missing the capability named ``missing``."""
    spec = TestSpec(db=db, lock=LOCK[db], nemesis=[name], nemesis_options=dict(options), seed=1)
    spec.resolve(REG).check(REG, environment=lambda cap: f"no {cap.__name__}"
                            if cap.__name__ == missing else None)


def test_the_registry_s_aliases_are_the_old_names() -> None:
    assert sorted(aliases()) == sorted(REFUSED)


@pytest.mark.parametrize("name", sorted(REFUSED))
def test_an_alias_loads_by_its_old_name_and_is_refused_where_it_was(name: str) -> None:
    family, db, missing, options, refusal = REFUSED[name]
    cls = REG.load("nemeses", name)
    assert issubclass(cls, family) and cls is not family
    assert cls.name == name and cls().name == name  # the f its faults carry in a history
    if refusal is None:
        check(name, db, missing, options)
    else:
        with pytest.raises(UsageError) as e:
            check(name, db, missing, options)
        assert str(e.value) == refusal
    check(name, "etcd", None, {})  # and runs where it ran: etcd has everything these need
    roles = {"client:1": "client:N", "node:n1": "node:NAME", "majority": "majority"}
    wrong = next(t for t, role in roles.items() if role not in cls.targets)
    with pytest.raises(ValueError, match=f"nemesis {name} cannot target '{wrong}'"):
        cls.check_target(wrong)


# select on a fake context -----------------------------------------------------------------
class Clients:
    processes = [0, 1, 2]
    doomed: set[int] = set()

    def alive(self) -> list[int]:
        return list(self.processes)


class Live:
    def holders(self) -> list[int]:
        return [1]

    def waiters(self) -> list[int]:
        return [2]

    def held_since(self, p: int) -> float:
        return 1.0

    def holds(self) -> dict[int, float]:
        return {1: 1.0}

    def now(self) -> float | None:
        return None


@pytest.fixture(autouse=True)
def no_hold_begins_for_long(monkeypatch: pytest.MonkeyPatch) -> None:
    """The fake's one hold never ends: a fault aimed at a hold that begins takes it after a
    short wait, not after :data:`nemesis.base.HOLDER_WAIT`."""
    monkeypatch.setattr(base, "HOLDER_WAIT", 0.05)
    monkeypatch.setattr(partition, "FRESH_WAIT", 0.05)


class Cluster:
    def __init__(self) -> None:
        self.cut_both: list[tuple[str, str]] = []
        self.cut_one: list[tuple[str, str]] = []

    def cut(self, links: list[tuple[str, str]]) -> None:
        self.cut_both.extend(links)

    def cut_oneway(self, links: list[tuple[str, str]]) -> None:
        self.cut_one.extend(links)


class Leader:
    name = "fake"

    def leader(self, nodes: list[Node]) -> str:
        return "n2"


NODES = [f"n{i}" for i in range(1, 6)]


def started(name: str, options: dict[str, Any] | None = None, target: str | None = None
            ) -> tuple[Any, list[str], Cluster]:
    cluster = Cluster()
    ctx = NemesisContext(cluster, [Node(n, "127.9.0.1", 1) for n in NODES],  # type: ignore[arg-type]
                         Clients(), Live(), random.Random(7), 2.0, db=Leader(),  # type: ignore[arg-type]
                         options=dict(options or {}), finishing=threading.Event())
    nem = REG.load("nemeses", name)()
    targets = nem.select(ctx, target)
    assert targets is not None
    nem.start(ctx, targets)
    return nem, targets, cluster


def across(sides: list[str]) -> list[tuple[str, str]]:
    """Every pair of nodes on different sides of ``["n1|n2", "n3|n4|n5"]``."""
    groups = [s.split("|") for s in sides]
    return sorted(tuple(sorted((a, b))) for i, g in enumerate(groups)  # type: ignore[misc]
                  for h in groups[i + 1:] for a in g for b in h)


@pytest.mark.parametrize("name", ["partition-halves", "partition-one", "partition-bridge"])
def test_a_node_partition_alias_cuts_between_its_sides(name: str) -> None:
    nem, sides, cluster = started(name)
    assert sorted(n for s in sides for n in s.split("|")) == NODES
    assert len(sides) == 2 if name != "partition-bridge" else len(sides) == 1
    if name != "partition-bridge":
        assert sorted(cluster.cut_both) == across(sides) and not cluster.cut_one
    assert nem.detail() == {"cut": [list(c) for c in cluster.cut_both]}
    assert nem.expect(None, sides) is None


def test_the_ring_alias_leaves_each_node_a_majority() -> None:
    _, sides, cluster = started("partition-ring")
    assert sides == ["|".join(NODES)]  # one component: nobody is cut off from everybody
    seen = {n: {n} for n in NODES}
    for n in NODES:
        seen[n] |= {m for m in NODES if m != n and tuple(sorted((n, m))) not in cluster.cut_both}
    assert all(len(s) == 3 for s in seen.values()) and len({frozenset(s) for s in
                                                            seen.values()}) == 5


def test_the_leader_alias_cuts_the_leader_from_the_other_nodes() -> None:
    nem, targets, cluster = started("partition-leader")
    assert targets == ["n2"]
    assert sorted(cluster.cut_both) == [("n1", "n2"), ("n2", "n3"), ("n2", "n4"), ("n2", "n5")]
    assert nem.detail() == {"cut": [list(c) for c in cluster.cut_both]}


def test_the_minority_alias_cuts_two_of_five_from_nodes_and_clients() -> None:
    nem, cut, cluster = started("partition-minority")
    assert len(cut) == 2 and set(cut) < set(NODES)
    others = [n for n in NODES if n not in cut] + ["c0", "c1", "c2"]
    assert sorted(cluster.cut_both) == sorted((a, b) for a in cut for b in others)
    assert nem.detail() == {"cut-off": cut}


@pytest.mark.parametrize(("oneway", "flip"), [({}, False), ({"oneway": "out"}, True)])
def test_the_oneway_alias_cuts_one_direction_of_the_holder(oneway: dict[str, str],
                                                           flip: bool) -> None:
    nem, targets, cluster = started("partition-oneway", oneway)
    assert targets == ["c1"] and not cluster.cut_both
    want = [(n, "c1") for n in NODES]
    assert cluster.cut_one == ([(b, a) for a, b in want] if flip else want)
    assert nem.expect(None, targets) == {"cut-off": [1]}


def test_the_oneway_alias_aims_at_the_leader_too() -> None:
    nem, targets, cluster = started("partition-oneway", {}, "leader")
    assert targets == ["n2"] and cluster.cut_one == [(n, "n2") for n in NODES if n != "n2"]
    assert nem.expect(None, targets) is None


@pytest.mark.parametrize(("name", "pattern"), [("clock-back", "back"),
                                               ("clock-strobe", "strobe")])
def test_a_clock_alias_presets_its_pattern_and_picks_a_majority(name: str, pattern: str) -> None:
    cls = REG.load("nemeses", name)
    assert cls.pattern({}) == pattern
    ctx = NemesisContext(None, [Node(n, "127.9.0.1", 1) for n in NODES],  # type: ignore[arg-type]
                         Clients(), Live(), random.Random(7), 2.0,  # type: ignore[arg-type]
                         finishing=threading.Event())
    chosen = cls().select(ctx)
    assert chosen is not None and len(chosen) == 3 and set(chosen) < set(NODES)


def test_pause_leader_freezes_the_leader() -> None:
    cluster = Cluster()
    cls = REG.load("nemeses", "pause-leader")
    assert cls.default_target == "leader"
    ctx = NemesisContext(cluster, [Node(n, "127.9.0.1", 1) for n in NODES],  # type: ignore[arg-type]
                         Clients(), Live(), random.Random(7), 2.0, db=Leader())  # type: ignore[arg-type]
    assert cls().select(ctx) == ["n2"]


def test_kill_majority_delayed_stays_down_past_the_ttl() -> None:
    cls = REG.load("nemeses", "kill-majority-delayed")
    ctx = NemesisContext(None, [Node(n, "127.9.0.1", 1) for n in NODES],  # type: ignore[arg-type]
                         Clients(), Live(), random.Random(7), 2.0)  # type: ignore[arg-type]
    assert cls().duration(ctx) == 3.0 and REG.load("nemeses", "kill-majority")().duration(ctx) == 0
    chosen = cls().select(ctx)
    assert chosen is not None and len(chosen) == 3 and set(chosen) < set(NODES)


# the family with its shape as an option --------------------------------------------------
@pytest.mark.parametrize("shape", ["halves", "leader", "minority", "oneway"])
def test_the_family_with_a_shape_option_cuts_as_that_shape_s_alias(shape: str) -> None:
    family, targets, cluster = started("partition", {"partition-shape": shape})
    member, member_targets, member_cluster = started(f"partition-{shape}")
    assert family.name == "partition"  # the history keeps the name the run used
    assert (targets, cluster.cut_both, cluster.cut_one) == (
        member_targets, member_cluster.cut_both, member_cluster.cut_one)
    assert family.detail() == {"shape": shape, **(member.detail() or {})}


def test_the_family_requires_what_its_shape_requires() -> None:
    assert [c.__name__ for c in REG.nemesis_requires("partition", {})] == [
        "Iptables", "ClientLinks"]
    assert [c.__name__ for c in REG.nemesis_requires(
        "partition", {"partition-shape": "halves"})] == ["Iptables", "Replication"]
    with pytest.raises(UsageError) as e:
        check("partition", "redis", None, {"partition-shape": "halves"})
    assert str(e.value) == f"--nemesis partition needs {REPLICATING}, not 'redis'"


def test_an_alias_refuses_another_shape_and_a_step_cannot_change_it() -> None:
    with pytest.raises(UsageError) as e:
        check("partition-halves", "etcd", None, {"partition-shape": "ring"})
    # an alias is its shape: it has no shape option to give (the run refuses it before start)
    assert str(e.value) == ("--nemesis-opt 'partition-shape': not an option of the nemeses of "
                            "this run (partition-halves) (options: none)")
    step = Partition.check_step({}, {"partition-shape": "one"})
    assert step is not None and step.startswith("params partition-shape = 'one'")
    assert Partition.check_step({"partition-shape": "one"}, {"partition-shape": "one"}) is None
