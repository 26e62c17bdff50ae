"""The search over fault schedules and its shrinking (issue 16), on cheap stand-in run functions:
pure fakes whose verdict is a function of the schedule (and, for noise, of the replay), so
hundreds of "runs" take a second and no server starts. The real search is in
test_explore_runs.py."""

from __future__ import annotations

import threading
import time
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from harness.controller.lookahead import Lookahead
from harness.controller.registry import default_registry
from harness.controller.search import Outcome, Search, Space, Trial, roles_for, space_for
from harness.controller.spec import TestSpec
from harness.core.errors import UsageError
from harness.core.schedule import Schedule, Step

TTL = 2.0


def setnx_space() -> Space:
    spec = TestSpec.from_dict({"lock": "redis-setnx", "time_limit": 8.0,
                               "nemesis": "pause,pause-node,partition-minority"}).validate()
    return space_for(spec, spec.nemesis)


def breaks(step: Step) -> bool:
    """The lock's one weakness: its holder paused past the TTL."""
    return step.fault == "pause" and step.target == "holder" and (step.duration or 0) > TTL


def lease_bug(schedule: Schedule, trial: Trial) -> Outcome:
    return Outcome(1 if any(breaks(s) for s in schedule.steps) else 0, seconds=1.0)


def redlock_space() -> Space:
    spec = TestSpec.from_dict({"lock": "redlock", "db": "redis-masters", "time_limit": 8.0,
                               "nemesis": "pause,kill"}).validate()
    return space_for(spec, spec.nemesis)


def noisy(schedule: Schedule, trial: Trial) -> Outcome:
    """The lease bug, and schedules with a kill failing on their first replay only (luck)."""
    if any(breaks(s) for s in schedule.steps):
        return Outcome(1)
    lucky = any(s.fault == "kill" for s in schedule.steps) and not trial.outcomes
    return Outcome(1 if lucky else 0)


@pytest.mark.parametrize("seed", range(5))
def test_shrinks_to_the_one_fault_that_matters(seed: int) -> None:
    search = Search(setnx_space(), lease_bug, budget=80, replays=2, seed=seed).execute()
    assert search.first is not None, "no failure found"
    minimal = search.minimal
    assert minimal is not None
    assert len(minimal.schedule.steps) == 1
    step = minimal.schedule.steps[0]
    assert breaks(step)
    assert step.duration is not None and step.duration <= TTL + 0.5  # just past the TTL
    assert minimal.schedule.size() <= search.first.schedule.size()
    assert search.runs <= 80 + 1  # the trial under way may finish its replays


def test_noise_is_not_chased() -> None:
    """Schedules with a kill fail on their first replay only (luck of the timing): never
    counted as failing, so the minimal schedule is the real bug, with no kill in it."""
    space = redlock_space()

    search = Search(space, noisy, budget=80, replays=2, seed=3).execute()
    assert search.minimal is not None
    assert [s.fault for s in search.minimal.schedule.steps] == ["pause"]
    flaky = [t for t in search.trials if t.invalid_runs and not t.failing]
    assert flaky, "the noise never came up: the test proves nothing"
    assert all(any(s.fault == "kill" for s in t.schedule.steps) for t in flaky)


def test_a_flaky_failure_alone_is_no_failing_schedule() -> None:
    def first_replay_only(schedule: Schedule, trial: Trial) -> Outcome:
        return Outcome(0 if trial.outcomes else 1)

    search = Search(setnx_space(), first_replay_only, budget=10, replays=2, seed=0).execute()
    assert search.first is None and search.minimal is None
    assert search.invalid_runs > 0
    assert search.runs == 10


