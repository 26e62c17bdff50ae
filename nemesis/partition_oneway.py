"""``partition-oneway``: a partition that cuts one direction only (iptables, both backends).

A client target (``holder`` by default, ``waiter``, ``any``, ``client:N``) is cut off one way
from every DB node; a node target (``leader``, ``node:n2``) from the other DB nodes. Option
``oneway``:

- ``in`` (default): nothing reaches the target, while everything it sends arrives. A cut-off
  client's requests are carried out (a release deletes the key, a keep-alive renews the lease)
  and it never hears so; a leader's heartbeats reach its followers, their answers never reach
  it;
- ``out``: what the target sends is dropped, while it still hears the others.

Over TCP either way ends every exchange (what one side sends goes unacknowledged), but which
side's packets arrive decides what the servers saw. The start records, for a client target,
the claim that it completes no lock op while cut (the ``faults`` checker holds the history to
it), and the cuts themselves. Healing removes them like a two-way cut's.
"""

from __future__ import annotations

from typing import Any

from harness.core.capabilities import ClientLinks, Iptables, PacketRules
from harness.core.cluster import NemesisContext, client_of
from harness.core.options import Option
from nemesis.base import CLIENT_TARGETS, BaseNemesis, client_target, node_target


class PartitionOneway(BaseNemesis):
    name = "partition-oneway"
    summary = ("one-way partition: nothing reaches the lock holder from the DB nodes, while "
               "its requests still arrive (or the reverse; or a node from its peers)")
    requires = (Iptables, PacketRules, ClientLinks)
    targets = (*CLIENT_TARGETS, "leader", "node:NAME")
    cuts_clients = True
    options = {"oneway": Option(str, "in", "in: nothing reaches the target; out: nothing it "
                                "sends arrives", choices=("in", "out"))}

    def __init__(self) -> None:
        self._cuts: list[tuple[str, str]] = []

    def select(self, ctx: NemesisContext, target: str | None = None) -> list[str] | None:
        role = target or "holder"
        if role == "leader" or role.startswith("node:"):
            chosen = node_target(ctx, role)
            others = [n.name for n in ctx.nodes if chosen is None or n.name not in chosen]
        else:
            chosen = client_target(ctx, role)
            others = [n.name for n in ctx.nodes]
        if chosen is None or not others:
            return None
        inward = str(ctx.options.get("oneway", "in")) == "in"
        self._cuts = [(o, t) if inward else (t, o) for t in chosen for o in others]
        return chosen

    def start(self, ctx: NemesisContext, targets: list[str]) -> None:
        ctx.cluster.cut_oneway(self._cuts)

    def expect(self, ctx: NemesisContext, targets: list[str]) -> dict[str, Any] | None:
        clients = [p for p in map(client_of, targets) if p is not None]
        return {"cut-off": clients} if clients else None

    def stop(self, ctx: NemesisContext, targets: list[str]) -> None:
        ctx.cluster.heal()

    def teardown(self, ctx: NemesisContext) -> None:
        ctx.cluster.heal()

    def detail(self) -> dict[str, Any] | None:
        return {"dropped": [f"{a}>{b}" for a, b in self._cuts]} if self._cuts else None
