"""``lag-replication``: replication falls behind, because its links are slow.

Where a DB replicates between its nodes (``Replication``) over addresses the harness gives
(``RoutedPeers``: Redis replicas and Sentinels dial each node through its door in the link
layer), the stream each replica receives waits ``lag`` seconds (plus ``lag-jitter``) in the
proxy: a replica is always that far behind its primary. A primary that is lost (a failover)
takes with it whatever it granted in the last ``lag`` seconds. The links are every link into a
node that can be a primary, so the lag outlives a failover (replication then runs on the new
primary's links).

Everything else crossing those links in the same direction lags too (a Sentinel's view of a
remote Redis: keep ``lag`` under Sentinel's ``down-after-milliseconds``, 1 s here, or the lag
alone looks like a dead primary).

A lag is a *condition*: ``--nemesis lag-replication,failover`` holds it in the background
while the failovers come and go. Proof that it bit: at the stop, the proxy must have delayed
bytes on the replication links (else it raises); what it did is recorded.
"""

from __future__ import annotations

import time
from typing import Any

from harness.core.capabilities import LinkLayer, PeerLinks, Replication, RoutedPeers
from harness.core.cluster import NemesisContext, link_name
from harness.core.options import Option
from nemesis.base import BaseNemesis
from nemesis.linksets import link_layer, summarize

PROVE_AFTER = 1.0  # seconds on: a lag that delayed nothing by then did not bite


class LagReplication(BaseNemesis):
    name = "lag-replication"
    summary = ("delay the replication stream into every replica (link layer), so replicas "
               "are always behind")
    requires = (Replication, RoutedPeers, LinkLayer, PeerLinks)
    targets = ()
    condition = True
    owner = "lag-replication"
    options = {
        "lag": Option(float, 0.5, "seconds the replication stream waits", minimum=0,
                      maximum=600),
        "lag-jitter": Option(float, 0.0, "± seconds, uniform", minimum=0, maximum=600),
    }

    def __init__(self) -> None:
        self._links: list[str] = []
        self._before: dict[str, Any] = {}
        self._began = 0.0

    def select(self, ctx: NemesisContext, target: str | None = None) -> list[str] | None:
        db: Replication = ctx.db
        self._links = [link_name(a, b) for a, b in db.replication_links(ctx.nodes)]
        return self._links or None

    def start(self, ctx: NemesisContext, targets: list[str]) -> None:
        layer = link_layer(ctx)
        self._before = layer.stats(self._links)
        self._began = time.monotonic()
        layer.shape(self._links, self.owner, delay=float(ctx.options.get("lag", 0.5)),
                    jitter=float(ctx.options.get("lag-jitter", 0.0)), direction="down")

    def stop(self, ctx: NemesisContext, targets: list[str]) -> None:
        layer = link_layer(ctx)
        after = layer.stats(self._links)
        layer.unshape(self.owner, self._links)
        did = summarize(self._before, after, ("down",))
        self._detail = did
        if not did["delayed-chunks"] and time.monotonic() - self._began >= PROVE_AFTER:
            raise RuntimeError(f"{self.name} did not bite: nothing was delayed on the "
                               f"replication links {', '.join(self._links)} (did replication "
                               "go around the link layer?)")

    def teardown(self, ctx: NemesisContext) -> None:
        if ctx.links is not None:
            ctx.links.unshape(self.owner)
