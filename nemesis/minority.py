"""``partition-minority``: cut a minority of the DB nodes off from every client and node.

The partitions among DB nodes (``partition-halves`` ...) do not touch a lock whose nodes never
talk to each other, such as Redlock's independent masters: for those, what matters is which
nodes the *clients* can reach. Here every client still reaches a majority, so a quorum lock
must stay safe and available; the unreachable nodes cost each attempt its per-node timeout.
"""

from __future__ import annotations

from typing import Any

from harness.core.capabilities import ClientLinks, Iptables
from harness.core.cluster import NemesisContext, client_name
from nemesis.partition import CutLinks


class PartitionMinority(CutLinks):
    name = "partition-minority"
    summary = "cut a minority of DB nodes off from every client and node, past the TTL"
    requires = (Iptables, ClientLinks)
    cuts_clients = True
    min_nodes = 3

    def select(self, ctx: NemesisContext, target: str | None = None) -> list[str] | None:
        n = len(ctx.nodes)
        if n < 3:
            return None  # no minority to cut: one node of two is half, not a minority
        cut = sorted(node.name for node in ctx.rng.sample(list(ctx.nodes), (n - 1) // 2))
        others = [node.name for node in ctx.nodes if node.name not in cut]
        clients = [client_name(p) for p in ctx.clients.processes]
        self._cuts = [(a, b) for a in cut for b in [*others, *clients]]
        return cut

    def detail(self) -> dict[str, Any] | None:
        return {"cut-off": sorted({a for a, _ in self._cuts})} if self._cuts else None
