"""Running a fault schedule: a thread that takes the steps in order, injects each fault at its
offset, holds it, heals it, and journals every move.

Each start and stop is two ops of process ``nemesis`` in the history: an ``invoke`` just before
the fault is applied and an ``info`` just after, with the step's number, the target role and
the endpoints it resolved to. A step never starts before the previous one has healed (it then
starts late, and its record says when it really started). Whatever happens, :meth:`finish` heals
everything (every nemesis's teardown), and that is journaled too.

:func:`generate` turns ``--nemesis a,b`` into a schedule: a fault every 1-3 s, chosen at random
among the named ones, each for its own default duration, all drawn from the run's seed.
"""

from __future__ import annotations

import contextlib
import dataclasses
import random
import threading
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from harness.core.cluster import NemesisContext
from harness.core.errors import UsageError
from harness.core.history import INFO, INVOKE
from harness.core.journal import JournalWriter
from harness.core.roles import Nemesis
from harness.core.schedule import Schedule, Step, from_dict

INTERVAL = (1.0, 3.0)  # seconds between the heal of one fault and the start of the next


def generate(names: Sequence[str], nemeses: Mapping[str, Nemesis], ctx: NemesisContext,
             time_limit: float, rng: random.Random, targets: Mapping[str, str | None] | None = None
             ) -> Schedule:
    """A random schedule over ``names`` that fills ``time_limit`` seconds."""
    steps: list[Step] = []
    t = 0.0
    while names and len(steps) < 10_000:
        t += rng.uniform(*INTERVAL)
        if t >= time_limit:
            break
        name = rng.choice(list(names))
        duration = float(nemeses[name].duration(dataclasses.replace(ctx, rng=rng)))
        steps.append(Step(round(t, 3), name, (targets or {}).get(name), round(duration, 3)))
        t += duration
    return Schedule(tuple(steps))


@dataclass
class Fault:
    """One step as it ran."""

    step: int
    f: str
    target: str | None
    targets: list[str]
    planned: float
    start: float
    stop: float | None = None
    detail: dict[str, Any] | None = None
    error: str | None = None
    duration: float | None = None  # seconds it was to stay on (the step's, or the fault's own)
    began: float | None = None  # when it began to be applied (``start``: when it was on)


