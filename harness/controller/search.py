"""Searching fault schedules for a violation, and shrinking the one found.

Hypothesis draws schedules (:class:`Space`: steps from a menu of faults, each with an offset,
a duration and a target role), and its shrinker cuts a failing one down to the smallest it can
find. Each example is judged by a *run function* the caller gives (``harness explore`` runs a
real test in a child process; the tests give a pure stand-in), so this module never starts a
server itself.

A schedule counts as failing only if it fails in K of K runs (``replays``): one invalid run
could be luck of the timing, and a shrinker that chases luck ends up with a schedule that does
not reproduce. A schedule's verdict is kept, so hypothesis asking again (it replays what it
found) costs nothing and always gets the same answer. ``budget`` caps the runs: once it is
spent, every new schedule is answered "passes" without running, which ends generation and
shrinking at once; the trial under way still finishes its K replays (so a failure found on
the last run of the budget is confirmed, at most K - 1 runs past it).

With ``jobs`` > 1, :class:`harness.controller.lookahead.Lookahead` runs the runs the search is
likely to need next while it waits for the one it needs now; the search consumes them in its
own order, so for the same seed it tries, finds and shrinks to the same schedules as with one
job (given the same verdicts). Runs made ahead and never needed are ``spare``: recorded, not
charged to the budget (at most ``budget`` runs are started in all, besides those needed).
"""

from __future__ import annotations

import contextlib
import random
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any

from harness.controller.lookahead import Lookahead, Spare
from harness.controller.registry import Registry, default_registry
from harness.controller.spec import TestSpec, make_db, nemesis_name, nemesis_target
from harness.core.capabilities import HasLeader
from harness.core.errors import EXIT_INVALID, EXIT_SETUP, EXIT_USAGE, UsageError
from harness.core.schedule import Schedule, Step

TICK = 0.1  # offsets and durations are drawn in tenths of a second
ABORT_AFTER = 3  # runs in a row the harness could not run: the search stops, saying why


@dataclass(frozen=True)
class Choice:
    """One item of the menu: a fault and the target roles a step of it may take (the first
    is the simplest, where hypothesis shrinks to; ``None``: the fault's own choice)."""

    fault: str
    roles: tuple[str | None, ...]


@dataclass(frozen=True)
class Space:
    """The schedules the search draws from."""

    choices: tuple[Choice, ...]
    horizon: float  # steps start in [0, horizon] seconds after the load starts
    durations: tuple[float, float]  # seconds a fault stays on
    max_steps: int
    left_out: tuple[str, ...] = ()  # menu items that cannot run on this cluster, and why

    def strategy(self) -> Any:
        """A hypothesis strategy of :class:`Schedule` (steps sorted by offset)."""
        from hypothesis import strategies as st

        lo, hi = self.durations
        ticks_at = round(self.horizon / TICK)
        ticks_on = round((hi - lo) / TICK)

        @st.composite
        def step(draw: Any) -> Step:
            choice = draw(st.sampled_from(self.choices))
            at = draw(st.integers(0, ticks_at)) * TICK
            duration = lo + draw(st.integers(0, ticks_on)) * TICK
            # the fault's own target half the time (a pause is meant for the holder), any
            # role it takes otherwise; either shrinks to the fault's own
            target = draw(st.one_of(st.just(choice.roles[0]), st.sampled_from(choice.roles)))
            return Step(round(at, 3), choice.fault, target, round(duration, 3))

        return st.lists(step(), max_size=self.max_steps).map(
            lambda steps: Schedule(tuple(sorted(steps, key=lambda s: (s.at, s.fault)))))

    def describe(self) -> str:
        faults = ", ".join(f"{c.fault} ({'/'.join(r or 'its own' for r in c.roles)})"
                           for c in self.choices)
        out = (f"up to {self.max_steps} step(s) starting within {self.horizon:g} s, each on "
               f"for {self.durations[0]:g}-{self.durations[1]:g} s, from: {faults}")
        if self.left_out:
            out += f"; left out: {'; '.join(self.left_out)}"
        return out


def roles_for(cls: type, nodes: Sequence[str], clients: int, db: Any) -> tuple[str | None, ...]:
    """The target roles a step of nemesis ``cls`` may take on this cluster, its default first.
    Roles that are the same thing here are drawn once (on one node, ``all`` is ``any``)."""
    declared = tuple(getattr(cls, "targets", ()) or ())
    if not declared:
        return (None,)
    out: list[str] = []
    for role in declared:
        if role == "client:N":
            out.extend(f"client:{p}" for p in range(clients))
        elif role == "node:NAME":
            if len(nodes) > 1:
                out.extend(f"node:{n}" for n in nodes)
        elif role in ("leader", "follower"):
            if isinstance(db, HasLeader):
                out.append(role)
        elif role == "minority":
            if len(nodes) >= 3:
                out.append(role)
        elif role in ("majority", "all") and len(nodes) == 1:
            continue
        else:
            out.append(role)
    default = getattr(cls, "default_target", None) or (out[0] if out else None)
    if default is not None and len(nodes) == 1 and default in ("majority", "all"):
        default = "any" if "any" in out else default
    if default in out:
        out.remove(default)
    return (default, *out) if default is not None else (None, *out)