def test_the_budget_caps_the_runs_and_no_schedule_is_run_twice() -> None:
    calls: Counter[str] = Counter()

    def never(schedule: Schedule, trial: Trial) -> Outcome:
        calls[schedule.key()] += 1
        return Outcome(0)

    search = Search(setnx_space(), never, budget=25, replays=3, seed=1).execute()
    assert search.runs == 25 == sum(calls.values())
    assert max(calls.values()) == 1  # a passing schedule is not run again
    assert search.first is None

    always = Search(setnx_space(), lambda s, t: Outcome(1), budget=7, replays=3).execute()
    assert always.runs <= 7 + 2
    assert always.minimal is not None and always.minimal.schedule.steps == ()


def test_a_search_is_repeatable_with_its_seed() -> None:
    def order(seed: int) -> list[str]:
        return [t.schedule.key() for t in
                Search(setnx_space(), lease_bug, budget=30, seed=seed).execute().trials]

    assert order(7) == order(7)
    assert order(7) != order(8)


def test_an_interrupted_run_ends_the_search() -> None:
    seen: list[Schedule] = []

    def interrupted_third(schedule: Schedule, trial: Trial) -> Outcome:
        seen.append(schedule)
        return Outcome(0, interrupted=len(seen) == 3)

    search = Search(setnx_space(), interrupted_third, budget=20, seed=0).execute()
    assert search.stopped == "interrupted"
    assert search.runs == 3


def test_a_harness_that_cannot_run_stops_at_once_saying_why() -> None:
    def broken(schedule: Schedule, trial: Trial) -> Outcome:
        return Outcome(3, note="redis-server is not installed")

    search = Search(setnx_space(), broken, budget=20, seed=0).execute()
    assert search.runs == 1
    assert search.stopped == "the harness could not run the test: redis-server is not installed"


def test_nothing_is_written_where_the_search_runs(tmp_path: Path, monkeypatch: Any) -> None:
    """No hypothesis example database: not in the repository, not anywhere."""
    monkeypatch.chdir(tmp_path)
    Search(setnx_space(), lease_bug, budget=20, seed=2).execute()
    assert list(tmp_path.iterdir()) == []


def test_roles_follow_the_cluster() -> None:
    reg = default_registry()
    pause, clock = reg.load("nemeses", "pause"), reg.load("nemeses", "clock")
    pause_node, halves = reg.load("nemeses", "pause-node"), reg.load("nemeses", "partition-halves")
    one = ["n1"]
    five = [f"n{i}" for i in range(1, 6)]
    assert roles_for(pause, one, 3, None) == ("holder", "waiter", "any", "client:0", "client:1",
                                              "client:2")
    assert roles_for(pause_node, one, 3, None) == ("any",)  # on one node every role is n1
    assert roles_for(clock, one, 3, None) == ("any",)
    assert roles_for(halves, five, 3, None) == (None,)  # no roles: its own choice
    assert roles_for(clock, five, 3, None)[:4] == ("majority", "any", "minority", "all")
    assert "leader" not in roles_for(pause_node, five, 3, None)
    zk = reg.load("dbs", "zookeeper")()
    assert "leader" in roles_for(pause_node, ["n1", "n2", "n3"], 3, zk)


def test_a_pinned_role_is_the_only_one_drawn() -> None:
    spec = TestSpec.from_dict({"nemesis": "pause:waiter,pause-node"}).validate()
    space = space_for(spec, spec.nemesis)
    assert space.choices[0].roles == ("waiter",)
    assert space.choices[1].roles == ("any",)


def test_a_fault_that_cannot_run_on_this_cluster_is_left_out_saying_why() -> None:
    space = setnx_space()  # one Redis node: no minority of it to cut off
    assert [c.fault for c in space.choices] == ["pause", "pause-node"]
    assert "partition-minority (needs 3 DB nodes, --db redis has 1" in space.describe()
    spec = TestSpec.from_dict({"nemesis": "partition-minority"}).validate()
    with pytest.raises(UsageError, match="nothing in --menu can run here"):
        space_for(spec, spec.nemesis)


