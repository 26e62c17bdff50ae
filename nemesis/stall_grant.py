"""``stall-grant``: a grant is held past its lease, and delivered as another client takes the lock.

The seeds' third way to break a lease, after pauses and clock jumps: packets delayed long after
the lease they carry has expired. The link layer's proxy follows each client's Redis requests
and replies (:mod:`harness.controller.respgrants`). Once a client holds the lock, the proxy is
armed from the holder's next request (its release) on, and waits, on the links of the target
clients (``waiters``, the default: every other client blocked in an acquire; or one ``waiter``,
``any``, ``client:N``, the holder included: its next grant), for the next reply that *is* a
grant: ``+OK`` to a ``SET ... NX``, ``:1`` to a ``SETNX``, a token from a script that SETs NX.
The lock was free and the server took it for that client; from that reply on, every reply to
that client is held for ``stall`` seconds (default ``max(1.5 TTL, TTL + 0.5)``), the grant
first. (Armed while the holder still holds the lock, so the grant held is the first of an
acquire: a Redlock client cannot have a quorum of other masters' grants already, whatever
step of its acquire it is at.) The other clients' links are not held:
once the lease runs out one of them takes the lock. After the stall the held grant is let go as
soon as another client begins a fresh hold (waiting at most ``FRESH_WAIT`` s for one), so the
late grant lands while another client holds the lock.

- A single ``SET NX PX`` believes the late grant: two holders (invalid).
- Redlock measures the time its acquire took and refuses a grant whose validity is gone; with
  its per-node timeout (``ttl / 20``) it does not even wait for the late reply (the proxy drops
  it with the connection Redlock closed): no stall longer than the TTL reaches it, so the
  validity check is not tested this way (the ``faults`` check: unavailability only).
- With fencing tokens the late holder's writes carry an older token than the new holder's, and
  a resource that checks tokens rejects them.

Only Redis's protocol is followed (another DB is refused), and only those acquires: a lock that
takes the lock another way (a script without ``SET ... NX``) gives the fault no grant to catch,
and its step fails to start, saying so.

The client must wait longer than the stall for the late reply to reach it: the run's
``--op-timeout`` defaults to ``stall + 1`` (a shorter one is refused). Proof that it bit: the
grant the proxy held (on which link, for how long, delivered late or dropped with a connection
the client had closed; ``late-grants``: how many grants of the client's links were each), the
bytes held, and a claim the ``faults`` checker holds the history to: the client completes no
lock op while its replies are held (``stalled``). A stall none of whose held grants was
delivered (Redlock's per-node timeout gave up on the node first) tested unavailability at
most: the ``faults`` checker says so, and a run of only such stalls is unknown.
"""

from __future__ import annotations

import time
from typing import Any

from harness.core.capabilities import LinkLayer
from harness.core.cluster import NemesisContext, client_name, link_ends, process_of
from harness.core.options import Option
from nemesis.base import (
    HOLDER_WAIT,
    BaseNemesis,
    client_target,
    wait_for_fresh_grant,
    wait_for_holder,
)
from nemesis.linksets import link_layer, summarize, waiting_clients

GRANT_WAIT = 2 * HOLDER_WAIT  # seconds (at most) the targets have to be granted the lock
FRESH_WAIT = 0.5  # seconds (at most), once the stall ran, to wait for another client's hold
SLACK = 0.75  # the proxy lets the grant go by itself this long after the stall, at the latest
POLL = 0.01  # seconds between two looks at the proxy's counters while waiting for a grant


def stall_for(ttl: float, options: dict[str, Any]) -> float:
    given = options.get("stall")
    return float(given) if given is not None else round(max(1.5 * ttl, ttl + 0.5), 3)


def grants_held(stats: dict[str, Any]) -> int:
    return int(stats.get("down", {}).get("grants_held", 0))


