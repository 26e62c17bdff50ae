"""Faults on processes: pause the lock holder, pause a server, kill and restart a server."""

from __future__ import annotations

import time

from nemesis.base import BaseNemesis, NemesisContext, client_name

HOLDER_WAIT = 3.0  # seconds to wait for somebody to hold the lock


def wait_for_holder(ctx: NemesisContext, timeout: float = HOLDER_WAIT) -> int | None:
    deadline = time.monotonic() + timeout
    while True:
        holders = ctx.live.holders()
        if holders:
            return holders[0]
        if time.monotonic() >= deadline:
            return None
        time.sleep(0.01)


def process_of(target: str) -> int:
    return int(target.removeprefix("c"))


class PauseHolder(BaseNemesis):
    """SIGSTOP the client that holds the lock right now, for longer than the TTL, then SIGCONT.

    The paused process is frozen whole (renewal threads too), like a long GC pause: when it
    wakes up it still believes it holds the lock.
    """

    name = "pause"
    summary = "SIGSTOP the client holding the lock for longer than the TTL, then SIGCONT"

    def select(self, ctx: NemesisContext) -> list[str] | None:
        holder = wait_for_holder(ctx)
        return None if holder is None else [client_name(holder)]

    def start(self, ctx: NemesisContext, targets: list[str]) -> None:
        for t in targets:
            ctx.clients.pause(process_of(t))

    def stop(self, ctx: NemesisContext, targets: list[str]) -> None:
        for t in targets:
            ctx.clients.resume(process_of(t))

    def teardown(self, ctx: NemesisContext) -> None:
        for p in ctx.clients.processes:
            ctx.clients.resume(p)


class PauseNode(BaseNemesis):
    """SIGSTOP a server node for longer than the TTL, then SIGCONT."""

    name = "pause-node"
    summary = "SIGSTOP a DB server node for longer than the TTL, then SIGCONT"

    def select(self, ctx: NemesisContext) -> list[str] | None:
        return [ctx.rng.choice(ctx.nodes).name]

    def start(self, ctx: NemesisContext, targets: list[str]) -> None:
        for t in targets:
            ctx.backend.pause(ctx.node(t))

    def stop(self, ctx: NemesisContext, targets: list[str]) -> None:
        for t in targets:
            ctx.backend.resume(ctx.node(t))

    def teardown(self, ctx: NemesisContext) -> None:
        for node in ctx.nodes:
            ctx.backend.resume(node)


class KillNode(BaseNemesis):
    """SIGKILL a server node, then restart it (with whatever its persistence kept)."""

    name = "kill"
    summary = "SIGKILL a DB server node, restart it after a few seconds"

    def select(self, ctx: NemesisContext) -> list[str] | None:
        return [ctx.rng.choice(ctx.nodes).name]

    def duration(self, ctx: NemesisContext) -> float:
        return ctx.rng.uniform(1.0, 3.0)

    def start(self, ctx: NemesisContext, targets: list[str]) -> None:
        for t in targets:
            ctx.backend.kill(ctx.node(t))

    def stop(self, ctx: NemesisContext, targets: list[str]) -> None:
        for t in targets:
            self._restart(ctx, t)

    def _restart(self, ctx: NemesisContext, name: str) -> None:
        node = ctx.node(name)
        if not ctx.backend.is_running(node):
            ctx.backend.start(node)
            ctx.backend.wait_ready(node, 20)

    def teardown(self, ctx: NemesisContext) -> None:
        for node in ctx.nodes:
            self._restart(ctx, node.name)
