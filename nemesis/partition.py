"""Network partitions (iptables through the backend).

``partition``: cut the client that holds the lock right now off from every DB node (its session
or lease expires while it runs on; the protected resource stays reachable, as a separate service
would). ``partition-halves|one|ring|bridge``: partitions among the DB nodes, built as graphs in
:mod:`nemesis.topology`.
"""

from __future__ import annotations

from typing import Any

from nemesis import topology
from nemesis.base import BaseNemesis, NemesisContext, client_name
from nemesis.process_faults import wait_for_holder


class IsolateHolder(BaseNemesis):
    name = "partition"
    summary = "cut the client holding the lock off from every DB node, past the TTL"

    def select(self, ctx: NemesisContext) -> list[str] | None:
        holder = wait_for_holder(ctx)
        return None if holder is None else [client_name(holder)]

    def start(self, ctx: NemesisContext, targets: list[str]) -> None:
        ctx.backend.cut((t, n.name) for t in targets for n in ctx.nodes)

    def stop(self, ctx: NemesisContext, targets: list[str]) -> None:
        ctx.backend.heal()

    def teardown(self, ctx: NemesisContext) -> None:
        ctx.backend.heal()


class CutLinks(BaseNemesis):
    """A partition chosen in ``select`` as a list of links (``self._cuts``): ``start`` cuts
    them, ``stop`` and ``teardown`` heal. Subclasses only choose the links."""

    def __init__(self) -> None:
        self._cuts: list[tuple[str, str]] = []

    def start(self, ctx: NemesisContext, targets: list[str]) -> None:
        ctx.backend.cut(self._cuts)

    def stop(self, ctx: NemesisContext, targets: list[str]) -> None:
        ctx.backend.heal()

    def teardown(self, ctx: NemesisContext) -> None:
        ctx.backend.heal()

    def detail(self) -> dict[str, Any] | None:
        return {"cut": [list(c) for c in self._cuts]} if self._cuts else None


class NodePartition(CutLinks):
    """A partition among the DB nodes; targets name the resulting components."""

    def __init__(self, kind: str) -> None:
        super().__init__()
        self.kind = kind
        self.name = f"partition-{kind}"
        self.summary = f"partition the DB nodes: {kind}"

    def select(self, ctx: NemesisContext) -> list[str] | None:
        names = [n.name for n in ctx.nodes]
        if len(names) < 2:
            return None
        reach = topology.build(self.kind, names, ctx.rng)
        self._cuts = topology.cuts(reach)
        return ["|".join(c) for c in topology.describe(reach)]
