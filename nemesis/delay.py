"""``delay``: latency plus jitter on links, through the link layer (no netem needed).

Every chunk a delayed link carries waits ``delay`` seconds plus a uniform draw from
``[-delay-jitter, +delay-jitter]`` (never less than nothing) in the proxy, in each direction asked
(``delay-direction``: both, up = what the client sends, down = what comes back); bytes keep
their order. ``delay-rate`` adds a bandwidth limit (bytes/s), ``delay-close`` holds a
connection's close that long (a slow close). Which links: ``delay-links`` (or a
schedule step's target): ``clients`` (default: every client link), ``holder`` (the holder's
links), ``waiter``, ``any``, ``client:N``, ``peers`` (the links between DB nodes, where they go
through the link layer) or ``all``.

The default delay is the lock's own: a fifth of how long it waits for one request's reply
(the lock's ``request_timeout``, else the op timeout; resolved into the spec and given as
``ctx.op_timeout``), at most 0.2 s, with a jitter of half the delay: a round trip then takes at
most 0.6 of that wait, so lock ops complete, slowly, under the delay. (Redlock waits TTL/20 =
0.1 s per master: 0.2 ± 0.1 s would let no quorum form, and test only unavailability.) An
explicit ``delay`` or ``delay-jitter`` wins.

A slow network is a *condition*: run with other faults (``--nemesis delay,pause``) it is held in
the background for the whole load while they come and go.

Proof that it bit: at the stop the proxy must have delayed chunks on those links (else the fault
raises), and the start records a claim the ``faults`` checker holds the history to: every lock
op of a delayed client, invoked after the start and done before the stop, took at least the
round trip the delay cannot go under (``2 (delay - jitter)`` both ways); and the delayed
clients' lock ops are meant to complete under it (``completes``): a delay under which none did
tested unavailability only.
"""

from __future__ import annotations

import time
from typing import Any

from harness.core.capabilities import LinkLayer
from harness.core.cluster import NemesisContext, client_of
from harness.core.options import Option
from nemesis.base import BaseNemesis, TargetError
from nemesis.linksets import (
    DIRECTIONS,
    link_layer,
    links_of,
    needs_for,
    refuse_set,
    summarize,
)

LINK_SETS = ("clients", "holder", "waiter", "any", "peers", "all")
MIN_CLAIM = 0.005  # seconds: below this, the history cannot tell a delay from none
MAX_DEFAULT = 0.2  # seconds: the default delay's ceiling (a lock that waits a second or more)
SHARE = 0.2  # of the lock's wait for one reply: the default delay (jitter: half of it)
PROVE_AFTER = 1.0  # seconds on: a delay that carried nothing by then proves nothing


class Delay(BaseNemesis):
    name = "delay"
    summary = ("latency ± jitter on every client link (or the holder's, or the links between "
               "nodes), through the link layer")
    requires = (LinkLayer,)
    targets = (*LINK_SETS, "client:N")
    condition = True
    owner = "delay"
    options = {
        "delay": Option(float, None, "seconds each chunk waits, per direction (default: a "
                        "fifth of the lock's wait for one reply, at most 0.2)", minimum=0,
                        maximum=600),
        "delay-jitter": Option(float, None, "± seconds, uniform (default: half the delay)",
                               minimum=0, maximum=600),
        "delay-direction": Option(str, "both", "both, up (what clients send) or down",
                                  choices=DIRECTIONS),
        "delay-rate": Option(float, 0.0, "bandwidth limit in bytes/s (0: none)", minimum=0),
        "delay-close": Option(float, 0.0, "seconds a close waits (a slow close)", minimum=0,
                              maximum=600),
        "delay-links": Option(str, "clients", "which links", choices=LINK_SETS),
    }

    def __init__(self) -> None:
        self._links: list[str] = []
        self._before: dict[str, Any] = {}
        self._began = 0.0

    @classmethod
    def needs(cls, options: dict[str, Any]) -> tuple[type, ...]:
        return needs_for(options.get("delay-links"))

    @classmethod
    def refuse(cls, db: Any, options: dict[str, Any], ttl: float,
               op_timeout: float | None) -> str | None:
        return refuse_set(options.get("delay-links"), db, proxied=True)

    def which(self, ctx: NemesisContext, target: str | None) -> str:
        return target or str(ctx.options.get("delay-links", "clients"))

    def select(self, ctx: NemesisContext, target: str | None = None) -> list[str] | None:
        found = links_of(ctx, self.which(ctx, target))
        if found is None:
            return None
        targets, self._links = found
        if not self._links:
            raise TargetError(f"no link to delay for {self.which(ctx, target)!r}")
        return targets

    def shape(self, ctx: NemesisContext) -> dict[str, Any]:
        o = ctx.options
        delay = o.get("delay")
        if delay is None:
            delay = default_delay(ctx.op_timeout)
        jitter = o.get("delay-jitter")
        return {"delay": float(delay),
                "jitter": float(round(delay / 2, 4) if jitter is None else jitter),
                "rate": float(o.get("delay-rate", 0.0)),
                "close_delay": float(o.get("delay-close", 0.0)),
                "direction": str(o.get("delay-direction", "both"))}

    def start(self, ctx: NemesisContext, targets: list[str]) -> None:
        layer = link_layer(ctx)
        self._before = layer.stats(self._links)
        self._began = time.monotonic()
        layer.shape(self._links, self.owner, **self.shape(ctx))
        self._detail = {"links": self._links}

    def expect(self, ctx: NemesisContext, targets: list[str]) -> dict[str, Any] | None:
        shape = self.shape(ctx)
        one_way = max(0.0, shape["delay"] - shape["jitter"])
        at_least = one_way * (2 if shape["direction"] == "both" else 1)
        clients = [p for p in map(client_of, targets) if p is not None]
        if not clients:
            return None
        if at_least < MIN_CLAIM:
            return {"completes": clients}
        return {"slowed": {"processes": clients, "at-least": round(at_least, 4)},
                "completes": clients}

    def parameters(self, ctx: NemesisContext) -> dict[str, Any]:
        """The delay and jitter in force (a default is the lock's, resolved now)."""
        shape = self.shape(ctx)
        return {"delay": shape["delay"], "delay-jitter": shape["jitter"]}

    def stop(self, ctx: NemesisContext, targets: list[str]) -> None:
        layer = link_layer(ctx)
        after = layer.stats(self._links)
        layer.unshape(self.owner, self._links)
        shape = self.shape(ctx)
        dirs = ("up", "down") if shape["direction"] == "both" else (shape["direction"],)
        did = summarize(self._before, after, dirs)
        self._detail = {"links": len(self._links), **did}
        noticeable = shape["delay"] - shape["jitter"] >= 0.001 or shape["rate"] > 0
        if noticeable and did["chunks"] and not did["delayed-chunks"]:
            raise RuntimeError(f"{self.name} did not bite: the link layer carried "
                               f"{did['chunks']} chunk(s) on {len(self._links)} link(s) and "
                               "delayed none")
        if (noticeable and not did["chunks"]
                and time.monotonic() - self._began >= PROVE_AFTER):
            raise RuntimeError(f"{self.name} proves nothing: no byte crossed the "
                               f"{len(self._links)} delayed link(s) while it was on")

    def teardown(self, ctx: NemesisContext) -> None:
        if ctx.links is not None:
            ctx.links.unshape(self.owner)


def default_delay(wait: float) -> float:
    """The default delay for a lock that waits ``wait`` seconds for one reply: ops complete,
    slowly, under it (round trips of at most ``0.6 wait``, jitter included)."""
    return round(min(MAX_DEFAULT, SHARE * wait), 4)
