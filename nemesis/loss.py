"""``loss``: drop packets at random on links, with iptables' ``statistic --mode random``.

Each packet of a lossy link is dropped with probability ``loss`` (default 0.3), in the project's
own chain, on both backends: TCP retransmits, so requests slow down and some time out rather
than fail. Which links: ``loss-links`` (or a schedule step's target): ``clients`` (default),
``holder``, ``waiter``, ``any``, ``client:N``, ``peers`` (between the DB nodes) or ``all``;
``loss-direction``: both, up (what clients send; for peers, what the lower-named node sends)
or down. The link layer is not needed: the rules sit on the endpoints' own addresses.

A lossy network is a *condition*: run with other faults it is held in the background.

Proof that it bit: the rules' own counters; at the stop, a loss that dropped no packet raises
(the run then says the fault was never injected, and proves nothing). The count is recorded.
Proof that it tested the lock, not its absence: the lossy clients' lock ops are meant to complete
under it (``completes``); a loss under which none did tested unavailability only.
"""

from __future__ import annotations

import time
from typing import Any

from harness.core.capabilities import ClientLinks, Iptables, PacketRules
from harness.core.cluster import NemesisContext, client_of
from harness.core.options import Option
from nemesis.base import BaseNemesis, TargetError
from nemesis.linksets import DIRECTIONS, pairs_of, refuse_set

LINK_SETS = ("clients", "holder", "waiter", "any", "peers", "all")
PROVE_AFTER = 1.0  # seconds on: a loss that dropped nothing by then did not bite


class Loss(BaseNemesis):
    name = "loss"
    summary = "drop packets at random (30%) on every client link, or others (iptables statistic)"
    requires = (Iptables, PacketRules)
    targets = (*LINK_SETS, "client:N")
    condition = True
    cuts_clients = True  # its rules are on the clients' own addresses
    options = {
        "loss": Option(float, 0.3, "probability that a packet is dropped", minimum=0.0001,
                       maximum=1.0),
        "loss-direction": Option(str, "both", "both, up (what clients send) or down",
                                 choices=DIRECTIONS),
        "loss-links": Option(str, "clients", "which links", choices=LINK_SETS),
    }

    def __init__(self) -> None:
        self._pairs: list[tuple[str, str]] = []
        self._before = 0
        self._began = 0.0

    @classmethod
    def needs(cls, options: dict[str, Any]) -> tuple[type, ...]:
        return () if options.get("loss-links") == "peers" else (ClientLinks,)

    @classmethod
    def refuse(cls, db: Any, options: dict[str, Any], ttl: float,
               op_timeout: float | None) -> str | None:
        return refuse_set(options.get("loss-links"), db, proxied=False)

    def select(self, ctx: NemesisContext, target: str | None = None) -> list[str] | None:
        which = target or str(ctx.options.get("loss-links", "clients"))
        found = pairs_of(ctx, which)
        if found is None:
            return None
        targets, self._pairs = found
        if not self._pairs:
            raise TargetError(f"no link to make lossy for {which!r}")
        return targets

    def start(self, ctx: NemesisContext, targets: list[str]) -> None:
        p = float(ctx.options.get("loss", 0.3))
        direction = str(ctx.options.get("loss-direction", "both"))
        self._before = ctx.cluster.lost_packets()
        self._began = time.monotonic()
        pairs = [(b, a) for a, b in self._pairs] if direction == "down" else self._pairs
        ctx.cluster.lose(pairs, p, both_ways=direction == "both")
        self._detail = {"links": [f"{a}{'<>' if direction == 'both' else '>'}{b}"
                                  for a, b in pairs]}

    def expect(self, ctx: NemesisContext, targets: list[str]) -> dict[str, Any] | None:
        clients = [p for p in map(client_of, targets) if p is not None]
        return {"completes": clients} if clients else None

    def stop(self, ctx: NemesisContext, targets: list[str]) -> None:
        dropped = ctx.cluster.lost_packets() - self._before
        ctx.cluster.heal_loss()
        self._detail = {"links": len(self._pairs), "dropped-packets": dropped}
        if dropped <= 0 and time.monotonic() - self._began >= PROVE_AFTER:
            raise RuntimeError(f"{self.name} did not bite: its rules dropped no packet on "
                               f"{len(self._pairs)} link(s) (no traffic, or a probability too "
                               "small for the time it was on)")

    def teardown(self, ctx: NemesisContext) -> None:
        ctx.cluster.heal_loss()
