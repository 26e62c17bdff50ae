"""``crash-client``: SIGKILL a client process at a chosen step of its lock protocol.

The nemesis arms one live client (workloads/crash.py): the client kills itself when it next
reaches the step, by default the lock's own crash point (``after-setnx`` for
``redis-setnx-expire``: the key is set, its EXPIRE never comes), else ``holding`` (inside the
critical section, lock held). Option ``crash-step`` picks another (``--nemesis-opt
crash-step=holding``).

The crashed client stays dead and the others go on (its op in flight stays without completion:
indeterminate, as the history contract says). At least two clients are always left alive.
The fault's record says which client, the step, whether it died and how long that took.
"""

from __future__ import annotations

import time

from harness.core.cluster import NemesisContext, client_name, process_of
from harness.core.fault_run import FaultRun
from harness.core.options import Option
from nemesis.base import BaseNemesis

AUTO = "auto"  # the lock's own first crash step, else "holding" (workloads/crash.py)

MIN_ALIVE = 2
POLL = 0.02


class CrashClient(BaseNemesis):
    name = "crash-client"
    summary = ("SIGKILL a client at a step of its lock protocol (default: the lock's own, "
               "e.g. between SETNX and EXPIRE); it stays dead")
    targets = ("any", "client:N")
    colour = "#bf3989"

    @classmethod
    def describe(cls, run: FaultRun) -> str:
        return f"a crash of {run.who()} {run.when()}"
    options = {
        "crash-step": Option(str, AUTO, "the step to die at: auto (the lock's own), holding, "
                             "or a step the lock names (after-setnx)"),
        "crash-wait": Option(float, None, "seconds to wait for the client to reach the step "
                             "(default max(5, 3 TTL))", minimum=0.1, maximum=3600),
    }

    def wait_limit(self, ctx: NemesisContext) -> float:
        wait = ctx.options.get("crash-wait")
        return float(max(5.0, 3 * ctx.ttl) if wait is None else wait)

    def select(self, ctx: NemesisContext, target: str | None = None) -> list[str] | None:
        candidates = [p for p in ctx.clients.alive() if p not in ctx.clients.doomed]
        if len(candidates) <= MIN_ALIVE:
            return None
        if target is not None and target.startswith("client:"):
            p = int(target.split(":", 1)[1])
            return [client_name(p)] if p in candidates else None
        return [client_name(ctx.rng.choice(candidates))]

    def start(self, ctx: NemesisContext, targets: list[str]) -> None:
        step = str(ctx.options.get("crash-step", AUTO))
        p = process_of(targets[0])
        ctx.clients.arm_crash(p, step)
        began = time.monotonic()
        deadline = began + self.wait_limit(ctx)
        while time.monotonic() < deadline and p in ctx.clients.alive():
            time.sleep(POLL)
        died = p not in ctx.clients.alive()
        if died:
            ctx.live.forget(p)
        else:
            ctx.clients.disarm_crash(p)
        self._detail = {
            "step": step,
            "crashed": died,
            "crashed-at": ctx.clients.crashed_at(p) if died else None,
            "after-s": round(time.monotonic() - began, 3),
        }

    def duration(self, ctx: NemesisContext) -> float:
        return 0.0  # nothing to hold: the client stays dead

    def stop(self, ctx: NemesisContext, targets: list[str]) -> None:
        self._detail = None

    def teardown(self, ctx: NemesisContext) -> None:
        for p in ctx.clients.processes:
            ctx.clients.disarm_crash(p)