@dataclass
class FaultRunner:
    nemeses: dict[str, Nemesis]
    schedule: Schedule
    ctx: NemesisContext
    journal: JournalWriter
    t0: float = 0.0  # time.monotonic() of the load's start: the steps' offsets count from it
    done: threading.Event = field(default_factory=threading.Event)
    faults: list[Fault] = field(default_factory=list)
    skipped: list[dict[str, Any]] = field(default_factory=list)
    active: Fault | None = None
    errors: list[str] = field(default_factory=list)
    _thread: threading.Thread | None = None

    def start(self) -> None:
        """Set every nemesis up, then run the steps on a thread of their own."""
        for nem in self.nemeses.values():
            nem.setup(self.ctx)
        self.t0 = self.t0 or time.monotonic()
        if self.schedule.steps:
            self._thread = threading.Thread(target=self._run, name="nemesis", daemon=True)
            self._thread.start()

    def elapsed(self) -> float:
        return time.monotonic() - self.t0

    def _run(self) -> None:
        for i, step in enumerate(self.schedule.steps):
            if self.done.wait(max(0.0, step.at - self.elapsed())):
                for j in range(i, len(self.schedule.steps)):
                    self._skip(j, self.schedule.steps[j], "the run ended before it was due")
                return
            nem = self.nemeses[step.fault]
            ctx = (dataclasses.replace(self.ctx, options={**self.ctx.options, **step.params})
                   if step.params else self.ctx)
            try:
                self._one(i, step, nem, ctx)
            except Exception as e:  # a fault that cannot be applied is recorded, not fatal
                self.errors.append(f"{step.fault}: {type(e).__name__}: {e}")
                self.journal.record(INFO, step.fault, "start", step=i, target=step.target,
                                    error=str(e)[:200])
                if self.active is not None:
                    self.active.error = str(e)[:200]
                self.active = None

    def _one(self, i: int, step: Step, nem: Nemesis, ctx: NemesisContext) -> None:
        targets = nem.select(ctx, step.target)
        if targets is None or self.done.is_set():
            role = step.target or "target"
            self._skip(i, step, f"no {role} right now" if targets is None
                       else "the run ended while it looked for its target")
            return
        began = self.journal.record(INVOKE, nem.name, "start", step=i, target=step.target,
                                    targets=targets)
        try:
            nem.start(ctx, targets)
        except Exception:
            with contextlib.suppress(Exception):  # undo what did happen before reporting it
                nem.stop(ctx, targets)
            raise
        expect = nem.expect(ctx, targets) if hasattr(nem, "expect") else None
        op = self.journal.record(INFO, nem.name, "start", step=i, target=step.target,
                                 targets=targets, expect=expect, **_detail(nem))
        duration = float(step.duration if step.duration is not None else nem.duration(ctx))
        fault = Fault(i, nem.name, step.target, targets, step.at, op["time"] / 1e9,
                      detail=nem.detail(), duration=round(duration, 3),
                      began=began["time"] / 1e9)
        self.faults.append(fault)
        self.active = fault
        self.done.wait(duration)
        self.journal.record(INVOKE, nem.name, "stop", step=i, targets=fault.targets)
        nem.stop(ctx, fault.targets)
        op = self.journal.record(INFO, nem.name, "stop", step=i, targets=fault.targets,
                                 **_detail(nem))
        fault.stop = op["time"] / 1e9
        self.active = None

    def _skip(self, i: int, step: Step, why: str) -> None:
        self.skipped.append({"step": i, "fault": step.fault, "target": step.target,
                             "at": round(self.elapsed(), 3), "why": why})

    def finish(self, timeout: float = 60.0) -> None:
        """Stop scheduling, heal the active fault, then heal everything."""
        self.done.set()
        self.ctx.finishing.set()
        if self._thread is not None:
            self._thread.join(timeout)
        for name, nem in self.nemeses.items():
            self.journal.record(INVOKE, name, "heal")
            try:
                nem.teardown(self.ctx)
                self.journal.record(INFO, name, "heal")
            except Exception as e:
                self.errors.append(f"{name} heal: {type(e).__name__}: {e}")
                self.journal.record(INFO, name, "heal", error=str(e)[:200])

    def describe_active(self) -> str:
        a = self.active
        return "-" if a is None else f"{a.f}({','.join(a.targets)})"

    def record(self) -> dict[str, Any]:
        """What test.json keeps: the plan, what ran, what was skipped, what failed."""
        return {"schedule": self.schedule.to_dict(),
                "faults": [f.__dict__ for f in self.faults],
                "skipped-steps": self.skipped,
                "nemesis-errors": self.errors}


def as_ran(test: Mapping[str, Any], where: str = "test.json") -> Schedule:
    """The schedule a run recorded, each step with the duration it ran with (a step planned
    without one took its fault's own, drawn at run time): what ``harness run --replay RUN_DIR``
    runs again. Steps that were skipped are kept as planned: they may find a target this time.
    """
    if not isinstance(test.get("schedule"), Mapping):
        raise UsageError(f"{where} records no fault schedule (a run that ended before its "
                         "faults started, or one from an older harness)")
    plan = from_dict(test["schedule"], f"{where} schedule")
    durations: dict[int, float] = {}
    for fault in test.get("faults") or []:
        if isinstance(fault, Mapping) and isinstance(fault.get("step"), int) and isinstance(
                fault.get("duration"), int | float) and not isinstance(fault["duration"], bool):
            durations[fault["step"]] = float(fault["duration"])
    return Schedule(tuple(
        dataclasses.replace(step, duration=durations[i]) if i in durations else step
        for i, step in enumerate(plan.steps)))


def _detail(nem: Nemesis) -> dict[str, Any]:
    d = nem.detail() if hasattr(nem, "detail") else None
    return {"detail": d} if d else {}
