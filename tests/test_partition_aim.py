"""A partition aimed at the holder makes sure it cut the holder off (CI: a one-way cut meant
for the holder landed twice, 10 and 4 ms late, on a client that had just released, and no
cut-off holder released while cut): a miss is healed and the cut made again for the holder
then, a bounded number of times, and the misses are the fault's detail."""

from __future__ import annotations

import random
import threading
from types import SimpleNamespace
from typing import Any

import pytest

from nemesis import partition
from nemesis.partition import Partition


class Live:
    """Holds as the journals show them: ``held`` once the first read has seen ``before``
    (a grant right after the fault is due, by default: ``before=None`` holds ``held`` all
    along), then ``after_cuts``, one entry a cut, as if holds ended while it was installed."""

    def __init__(self, held: dict[int, float], after_cuts: list[dict[int, float]],
                 before: dict[int, float] | None = {}) -> None:  # noqa: B006 (never changed)
        self.held = held if before is None else dict(before)
        self.granted = held
        self.after_cuts = after_cuts
        self.waiting = [2]
        self.reads = 0
        self.at = 1.0  # seconds into the run now

    def now(self) -> float:
        return self.at

    def cut(self) -> None:
        if self.after_cuts:
            self.held = self.after_cuts.pop(0)

    def holds(self) -> dict[int, float]:
        out = dict(self.held)
        self.reads += 1
        if self.reads == 1:
            self.held = dict(self.granted)
        return out

    def holders(self) -> list[int]:
        return sorted(self.held, key=self.held.__getitem__)

    def held_since(self, process: int) -> float | None:
        return self.held.get(process)

    def waiters(self) -> list[int]:
        return list(self.waiting)


class Cluster:
    def __init__(self, live: Live) -> None:
        self.live = live
        self.log: list[tuple[str, list[tuple[str, str]]]] = []

    def cut(self, links: Any) -> None:
        self.log.append(("cut", list(links)))
        self.live.cut()

    def cut_oneway(self, links: Any) -> None:
        self.log.append(("oneway", list(links)))
        self.live.cut()

    def heal(self) -> None:
        self.log.append(("heal", []))


def context(live: Live, **options: Any) -> Any:
    clients = SimpleNamespace(processes=[0, 1, 2, 3], alive=lambda: [0, 1, 2, 3], doomed=set())
    return SimpleNamespace(live=live, cluster=Cluster(live), nodes=[SimpleNamespace(name="n1")],
                           clients=clients, options=options, rng=random.Random(1),
                           finishing=threading.Event(), ttl=2.0)


def nemesis(alias: str) -> Partition:
    return Partition() if alias == "partition" else Partition.alias(alias)()


@pytest.mark.parametrize(("alias", "kind"), [("partition", "cut"),
                                             ("partition-oneway", "oneway")])
def test_a_cut_that_missed_the_holder_is_made_again_for_the_holder_then(
        alias: str, kind: str) -> None:
    """1 holds at the pick and has let go once the cut is in; 3 holds then, and still holds
    once its own cut is in."""
    ctx = context(Live({1: 0.5}, [{3: 0.9}, {3: 0.9}]))
    nem = nemesis(alias)
    targets = nem.select(ctx, None)
    assert targets == ["c1"]
    nem.start(ctx, targets)
    assert targets == ["c3"]
    assert [k for k, _ in ctx.cluster.log] == [kind, "heal", kind]
    assert {c for _, links in ctx.cluster.log for link in links for c in link} >= {"c3"}
    assert all("c1" not in link for link in ctx.cluster.log[-1][1])
    assert nem.detail() is not None and nem.detail()["missed"] == [1]  # type: ignore[index]
    assert nem.expect(ctx, targets) == {"cut-off": [3]}


def test_a_cut_that_met_its_hold_is_made_once() -> None:
    ctx = context(Live({1: 0.5}, [{1: 0.5}]))
    nem = Partition()
    targets = nem.select(ctx, None)
    nem.start(ctx, targets)
    assert targets == ["c1"] and [k for k, _ in ctx.cluster.log] == ["cut"]
    assert nem.detail() is None


def test_nobody_holding_after_a_miss_keeps_the_cut_and_notes_the_miss() -> None:
    ctx = context(Live({1: 0.5}, [{}]))
    nem = Partition()
    targets = nem.select(ctx, None)
    nem.start(ctx, targets)
    assert targets == ["c1"] and [k for k, _ in ctx.cluster.log] == ["cut"]
    assert nem.detail() == {"missed": [1]}


def test_cutting_again_is_bounded() -> None:
    """Every holder lets go before its cut lands: RETARGETS more cuts, then it stops."""
    after = [{p + 2: float(p + 1)} for p in range(partition.RETARGETS + 3)]
    ctx = context(Live({1: 0.0}, after))
    nem = Partition()
    targets = nem.select(ctx, None)
    nem.start(ctx, targets)
    cuts = [k for k, _ in ctx.cluster.log if k == "cut"]
    assert len(cuts) == partition.RETARGETS + 1
    assert len(nem.detail()["missed"]) == partition.RETARGETS  # type: ignore[index]