# --jobs: runs made ahead, the same search (issue 30) -----------------------------------------
def path_of(search: Search) -> tuple[Any, ...]:
    """What a search did, as the user sees it: the schedules in order with their verdicts,
    the runs charged, the first failure, the minimal schedule, why it stopped."""
    return ([(t.schedule.key(), [o.code for o in t.outcomes]) for t in search.trials],
            search.runs, search.first.n if search.first else None,
            search.minimal.schedule.key() if search.minimal else None, search.stopped)


@pytest.mark.parametrize("seed", range(3))
def test_jobs_find_and_shrink_exactly_as_one_job(seed: int) -> None:
    one = Search(setnx_space(), lease_bug, budget=80, replays=2, seed=seed).execute()
    two = Search(setnx_space(), lease_bug, budget=80, replays=2, seed=seed, jobs=2).execute()
    three = Search(setnx_space(), lease_bug, budget=80, replays=3, seed=seed, jobs=3).execute()
    assert one.minimal is not None and len(one.minimal.schedule.steps) == 1
    assert path_of(two) == path_of(one)
    assert path_of(three) == path_of(Search(setnx_space(), lease_bug, budget=80, replays=3,
                                            seed=seed).execute())
    assert two.spare, "nothing was run ahead: the lookahead did nothing"
    assert len(two.spare) + two.runs <= 80 + 1 + 2  # the budget bounds what starts


def test_jobs_keep_the_replay_a_run_is_told_and_the_budget() -> None:
    """The noise of the first replay (the run function sees which replay it is) is not chased
    with jobs either; a tight budget ends the search at the same run."""
    space = redlock_space()

    for budget in (80, 9):
        one = Search(space, noisy, budget=budget, replays=2, seed=3).execute()
        two = Search(space, noisy, budget=budget, replays=2, seed=3, jobs=2).execute()
        assert path_of(two) == path_of(one)
    assert one.runs == 9 and not one.failing_trials


def test_jobs_run_at_once_and_stop_as_one_job_does() -> None:
    lock = threading.Lock()
    now, most = [0], [0]

    def slow(schedule: Schedule, trial: Trial) -> Outcome:
        with lock:
            now[0] += 1
            most[0] = max(most[0], now[0])
        time.sleep(0.05)
        with lock:
            now[0] -= 1
        return lease_bug(schedule, trial)

    two = Search(setnx_space(), slow, budget=12, replays=2, seed=1, jobs=2).execute()
    assert most[0] == 2
    assert path_of(two) == path_of(Search(setnx_space(), lease_bug, budget=12, seed=1).execute())

    one = Search(setnx_space(), lambda s, t: Outcome(0), budget=30, seed=0).execute()
    fourth = one.trials[3].schedule.key()

    def interrupted(schedule: Schedule, trial: Trial) -> Outcome:
        return Outcome(0, interrupted=schedule.key() == fourth)

    stop1 = Search(setnx_space(), interrupted, budget=30, seed=0).execute()
    stop2 = Search(setnx_space(), interrupted, budget=30, seed=0, jobs=2).execute()
    assert stop1.stopped == "interrupted" == stop2.stopped
    assert path_of(stop2) == path_of(stop1) and stop2.runs == 4


def test_runs_made_ahead_still_running_at_the_end_are_stopped() -> None:
    """The search is over: a run made ahead that no one will ask for is told to stop
    (``on_interrupt``) rather than waited for, and recorded as spare."""
    stop = threading.Event()
    a, b = (Schedule((Step(0.0, "pause", "holder", d),)) for d in (1.0, 2.0))

    def run(schedule: Schedule, replay: int) -> Outcome:
        if schedule == b:
            return Outcome(0, interrupted=stop.wait(30))
        time.sleep(0.3)  # while a runs, b is run ahead
        return Outcome(0)

    ahead = Lookahead(run, jobs=2, replays=1, upcoming=[a, b], limit=10, on_interrupt=stop.set)
    assert ahead.outcome(a, 0).code == 0
    started = time.monotonic()
    [spare] = ahead.close()
    assert time.monotonic() - started < 10
    assert spare.schedule == b and spare.replay == 0 and spare.outcome.interrupted
