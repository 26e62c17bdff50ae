"""Crash-restart of a majority of the DB nodes at once, while a lock is held.

``kill-majority``: SIGKILL N/2+1 nodes together, as a fresh grant begins (so the holder has its
whole hold ahead of it), and restart them together right away. A node
without persistence comes back empty, having forgotten the lock it granted, so together with
the minority that still has it there is a fresh majority to grant it again: Redlock breaks.
With ``--persistence appendonly`` (``appendfsync always``) they come back with the key.

``kill-majority-delayed`` (an alias presetting ``delayed``): the same, but the nodes stay down
for the TTL plus a second before they restart (the remedy Redlock's author proposes: every lock
a node knew has expired by the time it is back). Option ``kill-delay`` (seconds) sets the
downtime of either.
"""

from __future__ import annotations

from typing import Any

from harness.core.cluster import NemesisContext
from harness.core.fault_run import FaultRun
from harness.core.options import Option
from nemesis.base import NODE_TARGETS, BaseNemesis, node_target, wait_for_fresh_grant
from nemesis.process_faults import KILLED, REPAIR, kill, killed, restart


class KillMajority(BaseNemesis):
    name = "kill-majority"
    summary = "SIGKILL a majority of DB nodes at once while a lock is held, restart them at once"
    targets = NODE_TARGETS
    default_target = "majority"  # what select() aims at without a role
    delayed = False
    colour = KILLED
    options = {"kill-delay": Option(float, None, "seconds the nodes stay down (default 0, "
                                    "delayed: TTL + 1)", minimum=0, maximum=3600),
               "repair": REPAIR}
    aliases = {"kill-majority-delayed": {
        "delayed": True, "summary": "SIGKILL a majority of DB nodes at once while a lock is "
        "held, restart them once the TTL has passed"}}

    @classmethod
    def describe(cls, run: FaultRun) -> str:
        return killed(run)

    def select(self, ctx: NemesisContext, target: str | None = None) -> list[str] | None:
        wait_for_fresh_grant(ctx)  # forgetting a held lock hurts: strike as a hold begins
        return node_target(ctx, target, "majority")

    def __init__(self) -> None:
        self.repaired: dict[str, list[str]] = {}

    def start(self, ctx: NemesisContext, targets: list[str]) -> None:
        self.repaired = {}
        kill(ctx, targets)

    def detail(self) -> dict[str, Any] | None:
        return {"repaired": dict(self.repaired)} if self.repaired else None

    def duration(self, ctx: NemesisContext) -> float:
        if ctx.options.get("kill-delay") is not None:
            return float(ctx.options["kill-delay"])
        return ctx.ttl + 1.0 if self.delayed else 0.0

    def stop(self, ctx: NemesisContext, targets: list[str]) -> None:
        self.repaired = restart(ctx, targets)

    def teardown(self, ctx: NemesisContext) -> None:
        restart(ctx, [n.name for n in ctx.nodes])
