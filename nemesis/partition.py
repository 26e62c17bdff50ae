"""Network partitions (iptables through the cluster's node operations).

``partition``: cut a client (the one that holds the lock right now, by default) off from every
DB node: its session or lease expires while it runs on; the protected resource stays reachable,
as a separate service would. ``partition-halves|one|ring|bridge``: partitions among the DB
nodes, built as graphs in :mod:`nemesis.topology`.
"""

from __future__ import annotations

from typing import Any

from harness.core.capabilities import ClientLinks, Iptables, Replication
from harness.core.cluster import NemesisContext, process_of
from nemesis import topology
from nemesis.base import CLIENT_TARGETS, BaseNemesis, client_target


class CutLinks(BaseNemesis):
    """A partition chosen in ``select`` as a list of links (``self._cuts``): ``start`` cuts
    them, ``stop`` and ``teardown`` heal. Subclasses only choose the links."""

    requires: tuple[type, ...] = (Iptables,)

    def __init__(self) -> None:
        self._cuts: list[tuple[str, str]] = []

    def start(self, ctx: NemesisContext, targets: list[str]) -> None:
        ctx.cluster.cut(self._cuts)

    def stop(self, ctx: NemesisContext, targets: list[str]) -> None:
        ctx.cluster.heal()

    def teardown(self, ctx: NemesisContext) -> None:
        ctx.cluster.heal()

    def detail(self) -> dict[str, Any] | None:
        return {"cut": [list(c) for c in self._cuts]} if self._cuts else None


class IsolateHolder(CutLinks):
    name = "partition"
    summary = "cut the client holding the lock off from every DB node, past the TTL"
    targets = CLIENT_TARGETS
    requires = (Iptables, ClientLinks)
    cuts_clients = True

    def select(self, ctx: NemesisContext, target: str | None = None) -> list[str] | None:
        chosen = client_target(ctx, target)
        if chosen is not None:
            self._cuts = [(c, n.name) for c in chosen for n in ctx.nodes]
        return chosen

    def detail(self) -> dict[str, Any] | None:
        return None

    def expect(self, ctx: NemesisContext, targets: list[str]) -> dict[str, Any] | None:
        return {"cut-off": [process_of(t) for t in targets]}


class NodePartition(CutLinks):
    """A partition among the DB nodes; targets name the resulting components. It needs a DB
    whose nodes talk to each other (``Replication``): among independent Redis masters or
    PostgreSQL clusters it would cut links nothing uses, and the run would pass having tested
    nothing (the fault matrix found such runs VALID with their faults check valid)."""

    requires = (Iptables, Replication)
    kind = "halves"
    min_nodes = 2

    def select(self, ctx: NemesisContext, target: str | None = None) -> list[str] | None:
        names = [n.name for n in ctx.nodes]
        if len(names) < 2:
            return None
        reach = topology.build(self.kind, names, ctx.rng)
        self._cuts = topology.cuts(reach)
        return ["|".join(c) for c in topology.describe(reach)]


class PartitionHalves(NodePartition):
    name = "partition-halves"
    summary = "partition the DB nodes: halves"
    kind = "halves"


class PartitionOne(NodePartition):
    name = "partition-one"
    summary = "partition the DB nodes: one"
    kind = "one"


class PartitionRing(NodePartition):
    name = "partition-ring"
    summary = "partition the DB nodes: ring"
    kind = "ring"


class PartitionBridge(NodePartition):
    name = "partition-bridge"
    summary = "partition the DB nodes: bridge"
    kind = "bridge"
