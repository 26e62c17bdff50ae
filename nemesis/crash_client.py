"""``crash-client``: SIGKILL a client process at a chosen step of its lock protocol.

The nemesis arms live clients (workloads/crash.py): an armed client kills itself when it next
reaches the step, by default the lock's own crash point (``after-setnx`` for
``redis-setnx-expire``: the key is set, its EXPIRE never comes), else ``holding`` (inside the
critical section, lock held). Option ``crash-step`` picks another (``--nemesis-opt
crash-step=holding``).

Aimed, not hoped for: only the client that wins the lock reaches those steps, so arming one
client at random waits for it to win (one grant in five, with five clients), and on a slow
machine the crash came late or never. Target ``any`` arms every live client but two: the
first of them to reach the step dies, the others are disarmed at once (and, once seen alive
after that, are ordinary clients again). ``client:N`` arms that one only.

The crashed client stays dead and the others go on (its op in flight stays without completion:
indeterminate, as the history contract says). At least two clients are always left alive.
The fault's start invoke names the clients armed, its start info the ones that died (the
checkers' crashed processes); its detail says the step, whether one died and how long that
took. A crash that killed nobody is ineffective (the faults checker's ``crashes`` claim).
"""

from __future__ import annotations

import time
from typing import Any

from harness.core.cluster import NemesisContext, client_name, process_of
from harness.core.fault_run import FaultRun
from harness.core.options import Option
from nemesis.base import BaseNemesis

AUTO = "auto"  # the lock's own first crash step, else "holding" (workloads/crash.py)

MIN_ALIVE = 2
POLL = 0.02
SETTLE = 0.2  # seconds for a disarmed client to have read its disarming (SIGUSR1)


class CrashClient(BaseNemesis):
    name = "crash-client"
    summary = ("SIGKILL the next client to reach a step of its lock protocol (default: the "
               "lock's own, e.g. between SETNX and EXPIRE); it stays dead")
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
        armed = ctx.rng.sample(candidates, len(candidates) - MIN_ALIVE)
        return [client_name(p) for p in armed]

    def start(self, ctx: NemesisContext, targets: list[str]) -> None:
        """Arm ``targets``, wait for the first of them to die at the step, disarm the rest;
        ``targets`` becomes the clients that died (all armed ones if none did), which the
        start info records."""
        step = str(ctx.options.get("crash-step", AUTO))
        armed = [process_of(t) for t in targets]
        for p in armed:
            ctx.clients.arm_crash(p, step)
        began = time.monotonic()
        deadline = began + self.wait_limit(ctx)
        while time.monotonic() < deadline and set(armed) <= set(ctx.clients.alive()):
            time.sleep(POLL)
        after = time.monotonic() - began
        alive = set(ctx.clients.alive())
        for p in armed:
            if p in alive:  # (a dead one's crash file keeps the step it died at)
                ctx.clients.disarm_crash(p)
        time.sleep(SETTLE)  # one that reached the step before it read its disarming dies too
        alive = set(ctx.clients.alive())
        died = [p for p in armed if p not in alive]
        for p in armed:
            if p in alive:
                ctx.clients.doomed.discard(p)  # seen alive after its disarming: spared
            else:
                ctx.live.forget(p)
        if died:
            targets[:] = [client_name(p) for p in died]
        self._detail = {
            "step": step,
            "crashed": bool(died),
            "crashed-at": ctx.clients.crashed_at(died[0]) if died else None,
            "armed": [client_name(p) for p in armed],
            "after-s": round(after, 3),
        }

    def expect(self, ctx: NemesisContext, targets: list[str]) -> dict[str, Any] | None:
        return {"crashes": self._detail["step"] if self._detail else None}

    def duration(self, ctx: NemesisContext) -> float:
        return 0.0  # nothing to hold: the client stays dead

    def stop(self, ctx: NemesisContext, targets: list[str]) -> None:
        self._detail = None

    def teardown(self, ctx: NemesisContext) -> None:
        for p in ctx.clients.processes:
            ctx.clients.disarm_crash(p)