class StallGrant(BaseNemesis):
    name = "stall-grant"
    summary = ("hold a waiter's grant (the reply that says it took the lock) past the TTL, "
               "then deliver it as another client takes the lock")
    requires = (LinkLayer,)
    targets = ("waiters", "waiter", "any", "client:N")
    options = {
        "stall": Option(float, None, "seconds the grant is held (default max(1.5 TTL, "
                        "TTL + 0.5)); must be longer than the TTL", minimum=0.001,
                        maximum=3600),
    }

    def __init__(self) -> None:
        self._links: list[str] = []
        self._before: dict[str, Any] = {}
        self._caught: tuple[str, float] | None = None  # (link, when the proxy held the grant)

    @classmethod
    def op_timeout(cls, ttl: float, options: dict[str, Any]) -> float:
        """The client must outwait the stall, or it never hears the late grant."""
        return round(stall_for(ttl, options) + 1.0, 3)

    @classmethod
    def refuse(cls, db: Any, options: dict[str, Any], ttl: float,
               op_timeout: float | None) -> str | None:
        if getattr(db, "protocol", None) != "resp":
            return (f"{getattr(db, 'name', 'this db')} does not speak Redis's protocol, the "
                    "only one in which the link layer tells a grant from another reply")
        stall = stall_for(ttl, options)
        if stall <= ttl:
            return (f"stall={stall:g} is not longer than --ttl {ttl:g}: the grant would arrive "
                    "while its lease still runs (give a longer stall, or use delay)")
        return None

    def duration(self, ctx: NemesisContext) -> float:
        return stall_for(ctx.ttl, ctx.options)

    def parameters(self, ctx: NemesisContext) -> dict[str, Any]:
        return {"stall": stall_for(ctx.ttl, ctx.options)}

    def candidates(self, ctx: NemesisContext, role: str, holder: int) -> list[str] | None:
        """The clients whose next grant may be held."""
        if role in ("waiters", "waiter"):
            waiting = waiting_clients(ctx, exclude=[holder])
            return [client_name(p) for p in (waiting[:1] if role == "waiter" else waiting)]
        return client_target(ctx, role)

    def arm(self, ctx: NemesisContext, role: str
            ) -> tuple[dict[str, list[str]], dict[str, Any]] | None:
        """Once a client holds the lock, arm the proxy on the candidates' links from the
        holder's next request on: (each candidate's links, their counters before), or None when
        nobody holds the lock or waits for it. Armed again on the next holder when the holder
        had begun to release meanwhile (a Redlock waiter could then collect a quorum of grants
        before the one held)."""
        layer = link_layer(ctx)
        deadline = time.monotonic() + HOLDER_WAIT
        while True:
            holder = wait_for_holder(ctx)
            if holder is None:
                return None
            since = ctx.live.held_since(holder)
            chosen = self.candidates(ctx, role, holder)
            if not chosen:
                return None
            groups = {c: layer.links(src=c) for c in chosen}
            links = [x for g in groups.values() for x in g]
            before = layer.stats(links)
            layer.stall(links, stall_for(ctx.ttl, ctx.options) + SLACK, direction="down",
                        trigger="grant", groups=list(groups.values()),
                        after=layer.links(src=client_name(holder)))
            # A client journals its release before it sends it: still holding here, the holder
            # had not sent its release when the proxy was armed.
            if ctx.live.held_since(holder) == since:
                return groups, before
            layer.unstall(links)
            if time.monotonic() >= deadline or ctx.finishing.is_set():
                return None

    def select(self, ctx: NemesisContext, target: str | None = None) -> list[str] | None:
        """Arm the proxy, and wait until it holds a grant to one of the candidates: that
        client is the target (the stall is on from its grant)."""
        armed = self.arm(ctx, target or "waiters")
        if armed is None:
            return None
        groups, before = armed
        chosen = list(groups)
        links = [x for g in groups.values() for x in g]
        layer = link_layer(ctx)
        deadline = time.monotonic() + GRANT_WAIT
        while True:
            now = layer.stats(links)
            caught = [x for x in links if grants_held(now[x]) > grants_held(before[x])]
            if caught:
                break
            if ctx.finishing.is_set():
                layer.unstall(links)
                return None
            if time.monotonic() >= deadline:
                layer.unstall(links)
                raise RuntimeError(
                    f"no grant to {', '.join(chosen)} in {GRANT_WAIT:g} s (does the lock "
                    "acquire by SET NX, SETNX or a script that SETs NX?)")
            time.sleep(POLL)
        client = link_ends(caught[0])[0]
        self._links = groups[client]
        self._before = {x: before[x] for x in self._links}
        self._caught = (caught[0], float(now[caught[0]]["down"]["last_grant_held"]))
        return [client]

    def start(self, ctx: NemesisContext, targets: list[str]) -> None:
        """Nothing to inject: the grant has been held since select caught it."""
        assert self._caught is not None
        link, at = self._caught
        self._detail = {"grant-held-on": link,
                        "held-since-ms": round(1000 * (time.monotonic() - at), 1)}

    def expect(self, ctx: NemesisContext, targets: list[str]) -> dict[str, Any] | None:
        return {"stalled": {"processes": [process_of(t) for t in targets],
                            "seconds": stall_for(ctx.ttl, ctx.options)}}

    def stop(self, ctx: NemesisContext, targets: list[str]) -> None:
        layer = link_layer(ctx)
        fresh = None if ctx.finishing.is_set() else wait_for_fresh_grant(ctx, FRESH_WAIT)
        layer.unstall(self._links)
        let_go = time.monotonic()
        after = layer.stats(self._links)
        did = summarize(self._before, after, ("down",))
        held = {name: s["down"]["stalled_bytes"] - self._before.get(name, {}).get(
            "down", {}).get("stalled_bytes", 0) for name, s in after.items()}
        link, at = self._caught or ("?", let_go)
        late, dropped = (sum(s.get("down", {}).get(k, 0) - self._before.get(name, {}).get(
            "down", {}).get(k, 0) for name, s in after.items())
            for k in ("grants_late", "grants_dropped"))
        self._detail = {
            "grant-held-on": link, "grant-held-s": round(let_go - at, 3),
            "late-grant": ("delivered" if late else "dropped: the client had closed the "
                           "connection" if dropped else "not delivered yet"),
            "late-grants": {"delivered": late, "dropped": dropped},
            "fresh-holder": None if fresh is None else client_name(fresh),
            "held-bytes": {k: v for k, v in held.items() if v},
            "max-added-ms": did["max-added-ms"]}

    def teardown(self, ctx: NemesisContext) -> None:
        if ctx.links is not None:
            ctx.links.unstall()
