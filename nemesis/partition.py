"""Network partitions (iptables through the cluster's node operations): one family, ``partition``,
whose shape is data (option ``partition-shape``, Jepsen's grudge), each shape a row of
:data:`SHAPES`: which links it cuts, what it requires, how the report words it.

- ``holder`` (the default: ``--nemesis partition``): cut a client (by default the holder of a
  fresh grant, one that begins once the cut is due) off from every DB node: its session or
  lease expires while it runs on; the protected resource stays reachable, as a separate
  service would;
- ``halves``, ``one``, ``ring``, ``bridge``: partitions among the DB nodes, built as graphs in
  :mod:`nemesis.topology`. They need a DB whose nodes talk to each other (``Replication``):
  among independent Redis masters or PostgreSQL clusters they would cut links nothing uses, and
  the run would pass having tested nothing;
- ``leader``: cut the current leader (the DB's own probe, ``HasLeader``, right before each
  fault) off from the other nodes; it keeps its clients: a minority leader steps down, the
  majority elects a new one, and its clients move there with their sessions. Target
  ``holder`` (``partition-leader:holder``) puts the lock's holder on the leader's side: its
  session lives on a leader about to step down, expires on the majority mid-hold, and a lock
  that works on makes late writes (what a fencing row must show rejected);
- ``minority``: cut a minority of the DB nodes off from every client and node. The partitions
  among nodes do not touch a lock whose nodes never talk to each other (Redlock's masters): for
  those what matters is which nodes the *clients* reach. Every client still reaches a majority,
  so a quorum lock must stay safe and available;
- ``oneway``: cut one direction only. A client target (``holder`` by default, ``waiter``,
  ``any``, ``client:N``) from every DB node; a node target (``leader``, ``node:n2``) from the
  other nodes. Option ``oneway``: ``in`` (default) nothing reaches the target while everything
  it sends arrives (a cut-off client's release is carried out and it never hears so), ``out``
  the reverse. Over TCP either way ends every exchange, but which side's packets arrive decides
  what the servers saw.

Every old name is an alias presetting its shape: ``partition-halves``, ``partition-one``,
``partition-ring``, ``partition-bridge``, ``partition-leader``, ``partition-minority``,
``partition-oneway``; histories keep the name the run used. A start that cuts a client off
records the claim that it completes no lock op while cut (the ``faults`` checker holds the
history to it); healing removes every cut.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, ClassVar

from harness.core.capabilities import ClientLinks, HasLeader, Iptables, PacketRules, Replication
from harness.core.cluster import NemesisContext, client_name, client_of
from harness.core.fault_run import FaultRun
from harness.core.options import Option
from nemesis import topology
from nemesis.base import (
    CLIENT_TARGETS,
    HOLDER_WAIT,
    RETARGETS,  # noqa: F401 (the bound of its aim, nemesis.base.strike: read here)
    Aim,
    BaseNemesis,
    client_target,
    hit,
    node_target,
    strike,
    wait_for_fresh_grant,
)
from nemesis.topology import cut_off, joined

Cuts = list[tuple[str, str]]
Picked = tuple[list[str], Cuts] | None  # (targets, links to cut), None: nothing to cut now
ONEWAY = "in: nothing reaches the target; out: nothing it sends arrives"


def holder(ctx: NemesisContext, target: str | None) -> Picked:
    chosen = client_target(ctx, target)
    return None if chosen is None else (chosen, cut_off(topology.of(ctx, chosen), chosen))


def among_nodes(kind: str) -> Callable[[NemesisContext, str | None], Picked]:
    def pick(ctx: NemesisContext, target: str | None) -> Picked:
        if len(ctx.nodes) < 2:
            return None
        reach = topology.build(kind, list(topology.of(ctx)), ctx.rng)
        return ["|".join(c) for c in topology.describe(reach)], topology.cuts(reach)
    return pick


def leader(ctx: NemesisContext, target: str | None) -> Picked:
    """The leader cut off from the other nodes; with target ``holder`` the lock's holder on
    its side too (cut from the others, its link to the leader kept): the holder's session
    lives only on a leader about to step down, so it expires on the majority mid-hold."""
    holder = client_target(ctx, "holder") if target == "holder" else []
    found = node_target(ctx, "leader")
    if found is None or holder is None or len(ctx.nodes) < 2:
        return None  # an election under way (or nobody holds): try again at the next turn
    side, everyone = [*holder, *found], list(topology.of(ctx, holder))  # and the rest:
    return side, topology.cuts(joined(everyone, side, [n for n in everyone if n not in side]))


def minority(ctx: NemesisContext, target: str | None) -> Picked:
    if len(ctx.nodes) < 3:
        return None  # no minority to cut: one node of two is half, not a minority
    cut = topology.side(topology.of(ctx), "minority", ctx.rng)
    return cut, cut_off(topology.of(ctx, map(client_name, ctx.clients.processes)), cut)


def oneway(ctx: NemesisContext, target: str | None) -> Picked:
    role = target or "holder"
    nodes = role == "leader" or role.startswith("node:")
    chosen = (node_target if nodes else client_target)(ctx, role)
    if chosen is None:
        return None
    links = cut_off(topology.of(ctx, () if nodes else chosen), chosen)
    inward = str(ctx.options.get("oneway") or "in") == "in"
    return (chosen, [(o, t) if inward else (t, o) for t, o in links]) if links else None


def cutting_off_from_nodes(run: FaultRun) -> str:
    return f"a partition cutting {run.who()} off from the DB nodes {run.when()}"


def cutting_off(run: FaultRun) -> str:
    return f"a partition cutting {run.who()} off {run.when()}"


def sides(run: FaultRun) -> str:
    shown = " | ".join(t.replace("|", ",") for t in run.targets) or "?"
    return f"a partition ({shown}) {run.when()}"


@dataclass(frozen=True)
class Shape:
    """One shape of partition: how it picks its cuts, what it needs, how a report says it."""

    summary: str
    pick: Callable[[NemesisContext, str | None], Picked]
    requires: tuple[type, ...]
    words: Callable[[FaultRun], str]
    record: str | None = "cut"  # the detail key its cuts are recorded under (None: not)
    targets: tuple[str, ...] = ()
    min_nodes: int = 1
    cuts_clients: bool = False
    oneway: bool = False  # cuts one direction (iptables packet rules)
    options: dict[str, Option] = field(default_factory=dict)

    def presets(self, shape: str) -> dict[str, Any]:
        """The class attributes of the alias ``partition-SHAPE``."""
        return {"shape": shape, "summary": self.summary, "requires": self.requires,
                "targets": self.targets, "min_nodes": self.min_nodes,
                "cuts_clients": self.cuts_clients, "options": self.options}


NODES = (Iptables, Replication)
SHAPES: dict[str, Shape] = {
    "holder": Shape("cut the client holding the lock off from every DB node, past the TTL",
                    holder, (Iptables, ClientLinks), cutting_off_from_nodes, record=None,
                    targets=CLIENT_TARGETS, cuts_clients=True),
    **{kind: Shape(f"partition the DB nodes: {kind}", among_nodes(kind), NODES, sides,
                   min_nodes=2) for kind in topology.KINDS},
    "leader": Shape("cut the current leader off from the other DB nodes, past the TTL "
                    "(target holder: the lock's holder with it)", leader,
                    (HasLeader, Iptables), cutting_off, targets=("holder",), min_nodes=2),
    "minority": Shape("cut a minority of DB nodes off from every client and node, past the TTL",
                      minority, (Iptables, ClientLinks), cutting_off, record="cut-off",
                      cuts_clients=True, min_nodes=3),
    "oneway": Shape("one-way partition: nothing reaches the lock holder from the DB nodes, while "
                    "its requests still arrive (or the reverse; or a node from its peers)",
                    oneway, (Iptables, PacketRules, ClientLinks), sides, record="dropped",
                    targets=(*CLIENT_TARGETS, "leader", "node:NAME"), cuts_clients=True,
                    oneway=True,
                    options={"oneway": Option(str, "in", ONEWAY, choices=("in", "out"))}),
}
DEFAULT = "holder"
FRESH_WAIT = 2 * HOLDER_WAIT  # seconds a cut of the holder waits for a fresh grant (a hold)
SETTLE_S = 0.05  # how long a grant's journal line may trail its reply (a waiter's miss)


class Partition(BaseNemesis):
    """The partition family. Its own declarations (targets, ``cuts_clients``, ``min_nodes``)
    are those of its default shape, ``holder``; what a shape requires is checked with the
    run's options (``needs``); an alias (``partition-halves``) declares its shape's."""

    name = "partition"
    summary = f"{SHAPES[DEFAULT].summary} (partition-shape {', '.join(SHAPES)})"
    requires = (Iptables,)
    targets = SHAPES[DEFAULT].targets
    cuts_clients = SHAPES[DEFAULT].cuts_clients
    shape: ClassVar[str | None] = None  # the shape an alias's name presets
    colour = "#0969da"
    options = {
        "partition-shape": Option(str, None, f"{DEFAULT} (default): {', '.join(SHAPES)}",
                                  choices=tuple(SHAPES)),
        "oneway": Option(str, None, f"partition-shape oneway: {ONEWAY} (default in)",
                         choices=("in", "out")),
    }
    aliases = {f"partition-{k}": s.presets(k) for k, s in SHAPES.items() if k != DEFAULT}

    def __init__(self) -> None:
        self._cuts: Cuts = []
        self._shape = self.shape or DEFAULT
        self._aim: Aim | None = None  # the hold a cut aimed at the holder meant to meet
        self._missed: list[int] = []

    @classmethod
    def shape_of(cls, options: dict[str, Any]) -> str:
        return cls.shape or str(options.get("partition-shape") or DEFAULT)

    @classmethod
    def needs(cls, options: dict[str, Any]) -> tuple[type, ...]:
        return SHAPES[cls.shape_of(options)].requires

    @classmethod
    def refuse(cls, db: Any, options: dict[str, Any], ttl: float,
               op_timeout: float | None) -> str | None:
        return cls.preset_conflict("partition-shape", cls.shape, options.get("partition-shape"),
                                   "partition")

    @classmethod
    def check_step(cls, options: dict[str, Any], params: dict[str, Any]) -> str | None:
        """A step cannot change the shape: what it requires was checked before the run."""
        asked = params.get("partition-shape")
        if asked is not None and asked != cls.shape_of(options):
            return (f"params partition-shape = {asked!r}: the shape is one for the run; give "
                    "it with --nemesis-opt partition-shape or use its own name "
                    f"(partition-{asked})")
        return None

    @classmethod
    def describe(cls, run: FaultRun) -> str:
        shape = cls.shape or str((run.detail or {}).get("shape") or DEFAULT)
        return SHAPES.get(shape, SHAPES[DEFAULT]).words(run)

    @classmethod
    def lane_targets(cls, targets: list[str], detail: Any) -> str | None:
        """Whom a report's fault lane names: for a partition among the nodes (its targets its
        components) the sides and what each holds, ``n1,n2 | n3 (majority | minority)`` (one
        component, a ring or a bridge: no side is cut off from the rest); else None."""
        shape = cls.shape or (detail if isinstance(detail, dict) else {}).get("shape")
        if shape not in topology.KINDS or not targets:
            return None
        sides = [t.split("|") for t in targets]
        held = f" ({' | '.join(topology.roles(sides))})" if len(sides) > 1 else ""
        return " | ".join(",".join(s) for s in sides) + held

    def select(self, ctx: NemesisContext, target: str | None = None) -> list[str] | None:
        """The cut's targets and links. A client cut off aimed at the holder strikes at a
        fresh grant, as ``power-loss`` does: a hold begun at most a quarter of the TTL before
        the cut was due, else the next (none within :data:`FRESH_WAIT`: the hold in progress):
        the holder is cut off for (nearly) its whole hold, past its session, not near a hold's
        end (the fencing row under ``partition``, seed 10: both holders cut let go before their
        sessions expired), and a hold just begun is not passed over for the next. So is the
        leader cut off with the holder (``partition-leader:holder``): struck 2.5 s into a hold
        of 4-5 s, the holder's last write came before the next grant, and fencing had no stale
        write to reject (CI: stale-rejected 0, once the first fault no longer started late)."""
        self._shape = self.shape_of(ctx.options)
        if (self._shape in ("holder", "oneway") and (target or "holder") == "holder") or (
                self._shape == "leader" and target == "holder"):
            wait_for_fresh_grant(ctx, FRESH_WAIT, young=ctx.ttl / 4)  # see the docstring
        picked = SHAPES[self._shape].pick(ctx, target)
        self._cuts = [] if picked is None else picked[1]
        self._aim, self._waiter = None, None
        if picked is not None and SHAPES[self._shape].targets:
            p = client_of(picked[0][0])
            if (target or "holder") == "holder":  # a shape aimed at the holder: the hold it meant
                self._aim = None if p is None else (p, ctx.live.held_since(p))
            elif target == "waiter":  # one blocked in an acquire: it must not hold when cut
                self._waiter = p
        return None if picked is None else picked[0]

    def start(self, ctx: NemesisContext, targets: list[str]) -> None:
        """Cut, aimed (:func:`nemesis.base.strike`): a miss is healed and the cut made anew for
        the holder (a waiter) then, ``targets`` updated in place; the misses are its detail."""
        self._missed = []
        strike(lambda: self._cut(ctx), lambda: self._landed(ctx),
               lambda: self._again(ctx, targets))

    def _landed(self, ctx: NemesisContext) -> bool:
        """The holder still in the hold it was aimed at; the waiter not yet granted (next in a
        queue lock's line: CI cut ZooKeeper's waiter at its fresh grant, and its session
        expired under it), looked for after :data:`SETTLE_S` (a grant's line may trail)."""
        if self._waiter is None:
            return self._aim is None or hit(ctx, self._aim)
        time.sleep(SETTLE_S)
        return ctx.live.held_since(self._waiter) is None

    def _again(self, ctx: NemesisContext, targets: list[str]) -> bool:
        role, aimed = ("holder", self._aim) if self._waiter is None else ("waiter", None)
        self._missed.append(self._waiter if aimed is None else aimed[0])
        again = SHAPES[self._shape].pick(ctx, role)
        p = None if again is None else client_of(again[0][0])
        since = None if p is None else ctx.live.held_since(p)
        if again is None or (role == "holder" and since is None):
            return False  # nobody there now: the cut stays where it was, its miss said
        ctx.cluster.heal()
        targets[:], self._cuts = again
        self._aim, self._waiter = ((p, since), None) if role == "holder" else (None, p)
        return True

    def _cut(self, ctx: NemesisContext) -> None:
        (ctx.cluster.cut_oneway if SHAPES[self._shape].oneway else ctx.cluster.cut)(self._cuts)

    def stop(self, ctx: NemesisContext, targets: list[str]) -> None:
        ctx.cluster.heal()

    def teardown(self, ctx: NemesisContext) -> None:
        ctx.cluster.heal()

    def expect(self, ctx: NemesisContext, targets: list[str]) -> dict[str, Any] | None:
        clients = [p for p in map(client_of, targets) if p is not None]
        return {"cut-off": clients} if clients else None

    def detail(self) -> dict[str, Any] | None:
        key = SHAPES[self._shape].record
        if key is None or not self._cuts:
            out: dict[str, Any] = {}
        elif key == "cut-off":
            out = {key: sorted({a for a, _ in self._cuts})}
        elif key == "dropped":
            out = {key: [f"{a}>{b}" for a, b in self._cuts]}
        else:
            out = {key: [list(c) for c in self._cuts]}
        if self._missed:
            out["missed"] = list(self._missed)
        if self.shape is None and self._shape != DEFAULT:
            out = {"shape": self._shape, **out}  # the family under an option: say which shape
        return out or None
