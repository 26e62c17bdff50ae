"""Crash-restart of a majority of the DB nodes at once, while a lock is held.

``kill-majority``: SIGKILL N/2+1 nodes together and restart them together right away. A node
without persistence comes back empty, having forgotten the lock it granted, so together with
the minority that still has it there is a fresh majority to grant it again: Redlock breaks.
With ``--persistence appendonly`` (``appendfsync always``) they come back with the key.

``kill-majority-delayed``: the same, but the nodes stay down for the TTL plus a second before
they restart (the remedy Redlock's author proposes: every lock a node knew has expired by the
time it is back). Option ``kill-delay`` (seconds) sets the downtime of either.
"""

from __future__ import annotations

from nemesis.base import BaseNemesis, NemesisContext
from nemesis.process_faults import wait_for_holder

READY_TIMEOUT = 20.0


class KillMajority(BaseNemesis):
    def __init__(self, delayed: bool = False) -> None:
        self.delayed = delayed
        self.name = "kill-majority-delayed" if delayed else "kill-majority"
        self.summary = ("SIGKILL a majority of DB nodes at once while a lock is held, restart "
                        + ("them once the TTL has passed" if delayed else "them at once"))

    def select(self, ctx: NemesisContext) -> list[str] | None:
        wait_for_holder(ctx)  # crash while a lock is held: that is when forgetting it hurts
        n = len(ctx.nodes)
        return sorted(node.name for node in ctx.rng.sample(ctx.nodes, n // 2 + 1))

    def start(self, ctx: NemesisContext, targets: list[str]) -> None:
        for t in targets:
            ctx.backend.kill(ctx.node(t))

    def duration(self, ctx: NemesisContext) -> float:
        if "kill-delay" in ctx.options:
            return float(ctx.options["kill-delay"])
        return ctx.ttl + 1.0 if self.delayed else 0.0

    def stop(self, ctx: NemesisContext, targets: list[str]) -> None:
        restart(ctx, targets)

    def teardown(self, ctx: NemesisContext) -> None:
        restart(ctx, [n.name for n in ctx.nodes])


def restart(ctx: NemesisContext, names: list[str]) -> None:
    """Start every named node that is down, all before waiting for any."""
    down = [ctx.node(n) for n in names if not ctx.backend.is_running(ctx.node(n))]
    for node in down:
        ctx.backend.start(node)
    for node in down:
        ctx.backend.wait_ready(node, READY_TIMEOUT)
