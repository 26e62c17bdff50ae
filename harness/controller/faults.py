"""Running a fault schedule: a thread that takes the steps in order, injects each fault at its
offset, holds it, heals it, and journals every move.

Each start and stop is two ops of process ``nemesis`` in the history: an ``invoke`` just before
the fault is applied and an ``info`` just after, with the step's number, the target role, the
endpoints it resolved to and the fault's parameters (its options as they were for that step).
A step never starts before the previous one has healed (it then starts late, and its record
says when it really started), except a *background* step: a condition (a slow or lossy network,
replication lag) held on a thread of its own while the other steps come and go. Whatever
happens, :meth:`finish` heals everything (every nemesis's teardown), and that is journaled too.

:func:`generate` turns ``--nemesis a,b`` into a schedule: a fault every 1-3 s, chosen at random
among the named ones, each for its own default duration, all drawn from the run's seed. When
the named faults mix conditions (a nemesis that declares ``condition = True``) with others, the
conditions are held in the background from the first step to the end of the load and the others
come and go under them (``--nemesis lag-replication,failover``: every failover happens while
replication lags).
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
    conditions = [n for n in names if getattr(nemeses[n], "condition", False)]
    if conditions and len(conditions) < len(set(names)):
        t = rng.uniform(*INTERVAL)
        if t < time_limit:
            steps += [Step(round(t, 3), name, (targets or {}).get(name),
                           round(time_limit - t, 3), background=True) for name in conditions]
        names = [n for n in names if n not in conditions]
    while names and len(steps) < 10_000:
        t += rng.uniform(*INTERVAL)
        if t >= time_limit:
            break
        name = rng.choice(list(names))
        duration = float(nemeses[name].duration(dataclasses.replace(ctx, rng=rng)))
        steps.append(Step(round(t, 3), name, (targets or {}).get(name), round(duration, 3)))
        t += duration
    return Schedule(tuple(steps))


class FaultBroke(Exception):
    """A fault that started failed afterwards (its stop, or what it says about itself,
    raised): it may still be on, so the run's faults are no longer those its schedule says
    (the nemesis thread stops, and the run is exit 3)."""


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
    background: list[Fault] = field(default_factory=list)  # background faults on now
    errors: list[str] = field(default_factory=list)
    crashed: str | None = None  # why a nemesis thread stopped before its steps were done
    _threads: list[threading.Thread] = field(default_factory=list)
    _loaded: threading.Lock = field(default_factory=threading.Lock)  # one lane calls the hooks
    _load_seen: bool = False

    def start(self) -> None:
        """Set every nemesis up, then run the steps on a thread of their own (and each
        background step on one of its own)."""
        for nem in self.nemeses.values():
            nem.setup(self.ctx)
        self.t0 = self.t0 or time.monotonic()
        steps = list(enumerate(self.schedule.steps))
        lanes = [[(i, s) for i, s in steps if not s.background]]
        lanes += [[(i, s)] for i, s in steps if s.background]
        for n, lane in enumerate(x for x in lanes if x):
            thread = threading.Thread(target=self._run, args=(lane,), daemon=True,
                                      name="nemesis" if n == 0 else f"nemesis-{n}")
            self._threads.append(thread)
            thread.start()

    def elapsed(self) -> float:
        return time.monotonic() - self.t0

    def _run(self, lane: list[tuple[int, Step]]) -> None:
        """A lane of steps; anything that escapes it (a bug, a wait that cannot be waited)
        is ``crashed``, which ends the run with exit 3: faults that stopped mid-run tested
        less than the run claims, so no verdict is given."""
        try:
            self._wait_for_load()
            self._lane(lane)
        except BaseException as e:
            self.crashed = (str(e) if isinstance(e, FaultBroke) else
                            f"{type(e).__name__}: {e}")[:300]
            self.done.set()

    def _wait_for_load(self) -> None:
        """Faults begin once the load is up: every client alive has invoked an op (seen: a kill
        of dynalite at 1.3 s, a second before the first boto3 client had started, its clients'
        first ops all against a dead server). A step due before then starts late, as its record
        says; the run's end stops the wait."""
        live, clients = self.ctx.live, self.ctx.clients
        if live is not None and clients is not None:  # None: no load (a unit test's runner)
            while not self.done.is_set() and not live.running(clients.alive()):
                self.done.wait(0.05)
        self._load_started()

    def _load_started(self) -> None:
        """Once, as the load is up (every client set its lock up and invoked an op), before
        any lane's first step: each nemesis's optional ``load_started(ctx)`` (the power loss
        writes back what the servers wrote while they and the clients set up)."""
        with self._loaded:
            if self._load_seen or self.done.is_set():
                return
            self._load_seen = True
            for nem in self.nemeses.values():
                hook = getattr(nem, "load_started", None)
                if callable(hook):
                    hook(self.ctx)

    def _lane(self, lane: list[tuple[int, Step]]) -> None:
        for k, (i, step) in enumerate(lane):
            if self.done.wait(max(0.0, step.at - self.elapsed())):
                for j, left in lane[k:]:
                    self._skip(j, left, "the run ended before it was due")
                return
            nem = self.nemeses[step.fault]
            ctx = (dataclasses.replace(self.ctx, options={**self.ctx.options, **step.params})
                   if step.params else self.ctx)
            try:
                self._one(i, step, nem, ctx)
            except FaultBroke:
                raise
            except Exception as e:  # a fault that cannot be applied is recorded, not fatal
                self.errors.append(f"{step.fault}: {type(e).__name__}: {e}")
                self.journal.record(INFO, step.fault, "start", step=i, target=step.target,
                                    error=str(e)[:200], params=parameters(nem, ctx))
                fault = self._current(step)
                if fault is not None:
                    fault.error = str(e)[:200]
                self._set_current(step, None)

    def _current(self, step: Step) -> Fault | None:
        if not step.background:
            return self.active
        return next((f for f in self.background if f.f == step.fault), None)

    def _set_current(self, step: Step, fault: Fault | None) -> None:
        if not step.background:
            self.active = fault
        elif fault is not None:
            self.background.append(fault)
        else:
            self.background = [f for f in self.background if f.f != step.fault]

    def _one(self, i: int, step: Step, nem: Nemesis, ctx: NemesisContext) -> None:
        targets = nem.select(ctx, step.target)
        if targets is None or self.done.is_set():
            role = step.target or "target"
            self._skip(i, step, f"no {role} right now" if targets is None
                       else "the run ended while it looked for its target")
            return
        params = parameters(nem, ctx)
        under = {"background": True} if step.background else {}
        began = self.journal.record(INVOKE, nem.name, "start", step=i, target=step.target,
                                    targets=targets, params=params, **under)
        try:
            nem.start(ctx, targets)
        except Exception:
            with contextlib.suppress(Exception):  # undo what did happen before reporting it
                nem.stop(ctx, targets)
            raise
        try:
            self._on(i, step, nem, ctx, targets, params, began)
        except FaultBroke:
            raise
        except Exception as e:  # the fault is on and what it is cannot be told: heal, stop
            with contextlib.suppress(Exception):
                nem.stop(ctx, targets)
            raise FaultBroke(f"{nem.name} failed while on (step {i + 1}): "
                             f"{type(e).__name__}: {e}") from e

    def _on(self, i: int, step: Step, nem: Nemesis, ctx: NemesisContext, targets: list[str],
            params: dict[str, Any] | None, began: dict[str, Any]) -> None:
        """A fault that started: recorded, held for its duration, healed."""
        under = {"background": True} if step.background else {}
        expect = nem.expect(ctx, targets) if hasattr(nem, "expect") else None
        op = self.journal.record(INFO, nem.name, "start", step=i, target=step.target,
                                 targets=targets, expect=expect, params=params, **under,
                                 **_detail(nem))
        duration = float(step.duration if step.duration is not None else nem.duration(ctx))
        fault = Fault(i, nem.name, step.target, targets, step.at, op["time"] / 1e9,
                      detail=nem.detail(), duration=round(duration, 3),
                      began=began["time"] / 1e9)
        self.faults.append(fault)
        self._set_current(step, fault)
        self.done.wait(duration)
        self.journal.record(INVOKE, nem.name, "stop", step=i, targets=fault.targets,
                            params=params, **under)
        try:
            nem.stop(ctx, fault.targets)
        except Exception as e:  # the fault may still be on: what follows is not what ran
            raise FaultBroke(f"{nem.name} could not be healed (step {i + 1}): "
                             f"{type(e).__name__}: {e}") from e
        op = self.journal.record(INFO, nem.name, "stop", step=i, targets=fault.targets,
                                 params=params, **under, **_detail(nem))
        fault.stop = op["time"] / 1e9
        self._set_current(step, None)

    def _skip(self, i: int, step: Step, why: str) -> None:
        self.skipped.append({"step": i, "fault": step.fault, "target": step.target,
                             "at": round(self.elapsed(), 3), "why": why})

    def finish(self, timeout: float = 60.0) -> None:
        """Stop scheduling, heal the active faults, then heal everything."""
        self.done.set()
        self.ctx.finishing.set()
        deadline = time.monotonic() + timeout
        for thread in self._threads:
            thread.join(max(0.1, deadline - time.monotonic()))
        for name, nem in self.nemeses.items():
            self.journal.record(INVOKE, name, "heal")
            try:
                nem.teardown(self.ctx)
                self.journal.record(INFO, name, "heal")
            except Exception as e:
                self.errors.append(f"{name} heal: {type(e).__name__}: {e}")
                self.journal.record(INFO, name, "heal", error=str(e)[:200])

    def describe_active(self) -> str:
        on = [f for f in [*self.background, self.active] if f is not None]
        return "+".join(f"{a.f}({','.join(a.targets)})" for a in on) or "-"

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


def parameters(nem: Nemesis, ctx: NemesisContext) -> dict[str, Any] | None:
    """The nemesis's options as they are for this step (defaults filled in), for the
    history: every start and stop says what the fault was asked to do."""
    declared = getattr(nem, "options", None) or {}
    out = {k: ctx.options.get(k, opt.default) for k, opt in declared.items()}
    resolve = getattr(nem, "parameters", None)
    if callable(resolve):
        out.update(resolve(ctx))
    return {k: v for k, v in out.items() if v is not None} or None


def _detail(nem: Nemesis) -> dict[str, Any]:
    d = nem.detail() if hasattr(nem, "detail") else None
    return {"detail": d} if d else {}