def space_for(spec: TestSpec, menu: Sequence[str], registry: Registry | None = None, *,
              max_steps: int | None = None) -> Space:
    """The space of schedules over ``menu`` (``FAULT`` or ``FAULT:ROLE``) for this spec."""
    reg = registry or default_registry()
    if not menu:
        raise UsageError("--menu is empty: name the faults to search, e.g. --menu "
                         "pause,pause-node,kill")
    assert spec.nodes is not None
    db = make_db(reg.load("dbs", spec.db), spec.persistence)
    nodes = [f"n{i + 1}" for i in range(spec.nodes)]
    choices, left_out = [], []
    for item in menu:
        name, role = nemesis_name(item), nemesis_target(item)
        cls = reg.load("nemeses", name)
        least = int(getattr(cls, "min_nodes", 1) or 1)
        if len(nodes) < least:
            left_out.append(f"{name} (needs {least} DB nodes, --db {spec.db} has {len(nodes)}: "
                            "every step of it would be skipped)")
            continue
        roles = (role,) if role is not None else roles_for(cls, nodes, spec.clients, db)
        choices.append(Choice(name, roles))
    if not choices:
        raise UsageError(f"nothing in --menu can run here: {'; '.join(left_out)}")
    horizon = max(0.5, round(spec.time_limit - 1.0, 1))
    longest = max(1.0, min(3 * spec.ttl, spec.time_limit))
    steps = max_steps if max_steps is not None else max(1, min(8, int(spec.time_limit // 2)))
    if steps < 1 or steps > 50:
        raise UsageError(f"--max-steps must be 1 to 50, got {steps}")
    return Space(tuple(choices), horizon, (0.5, round(longest, 1)), steps, tuple(left_out))


# one run, one schedule tried -----------------------------------------------------------------
@dataclass
class Outcome:
    """How one run of a schedule ended: its exit code (0 valid, 1 invalid, 2 unknown, 3 it
    could not run), its run directory, how long it took, a line on what went wrong."""

    code: int
    run: str | None = None
    seconds: float = 0.0
    note: str = ""
    interrupted: bool = False

    @property
    def invalid(self) -> bool:
        return self.code == EXIT_INVALID

    @property
    def could_not_run(self) -> bool:
        return self.code in (EXIT_SETUP, EXIT_USAGE) or self.code < 0


@dataclass
class Trial:
    """A schedule and its runs (at most K; it stops at the first that does not fail)."""

    n: int
    schedule: Schedule
    replays: int
    outcomes: list[Outcome] = field(default_factory=list)

    @property
    def failing(self) -> bool:
        return len(self.outcomes) == self.replays and all(o.invalid for o in self.outcomes)

    @property
    def invalid_runs(self) -> int:
        return sum(o.invalid for o in self.outcomes)


RunFunction = Callable[[Schedule, Trial], Outcome]


@dataclass
class Search:
    """One search: ``execute()`` runs it; then ``first`` is the first failing trial,
    ``minimal`` the smallest failing one, ``trials`` everything tried, ``stopped`` why it
    ended early (interrupted, or the harness could not run the test)."""

    space: Space
    run: RunFunction
    budget: int
    replays: int = 2
    seed: int = 0
    on_run: Callable[[Search, Trial, Outcome], None] | None = None
    runs: int = 0
    trials: list[Trial] = field(default_factory=list)
    first: Trial | None = None
    stopped: str | None = None
    started: float = field(default_factory=time.monotonic)
    hypothesis_minimal: Schedule | None = None
    jobs: int = 1
    on_interrupt: Callable[[], None] | None = None  # Ctrl-C while runs are in worker threads
    spare: list[Spare[Outcome]] = field(default_factory=list)
    _seen: dict[str, Trial] = field(default_factory=dict)
    _could_not: int = 0
    _ahead: Lookahead[Outcome] | None = None

    def __post_init__(self) -> None:
        check_limits(self.budget, self.replays)

    # the search --------------------------------------------------------------------------------
    def execute(self) -> Search:
        from hypothesis import HealthCheck, Phase, Verbosity, find, settings
        from hypothesis.errors import NoSuchExample

        # No example database: a seeded search is repeatable, and hypothesis ignores its
        # database under a seed anyway; what persists is minimal.toml. (Nothing is written
        # in the working directory: no .hypothesis/.)
        config = settings(max_examples=max(100, 5 * self.budget), deadline=None,
                          database=None, phases=[Phase.generate, Phase.shrink],
                          verbosity=Verbosity.quiet, suppress_health_check=list(HealthCheck))
        if self.jobs > 1:
            self._ahead = Lookahead(self._run_replay, self.jobs, self.replays,
                                    self.generated(config), self.budget, self.on_interrupt)
        try:
            with _patient_shrinker():
                self.hypothesis_minimal = find(self.space.strategy(), self.failing,
                                               settings=config, random=random.Random(self.seed))
        except NoSuchExample:
            pass
        except KeyboardInterrupt:
            self.stopped = "interrupted"
            if self._ahead is not None and self.on_interrupt is not None:
                self.on_interrupt()  # the runs made ahead heal, save and end
        finally:
            if self._ahead is not None:
                self.spare = self._ahead.close()
        return self

    def generated(self, config: Any) -> list[Schedule]:
        """The schedules this seeded search generates while every answer is "passes", in its
        order, each once (nothing runs: hypothesis is answered at once); at most ``budget``."""
        from hypothesis import find
        from hypothesis.errors import NoSuchExample

        order: dict[str, Schedule] = {}

        def passes(schedule: Schedule) -> bool:
            order.setdefault(schedule.key(), schedule)
            if len(order) >= self.budget:
                raise _Enough
            return False

        with contextlib.suppress(NoSuchExample, _Enough):
            find(self.space.strategy(), passes, settings=config, random=random.Random(self.seed))
        return list(order.values())[:self.budget]  # past it, hypothesis shrank _Enough

    def _run_replay(self, schedule: Schedule, replay: int) -> Outcome:
        """A run of the lookahead (in a worker thread): the run function sees the trial as the
        search would when it asks for this replay (the earlier ones failed)."""
        earlier = [Outcome(EXIT_INVALID) for _ in range(replay)]
        return self._call(schedule, Trial(0, schedule, self.replays, earlier))

    def failing(self, schedule: Schedule) -> bool:
        """The condition hypothesis searches with: does ``schedule`` fail K of K times?"""
        key = schedule.key()
        if key in self._seen:
            return self._seen[key].failing
        if self.stopped is not None or self.runs >= self.budget:
            return False  # not recorded: spending nothing more, so this ends the search
        trial = Trial(len(self.trials) + 1, schedule, self.replays)
        self.trials.append(trial)
        self._seen[key] = trial
        for _ in range(self.replays):
            outcome = self._one(schedule, trial)
            trial.outcomes.append(outcome)
            self.runs += 1
            if self.on_run is not None:
                self.on_run(self, trial, outcome)
            if not outcome.invalid or self.stopped is not None:
                break
        if trial.failing and self.first is None:
            self.first = trial
        return trial.failing

    def _call(self, schedule: Schedule, trial: Trial) -> Outcome:
        try:
            return self.run(schedule, trial)
        except Exception as e:  # a bug of the run function: stop, saying what it was
            return Outcome(EXIT_SETUP, note=f"{type(e).__name__}: {e}")

    def _one(self, schedule: Schedule, trial: Trial) -> Outcome:
        if self._ahead is not None:
            outcome = self._ahead.outcome(schedule, len(trial.outcomes))
        else:
            outcome = self._call(schedule, trial)
        if outcome.interrupted:
            self.stopped = "interrupted"
        elif outcome.could_not_run:
            self._could_not += 1
            if self._could_not >= ABORT_AFTER or self.runs == 0:
                self.stopped = f"the harness could not run the test: {outcome.note}"
        else:
            self._could_not = 0
        return outcome

    # what it found -----------------------------------------------------------------------------
    @property
    def failing_trials(self) -> list[Trial]:
        return [t for t in self.trials if t.failing]

    @property
    def minimal(self) -> Trial | None:
        """The smallest failing schedule tried (fewest steps, then least time under faults);
        hypothesis's own answer wins ties."""
        found = self.failing_trials
        if not found:
            return None
        mine = self.hypothesis_minimal.key() if self.hypothesis_minimal is not None else None
        return min(found, key=lambda t: (t.schedule.size(), t.schedule.key() != mine, t.n))

    @property
    def invalid_runs(self) -> int:
        return sum(t.invalid_runs for t in self.trials)

    def elapsed(self) -> float:
        return time.monotonic() - self.started

    def mean_run_seconds(self) -> float | None:
        times = [o.seconds for t in self.trials for o in t.outcomes if o.seconds > 0]
        return sum(times) / len(times) if times else None


class _Enough(Exception):
    """Ends the dry search of :meth:`Search.generated`: it has as many schedules as the budget
    can run."""


def check_limits(budget: int, replays: int) -> None:
    if budget < 1:
        raise UsageError(f"--budget must be at least 1 run, got {budget}")
    if not 1 <= replays <= 20:
        raise UsageError(f"--replays must be 1 to 20, got {replays}")


@contextlib.contextmanager
def _patient_shrinker() -> Iterator[None]:
    """Hypothesis stops shrinking after five minutes by default: a fine limit for unit tests,
    not for examples that each take a real run. The budget bounds the search instead. (The
    engine documents this constant as one users may raise.)"""
    from hypothesis.internal.conjecture import engine

    before = engine.MAX_SHRINKING_SECONDS
    engine.MAX_SHRINKING_SECONDS = 10**9
    try:
        yield
    finally:
        engine.MAX_SHRINKING_SECONDS = before
