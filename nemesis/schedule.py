"""The fault schedule: a thread that picks a fault, holds it, heals it, and journals each step.

Each start and stop is two ops of process ``nemesis`` in the history: an ``invoke`` just before
the fault is applied and an ``info`` just after, with its targets. Whatever happens, ``finish``
heals everything (every nemesis's teardown), and that is journaled too.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass, field
from typing import Any

from harness.history import INFO, INVOKE, JournalWriter
from nemesis.base import Nemesis, NemesisContext


@dataclass
class Fault:
    f: str
    targets: list[str]
    start: float
    stop: float | None = None
    detail: dict[str, Any] | None = None


@dataclass
class Schedule:
    nemeses: list[Nemesis]
    ctx: NemesisContext
    journal: JournalWriter
    interval: tuple[float, float] = (1.0, 3.0)
    done: threading.Event = field(default_factory=threading.Event)
    faults: list[Fault] = field(default_factory=list)
    active: Fault | None = None
    errors: list[str] = field(default_factory=list)
    _thread: threading.Thread | None = None

    def start(self) -> None:
        for nem in self.nemeses:
            nem.setup(self.ctx)
        if self.nemeses:
            self._thread = threading.Thread(target=self._run, name="nemesis", daemon=True)
            self._thread.start()

    def _run(self) -> None:
        rng = self.ctx.rng
        while not self.done.wait(rng.uniform(*self.interval)):
            nem = rng.choice(self.nemeses)
            try:
                self._one(nem)
            except Exception as e:  # a fault that cannot be applied is recorded, not fatal
                self.errors.append(f"{nem.name}: {type(e).__name__}: {e}")
                self.journal.record(INFO, nem.name, "start", error=str(e)[:200])
                self.active = None

    def _one(self, nem: Nemesis) -> None:
        targets = nem.select(self.ctx)
        if targets is None or self.done.is_set():
            return
        self.journal.record(INVOKE, nem.name, "start", targets=targets)
        nem.start(self.ctx, targets)
        op = self.journal.record(INFO, nem.name, "start", targets=targets, **_detail(nem))
        fault = Fault(nem.name, targets, op["time"] / 1e9, detail=nem.detail())
        self.faults.append(fault)
        self.active = fault
        self.done.wait(nem.duration(self.ctx))
        self._stop(nem, fault)

    def _stop(self, nem: Nemesis, fault: Fault) -> None:
        self.journal.record(INVOKE, nem.name, "stop", targets=fault.targets)
        nem.stop(self.ctx, fault.targets)
        op = self.journal.record(INFO, nem.name, "stop", targets=fault.targets, **_detail(nem))
        fault.stop = op["time"] / 1e9
        self.active = None

    def finish(self, timeout: float = 60.0) -> None:
        """Stop scheduling, heal the active fault, then heal everything."""
        self.done.set()
        self.ctx.finishing.set()
        if self._thread is not None:
            self._thread.join(timeout)
        for nem in self.nemeses:
            self.journal.record(INVOKE, nem.name, "heal")
            try:
                nem.teardown(self.ctx)
                self.journal.record(INFO, nem.name, "heal")
            except Exception as e:
                self.errors.append(f"{nem.name} heal: {type(e).__name__}: {e}")
                self.journal.record(INFO, nem.name, "heal", error=str(e)[:200])

    def describe_active(self) -> str:
        a = self.active
        return "-" if a is None else f"{a.f}({','.join(a.targets)})"


def _detail(nem: Nemesis) -> dict[str, Any]:
    d = nem.detail() if hasattr(nem, "detail") else None
    return {"detail": d} if d else {}