@pytest.mark.parametrize("alias", ["partition", "partition-oneway"])
def test_a_cut_of_the_holder_strikes_at_a_fresh_grant(alias: str) -> None:
    """1 has held since 0.5 s when the cut is due; 3 is granted at 0.9 s: the cut meets 3's
    whole hold, not the rest of 1's."""
    live = Live({1: 0.5, 3: 0.9}, [], before={1: 0.5})
    assert nemesis(alias).select(context(live), None) == ["c3"]


def test_a_hold_begun_within_a_quarter_of_the_ttl_is_fresh_and_cut_at_once(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """A hold begun 0.4 s before the cut was due is not passed over for the next (which may
    come after the run). Begun 1.5 s before (over a quarter of the 2 s TTL) it is not fresh:
    no other begins, and the wait ends on the hold in progress."""
    monkeypatch.setattr(partition, "FRESH_WAIT", 0.05)
    live = Live({1: 0.6}, [], before=None)
    assert Partition().select(context(live), None) == ["c1"] and live.reads == 2
    live = Live({1: 0.6}, [], before=None)
    live.at = 2.1
    assert Partition().select(context(live), None) == ["c1"] and live.reads > 2


def test_no_fresh_grant_in_the_wait_cuts_the_holder_in_progress(
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(partition, "FRESH_WAIT", 0.05)
    live = Live({1: 0.5}, [], before=None)
    live.at = 3.0  # 2.5 s into its hold
    assert Partition().select(context(live), None) == ["c1"]
    assert live.reads > 2  # it looked for a fresh grant before it fell back


def test_a_cut_aimed_at_a_waiter_is_not_checked_against_a_hold() -> None:
    ctx = context(Live({1: 0.5}, [{}]))
    nem = Partition()
    targets = nem.select(ctx, "waiter")
    assert targets == ["c2"]
    nem.start(ctx, targets)
    assert [k for k, _ in ctx.cluster.log] == ["cut"] and nem.detail() is None


def test_a_waiter_granted_before_its_cut_landed_is_a_miss_and_another_waiter_is_cut(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """The longest waiter is next in a queue lock's line: c2 is granted as the cut goes in
    (CI: ZooKeeper's session of that fresh holder expired under the cut, and a lock test of
    waiters saw an overlap); the cut is healed and made again for a waiter still waiting."""
    monkeypatch.setattr(partition, "SETTLE_S", 0.0)
    live = Live({1: 0.5}, [{1: 0.5, 2: 0.9}])
    ctx = context(live)
    nem = Partition()
    targets = nem.select(ctx, "waiter")
    assert targets == ["c2"]
    live.waiting = [3]  # c2 holds once the cut is in; c3 waits
    nem.start(ctx, targets)
    assert targets == ["c3"] and [k for k, _ in ctx.cluster.log] == ["cut", "heal", "cut"]
    assert all("c2" not in link for link in ctx.cluster.log[-1][1])
    assert nem.detail() == {"missed": [2]}
    live.waiting = []  # a miss with no waiter left: the cut stays, the miss is said
    ctx = context(Live({1: 0.5}, [{1: 0.5, 2: 0.9}]))
    ctx.live.waiting = [2]
    nem = Partition()
    targets = nem.select(ctx, "waiter")
    ctx.live.waiting = []
    monkeypatch.setattr(partition, "HOLDER_WAIT", 0.0, raising=False)
    nem.start(ctx, targets)
    assert [k for k, _ in ctx.cluster.log][-1] == "cut" and nem.detail()["missed"] == [2]


class Leader:
    """The DB's leader probe (``HasLeader``): n2 leads."""

    def leader(self, nodes: Any) -> str | None:
        return "n2"


def test_the_leader_cut_off_with_the_holder_on_its_side() -> None:
    """``partition-leader:holder``: the leader cut from the other nodes, and the holder from
    them too, its link to the leader kept: its session lives only on a leader about to step
    down. A holder that let go before the cut landed is replaced by the holder then."""
    ctx = context(Live({1: 0.5}, [{3: 0.9}, {3: 0.9}], before=None))
    ctx.nodes = [SimpleNamespace(name=n) for n in ("n1", "n2", "n3")]
    ctx.db = Leader()
    nem = nemesis("partition-leader")
    nem.check_target("holder")
    targets = nem.select(ctx, "holder")
    assert targets == ["c1", "n2"]
    nem.start(ctx, targets)
    assert targets == ["c3", "n2"]
    assert [k for k, _ in ctx.cluster.log] == ["cut", "heal", "cut"]
    assert sorted(ctx.cluster.log[-1][1]) == [("c3", "n1"), ("c3", "n3"), ("n1", "n2"),
                                              ("n2", "n3")]
    assert nem.expect(ctx, targets) == {"cut-off": [3]}
    assert nem.detail() == {"cut": [list(c) for c in ctx.cluster.log[-1][1]], "missed": [1]}
    plain = nemesis("partition-leader")
    assert plain.select(ctx, None) == ["n2"]  # no target: the leader alone, as before
    with pytest.raises(ValueError, match="waiter"):
        nem.check_target("waiter")
