"""``failover``: make Sentinel replace the primary while a lock is held on it.

Once somebody holds the lock, the primary's machine (its Redis and its Sentinel) is cut off
from the other machines and from every client but the holder: the holder goes on with the old
primary, the majority of Sentinels promotes a replica, and the other clients, whose requests
time out, ask the Sentinels again and move to the new primary. Replication is asynchronous and
was cut with everything else, so the new primary lacks the lock: it grants it again while the
holder still holds it on the old one. After the heal, the Sentinels demote the old primary to
a replica of the new one, and whatever was written on it alone is gone.

Each step is verified and recorded: the old primary, the one the Sentinels promoted and how
long that took, and whether the old primary came back as a replica. A failover that does not
happen within ``failover-wait`` seconds (default 15) is an error of the nemesis, never a silent
no-op. Needs a DB that knows its primary (``leader``) and its roles (``role``): redis-sentinel.
"""

from __future__ import annotations

import time
from typing import Any

from harness.core.capabilities import ClientLinks, Failover, Iptables
from harness.core.cluster import NemesisContext, client_name
from harness.core.options import Option
from nemesis import topology
from nemesis.base import BaseNemesis, wait_for_holder

POLL = 0.1


class SentinelFailover(BaseNemesis):
    name = "failover"
    summary = ("cut the Sentinel primary (with the lock holder) off from the rest until a "
               "replica is promoted, then heal")
    requires = (Failover, Iptables, ClientLinks)
    cuts_clients = True
    options = {"failover-wait": Option(float, 15.0, "seconds to wait for a replica to be "
                                       "promoted", minimum=1, maximum=600)}

    def __init__(self) -> None:
        self._cuts: list[tuple[str, str]] = []
        self._old: str | None = None
        self._began = 0.0

    def wait_limit(self, ctx: NemesisContext) -> float:
        return float(ctx.options.get("failover-wait", 15.0))

    def select(self, ctx: NemesisContext, target: str | None = None) -> list[str] | None:
        holder = wait_for_holder(ctx)
        db: Failover = ctx.db
        primary = db.leader(ctx.nodes)
        if holder is None or primary is None:
            return None
        away = [client_name(p) for p in ctx.clients.processes if p != holder]
        self._cuts = topology.cut_off(topology.of(ctx, away), [primary])  # the holder kept
        self._old = primary
        return [primary, client_name(holder)]

    def start(self, ctx: NemesisContext, targets: list[str]) -> None:
        self._began = time.monotonic()
        ctx.cluster.cut(self._cuts)
        self._detail = {"primary": self._old, "kept-with-it": targets[1:]}

    def expect(self, ctx: NemesisContext, targets: list[str]) -> dict[str, Any] | None:
        return {"promotes": targets[0]}  # the faults checker reads "promoted" in the detail

    def stop(self, ctx: NemesisContext, targets: list[str]) -> None:
        old = self._old
        # Not cut short by the run's end: a failover begun near it (a lane made late by the
        # step before, waiting for its old primary to rejoin) would prove nothing; the clients
        # go on until the faults are healed, so the lock meets the promotion all the same.
        promoted, took = self._wait(ctx, lambda: _new_primary(ctx, old), self._began)
        ctx.cluster.heal()
        healed = time.monotonic()
        demoted, rejoin = (None, None)
        if promoted is not None and old is not None and not ctx.finishing.is_set():
            demoted, rejoin = self._wait(
                ctx, lambda: "slave" if ctx.db.role(ctx.node(old)) == "slave" else None, healed,
                interruptible=True)
        self._detail = {"old-primary": old, "promoted": promoted, "promoted-after-s": took,
                        "old-primary-rejoined-as-replica": demoted is not None,
                        "rejoined-after-heal-s": rejoin}
        if ctx.finishing.is_set() and demoted is None:
            self._detail["old-primary-rejoined-as-replica"] = "not waited for: the run ended"
        if promoted is None and not ctx.finishing.is_set():
            raise RuntimeError(f"no replica was promoted within {self.wait_limit(ctx):.0f} s of "
                               f"cutting {old} off: did the Sentinels see each other?")

    def _wait(self, ctx: NemesisContext, probe: Any, since: float, *,
              interruptible: bool = False) -> tuple[str | None, float | None]:
        """Poll ``probe`` until it names something, for ``failover-wait`` seconds at most (or
        until the run ends, if ``interruptible``)."""
        deadline = since + self.wait_limit(ctx)
        while True:
            seen = probe()
            if seen is not None:
                return seen, round(time.monotonic() - since, 2)
            if time.monotonic() >= deadline:
                return None, None
            if ctx.finishing.wait(POLL):  # the run is over
                if interruptible:
                    return None, None
                time.sleep(POLL)

    def teardown(self, ctx: NemesisContext) -> None:
        ctx.cluster.heal()


def _new_primary(ctx: NemesisContext, old: str | None) -> str | None:
    db: Failover = ctx.db
    primary = db.leader(ctx.nodes)
    return primary if primary is not None and primary != old else None
