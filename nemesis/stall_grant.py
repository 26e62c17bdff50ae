"""``stall-grant``: the reply to a waiting client's next acquire is held past the lock's TTL.

The seeds' third way to break a lease, after pauses and clock jumps: packets delayed long after
the lease they carry has expired. Once somebody holds the lock and others wait for it, the link
layer arms a stall on the waiters' links (``waiters``, the default target; or one ``waiter``,
``any``, ``client:N``), triggered by the holder's release: the release request, as it passes
the proxy, arms each waiter's link so that the reply to the waiter's *next* request is held for
``stall`` seconds (default ``max(1.5 TTL, TTL + 0.5)``), then delivered with everything held
behind it. The waiter whose request the server granted hears "OK" only after the lease it
grants has run out; by then another client may hold the lock.

- A single ``SET NX PX`` believes the late grant: two holders (invalid).
- Redlock measures the time its acquire took and refuses a grant whose validity is gone; with
  its per-node timeout (``ttl / 20``) it does not even wait for the late replies.
- With fencing tokens the late holder's writes carry an older token than the new holder's, and
  a resource that checks tokens rejects them.

The client must wait longer than the stall for the late reply to reach it: the run's
``--op-timeout`` defaults to ``stall + 1`` (a shorter one is refused). Proof that it bit: the
proxy's counters of bytes held by the stall (at the stop: none held raises), and a claim the
``faults`` checker holds the history to: no stalled client completes a lock op while its replies
are held (``stalled``).
"""

from __future__ import annotations

import time
from typing import Any

from harness.core.capabilities import LinkLayer
from harness.core.cluster import NemesisContext, client_name, process_of
from harness.core.options import Option
from nemesis.base import BaseNemesis, TargetError, client_target, wait_for_holder
from nemesis.linksets import client_links, link_layer, summarize, waiting_clients

WAIT_FOR_RELEASE = 2.0  # seconds after the stall (at most) the holder has to begin releasing


def stall_for(ttl: float, options: dict[str, Any]) -> float:
    given = options.get("stall")
    return float(given) if given is not None else round(max(1.5 * ttl, ttl + 0.5), 3)


class StallGrant(BaseNemesis):
    name = "stall-grant"
    summary = ("hold the reply to the waiters' next acquire past the TTL, from the holder's "
               "release on: the grant arrives after its lease expired")
    requires = (LinkLayer,)
    targets = ("waiters", "waiter", "any", "client:N")
    options = {
        "stall": Option(float, None, "seconds the reply is held (default max(1.5 TTL, "
                        "TTL + 0.5)); must be longer than the TTL", minimum=0.001,
                        maximum=3600),
    }

    def __init__(self) -> None:
        self._holder: int | None = None
        self._links: list[str] = []
        self._before: dict[str, Any] = {}
        self._began = 0.0
        self._detail: dict[str, Any] | None = None

    @classmethod
    def op_timeout(cls, ttl: float, options: dict[str, Any]) -> float:
        """The client must outwait the stall, or it never hears the late grant."""
        return round(stall_for(ttl, options) + 1.0, 3)

    @classmethod
    def refuse(cls, db: Any, options: dict[str, Any], ttl: float,
               op_timeout: float | None) -> str | None:
        stall = stall_for(ttl, options)
        if stall <= ttl:
            return (f"stall={stall:g} is not longer than --ttl {ttl:g}: the grant would arrive "
                    "while its lease still runs (give a longer stall, or use delay)")
        return None

    def duration(self, ctx: NemesisContext) -> float:
        return stall_for(ctx.ttl, ctx.options) + WAIT_FOR_RELEASE + 1.0

    def parameters(self, ctx: NemesisContext) -> dict[str, Any]:
        return {"stall": stall_for(ctx.ttl, ctx.options)}

    def select(self, ctx: NemesisContext, target: str | None = None) -> list[str] | None:
        holder = wait_for_holder(ctx)
        if holder is None:
            return None
        role = target or "waiters"
        if role == "waiters":
            waiting = waiting_clients(ctx, exclude=[holder])
            chosen = [client_name(p) for p in waiting] or None
        elif role == "waiter":
            waiting = waiting_clients(ctx, exclude=[holder])
            chosen = [client_name(waiting[0])] if waiting else None
        else:
            chosen = client_target(ctx, role)
            if chosen is not None and process_of(chosen[0]) == holder:
                raise TargetError(f"{role} is the holder: its own release cannot be stalled")
        if chosen is None:
            return None
        self._holder = holder
        self._links = client_links(ctx, chosen)
        return chosen

    def start(self, ctx: NemesisContext, targets: list[str]) -> None:
        layer = link_layer(ctx)
        assert self._holder is not None
        holder_links = layer.links(src=client_name(self._holder))
        self._before = layer.stats(self._links)
        self._began = time.monotonic()
        layer.stall(self._links, stall_for(ctx.ttl, ctx.options), direction="down",
                    trigger="next", after=holder_links)
        self._detail = {"holder": client_name(self._holder), "stalled-links": self._links}

    def expect(self, ctx: NemesisContext, targets: list[str]) -> dict[str, Any] | None:
        return {"stalled": {"processes": [process_of(t) for t in targets],
                            "seconds": stall_for(ctx.ttl, ctx.options)}}

    def stop(self, ctx: NemesisContext, targets: list[str]) -> None:
        layer = link_layer(ctx)
        after = layer.stats(self._links)
        layer.unstall(self._links)
        did = summarize(self._before, after, ("down",))
        held = {name: s["down"]["stalled_bytes"] - self._before.get(name, {}).get(
            "down", {}).get("stalled_bytes", 0) for name, s in after.items()}
        began = [s["down"]["last_stall_began"] for name, s in after.items()
                 if s["down"]["stalls"] > self._before.get(name, {}).get("down", {}).get(
                     "stalls", 0) and s["down"]["last_stall_began"] is not None]
        self._detail = {"holder": client_name(self._holder) if self._holder is not None
                        else None, "held-bytes": {k: v for k, v in held.items() if v},
                        "stalls-began-after-s": sorted(round(b - self._began, 3)
                                                       for b in began),
                        "max-added-ms": did["max-added-ms"]}
        if not any(held.values()) and not ctx.finishing.is_set():
            raise RuntimeError(f"{self.name} held nothing: no reply crossed the stalled links "
                               "(the holder never released, or no waiter asked again)")

    def detail(self) -> dict[str, Any] | None:
        return self._detail

    def teardown(self, ctx: NemesisContext) -> None:
        if ctx.links is not None:
            ctx.links.unstall()
