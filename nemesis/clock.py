"""Clock faults: move a node's wall clock with libfaketime, and check that it moved.

``clock`` waits until somebody holds the lock, then jumps the clocks of a set of DB nodes (the
only node of a single Redis, a majority of several) forward by ``offset`` seconds (default +60):
a lease stored there expires at once although its holder is still working. Each change is
verified by reading the node's own clock back (Redis ``TIME``) and the observed offsets are
recorded in the history; healing puts the clocks back and verifies that too.
"""

from __future__ import annotations

import time
from typing import Any

from nemesis.base import BaseNemesis, NemesisContext
from nemesis.process_faults import wait_for_holder

TOLERANCE = 1.0  # seconds between the offset asked for and the one observed


class ClockJump(BaseNemesis):
    name = "clock"
    summary = "jump the wall clock of a majority of DB nodes +60 s (libfaketime), verified"

    def __init__(self, offset: float = 60.0) -> None:
        self.offset = offset
        self._detail: dict[str, Any] | None = None

    def setup(self, ctx: NemesisContext) -> None:
        if not hasattr(ctx.db, "read_clock"):
            raise RuntimeError(f"{ctx.db.name} cannot report its clock")

    def select(self, ctx: NemesisContext) -> list[str] | None:
        wait_for_holder(ctx)  # jump while a lease is held: that is when it hurts
        n = len(ctx.nodes)
        chosen = ctx.rng.sample(ctx.nodes, n // 2 + 1 if n > 1 else 1)
        return sorted(node.name for node in chosen)

    def start(self, ctx: NemesisContext, targets: list[str]) -> None:
        self._detail = {"offset": self.offset, "observed": self._move(ctx, targets, self.offset)}

    def stop(self, ctx: NemesisContext, targets: list[str]) -> None:
        self._detail = {"offset": 0, "observed": self._move(ctx, targets, 0.0)}

    def detail(self) -> dict[str, Any] | None:
        return self._detail

    def teardown(self, ctx: NemesisContext) -> None:
        self._move(ctx, [n.name for n in ctx.nodes], 0.0)

    def _move(self, ctx: NemesisContext, targets: list[str], offset: float) -> dict[str, float]:
        for name in targets:
            ctx.backend.set_clock(ctx.node(name), offset)
        return {name: verify(ctx, name, offset) for name in targets}


def observed_offset(ctx: NemesisContext, name: str) -> float:
    before = time.time()
    node_clock = ctx.db.read_clock(ctx.node(name))  # type: ignore[attr-defined]
    after = time.time()
    return node_clock - (before + after) / 2


def verify(ctx: NemesisContext, name: str, offset: float, timeout: float = 3.0) -> float:
    """Read the node's clock until it shows ``offset``; raise if it never does."""
    deadline = time.monotonic() + timeout
    while True:
        seen = observed_offset(ctx, name)
        if abs(seen - offset) <= TOLERANCE:
            return round(seen, 3)
        if time.monotonic() > deadline:
            raise RuntimeError(f"{name}: clock offset is {seen:+.2f} s, not {offset:+.0f} s: "
                               "libfaketime does not reach this server")
        time.sleep(0.05)
