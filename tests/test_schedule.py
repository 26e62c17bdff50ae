"""Fault schedules as data (issue 16): TOML <-> test.json round trip, validation in one line,
the schedule a run recorded replayed with the durations it ran with, and the command line's
--replay and [[step]] tables. No servers."""

from __future__ import annotations

import json
import tomllib
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from harness.cli import load_toml, replay_data
from harness.controller.faults import as_ran
from harness.controller.spec import TestSpec
from harness.core.errors import UsageError
from harness.core.schedule import Schedule, Step, from_dict
from tests.harness_runs import harness

TARGETS = ("holder", "waiter", "any", "client:2", None)
tenths = st.integers(0, 200).map(lambda n: n / 10)


@st.composite
def schedules(draw: st.DrawFn) -> Schedule:
    steps = []
    for _ in range(draw(st.integers(0, 6))):
        fault = draw(st.sampled_from(["pause", "clock", "kill", "partition-minority"]))
        target = {"pause": draw(st.sampled_from(TARGETS)), "clock": "majority",
                  "kill": draw(st.sampled_from(["any", "node:n1", None])),
                  "partition-minority": None}[fault]
        params = {"clock-offset": draw(st.sampled_from([60.0, -30.0]))} if fault == "clock" else {}
        steps.append(Step(draw(tenths), fault, target, draw(st.one_of(st.none(), tenths)),
                          params))
    return Schedule(tuple(sorted(steps, key=lambda s: s.at)))


@settings(max_examples=60, deadline=None)
@given(schedules())
def test_toml_and_test_json_round_trip(schedule: Schedule) -> None:
    """TOML -> spec -> test.json (JSON) -> TOML gives the same schedule and the same text."""
    text = schedule.to_toml()
    assert from_dict(tomllib.loads(text)) == schedule
    spec = TestSpec.from_dict({"db": "redis", "lock": "redis-setnx", "time-limit": 21.0,
                               "schedule": from_dict(tomllib.loads(text)).to_dict()}).validate()
    stored = json.loads(json.dumps({"spec": spec.to_dict()}))  # what test.json holds
    back = from_dict(stored["spec"]["schedule"])
    assert back == schedule
    assert back.to_toml() == text
    assert TestSpec.from_dict(stored["spec"]).validate().fault_schedule() == schedule


def test_a_spec_file_with_steps_runs_them_and_sets_up_their_faults(tmp_path: Path) -> None:
    path = tmp_path / "minimal.toml"
    path.write_text('db = "redis-masters"\nlock = "redlock"\nnemesis = ["kill"]\n'
                    "time-limit = 8\n\n[[step]]\nat = 3.1\nfault = \"clock\"\n"
                    'target = "majority"\nduration = 2.5\nparams = { clock-offset = 30 }\n')
    spec = TestSpec.from_dict(load_toml(path)).validate()
    assert spec.fault_names == ["kill", "clock"]  # the menu's, then the schedule's
    step = spec.fault_schedule().steps[0]
    assert (step.at, step.fault, step.target, step.duration) == (3.1, "clock", "majority", 2.5)
    assert step.params == {"clock-offset": 30.0}  # typed by the nemesis's declared option


def test_a_schedule_alone_names_the_run_after_its_faults(tmp_path: Path) -> None:
    path = tmp_path / "s.toml"
    path.write_text(Schedule((Step(1.0, "pause", "holder", 3.0),
                              Step(4.0, "pause-node", None, 1.0))).to_toml())
    spec = TestSpec.from_dict(replay_data(path)).validate()
    assert spec.nemesis == ["pause", "pause-node"]
    assert spec.test_name == "redis_redis-setnx_mutex_pause+pause-node"


@pytest.mark.parametrize(("step", "message"), [
    ({"at": 1, "fault": "teleport"}, "unknown nemesis 'teleport'"),
    ({"at": 1, "fault": "pause", "target": "leader"}, "cannot target 'leader'"),
    ({"at": 1, "fault": "partition-halves", "target": "holder"}, "cannot target 'holder'"),
    ({"at": 1, "fault": "clock", "params": {"clock-ofset": 5}}, "'clock-ofset': not an option"),
    ({"at": 1, "fault": "clock", "params": {"clock-offset": "soon"}}, "expected a number"),
    ({"at": -1, "fault": "pause"}, "at must be 0 to 86400 seconds"),
    ({"at": 1e12, "fault": "pause"}, "at must be 0 to 86400 seconds"),
    ({"at": 20, "fault": "pause"}, "at = 20 s is not inside the run's time limit (20 s)"),
    ({"at": 1, "fault": "pause", "duration": 1e9}, "duration must be 0 to 86400 seconds"),
    ({"at": 1, "fault": "pause", "duration": 7200}, "duration must be at most 3600 seconds"),
    ({"at": 1, "fault": "pause", "target": "client:99"}, "no client '99' in this run"),
    ({"at": 1, "fault": "kill", "target": "node:n9"}, "no DB node 'n9' in this run"),
    ({"at": 1, "fault": "pause", "duration": "long"}, "duration must be a finite number"),
    ({"at": 1, "fault": "pause", "when": 3}, "unknown key 'when'"),
])
def test_a_bad_step_is_one_line_naming_it(step: dict[str, Any], message: str) -> None:
    with pytest.raises(UsageError) as err:
        TestSpec.from_dict({"schedule": {"steps": [step]}}).validate()
    assert message in str(err.value)
    assert "\n" not in str(err.value)


def test_replaying_a_run_takes_the_durations_it_ran_with() -> None:
    """A step planned without a duration took its fault's own (kill: drawn at run time); the
    replay fixes it to what ran. A skipped step is kept as planned."""
    test = {"schedule": {"steps": [{"at": 1.0, "fault": "kill", "target": "any"},
                                   {"at": 2.0, "fault": "pause", "target": "holder",
                                    "duration": 3.0},
                                   {"at": 9.0, "fault": "pause", "target": "waiter"}]},
            "faults": [{"step": 0, "f": "kill", "target": "any", "targets": ["n2"],
                        "start": 1.01, "stop": 3.2, "duration": 1.734},
                       {"step": 1, "f": "pause", "target": "holder", "targets": ["c3"],
                        "start": 4.0, "stop": 7.0, "duration": 3.0}],
            "skipped-steps": [{"step": 2, "why": "no waiter right now"}]}
    steps = as_ran(test).steps
    assert [s.duration for s in steps] == [1.734, 3.0, None]
    assert [s.target for s in steps] == ["any", "holder", "waiter"]  # targets, not endpoints
    with pytest.raises(UsageError, match="records no fault schedule"):
        as_ran({"faults": []})


def test_replay_usage_errors_exit_64_before_any_server(tmp_path: Path) -> None:
    empty = tmp_path / "empty.toml"
    empty.write_text('lock = "redis-setnx"\n')
    for args, message in (
            (("--replay", str(tmp_path / "nowhere")), "no such run directory"),
            (("--replay", str(empty)), "no [[step]] tables"),
            (("--replay", str(tmp_path)), "no test.json")):
        proc = harness("run", "--store", str(tmp_path / "r"), *args, timeout=60)
        assert proc.returncode == 64, proc.stderr
        assert message in proc.stderr
        assert len(proc.stderr.strip().splitlines()) == 1


def test_explore_usage_errors_exit_64_before_any_server(tmp_path: Path) -> None:
    base = ("explore", "--store", str(tmp_path / "r"))
    for args, message in (
            (("--menu", "none", "--budget", "5"), "--menu none"),
            (("--menu", "pause,teleport", "--budget", "5"), "unknown nemesis 'teleport'"),
            (("--menu", "pause", "--budget", "0"), "--budget must be at least 1"),
            (("--menu", "pause", "--budget", "5", "--replays", "0"), "--replays must be"),
            (("--menu", "partition-leader", "--budget", "5"), "needs a db with a leader")):
        proc = harness(*base, *args, timeout=60)
        assert proc.returncode == 64, proc.stderr
        assert message in proc.stderr
    assert not (tmp_path / "r").exists() or not any((tmp_path / "r").glob("*/*/test.json"))


class ScriptedFault:
    """A nemesis whose one method named ``fails`` raises (no servers: it does nothing)."""

    name = "scripted"

    def __init__(self, fails: str) -> None:
        self.fails = fails
        self.stopped = 0

    def _maybe(self, method: str) -> None:
        if self.fails == method:
            raise RuntimeError(f"{method} broke")

    def setup(self, ctx: Any) -> None:
        pass

    def select(self, ctx: Any, target: str | None = None) -> list[str]:
        return ["n1"]

    def duration(self, ctx: Any) -> float:
        self._maybe("duration")
        return 0.05

    def start(self, ctx: Any, targets: list[str]) -> None:
        self._maybe("start")

    def stop(self, ctx: Any, targets: list[str]) -> None:
        self.stopped += 1
        self._maybe("stop")

    def teardown(self, ctx: Any) -> None:
        pass

    def detail(self) -> None:
        return None


@pytest.mark.parametrize(("fails", "crashed"), [
    ("stop", "scripted could not be healed (step 1): RuntimeError: stop broke"),
    ("duration", "scripted failed while on (step 1): RuntimeError: duration broke"),
    ("start", None),  # never on: recorded as not injected, the faults checker's to judge
    ("nothing", None),
])
def test_a_fault_that_breaks_once_on_stops_the_nemesis_thread(
        tmp_path: Path, fails: str, crashed: str | None) -> None:
    import random
    import time

    from harness.controller.faults import FaultRunner
    from harness.core.cluster import NemesisContext
    from harness.core.journal import JournalWriter

    nem = ScriptedFault(fails)
    ctx = NemesisContext(None, [], None, None, random.Random(1), 2.0)  # type: ignore[arg-type]
    journal = JournalWriter(tmp_path / "nemesis.jsonl", "nemesis", time.monotonic_ns())
    steps = (Step(0.0, "scripted"), Step(0.1, "scripted"))
    runner = FaultRunner({"scripted": nem}, Schedule(steps), ctx, journal)  # type: ignore[dict-item]
    runner.start()
    deadline = time.monotonic() + 5
    while time.monotonic() < deadline and runner.crashed is None and len(
            runner.faults) + len(runner.errors) < 2:
        time.sleep(0.01)
    runner.finish()
    assert runner.crashed == crashed
    assert len(runner.errors) == (2 if fails == "start" else 0)
    if crashed is not None:  # the first step broke the thread: the second never ran
        assert nem.stopped >= 1 and len(runner.faults) <= 1


class SlowStart:
    """A live view whose clients invoke their first op ``after`` s after it was made, client 1
    never (it died: it is not alive)."""

    def __init__(self, after: float) -> None:
        import time
        self.up = time.monotonic() + after
        self.asked: list[list[int]] = []

    def running(self, processes: list[int]) -> bool:
        import time
        self.asked.append(list(processes))
        return time.monotonic() >= self.up


@pytest.mark.parametrize("ends", [False, True])
def test_faults_begin_once_every_client_alive_has_invoked_an_op(tmp_path: Path,
                                                                ends: bool) -> None:
    """A step due at 0 s starts once the load is up (not at once), and the run's end stops the
    wait: the step is then skipped, never started against clients that never ran."""
    import random
    import time
    from types import SimpleNamespace

    from harness.controller.faults import FaultRunner
    from harness.core.cluster import NemesisContext
    from harness.core.journal import JournalWriter

    live = SlowStart(0.4)
    clients = SimpleNamespace(alive=lambda: [0, 2])
    ctx = NemesisContext(None, [], clients, live, random.Random(1), 2.0)  # type: ignore[arg-type]
    journal = JournalWriter(tmp_path / "nemesis.jsonl", "nemesis", time.monotonic_ns())
    nem = ScriptedFault("nothing")
    runner = FaultRunner({"scripted": nem}, Schedule((Step(0.0, "scripted"),)), ctx,
                         journal)  # type: ignore[dict-item]
    t0 = time.monotonic()
    runner.start()
    if ends:
        time.sleep(0.1)
        runner.finish()
        assert runner.faults == [] and nem.stopped == 0
        assert [s["why"] for s in runner.skipped] == ["the run ended before it was due"]
        return
    deadline = t0 + 5
    while time.monotonic() < deadline and not runner.faults:
        time.sleep(0.01)
    runner.finish()
    assert runner.faults and runner.faults[0].start >= 0.4 - 0.05
    assert live.asked and all(a == [0, 2] for a in live.asked)


class CountsLoad(ScriptedFault):
    """A nemesis that records when the load started (``load_started``) and when it starts."""

    def __init__(self, live: SlowStart) -> None:
        super().__init__("nothing")
        self.live = live
        self.events: list[tuple[str, bool]] = []  # (what, was the load up then)

    def load_started(self, ctx: Any) -> None:
        import time
        self.events.append(("load", time.monotonic() >= self.live.up))

    def start(self, ctx: Any, targets: list[str]) -> None:
        self.events.append(("start", any(e[0] == "load" for e in self.events)))


@pytest.mark.parametrize("ends", [False, True])
def test_load_started_is_called_once_when_the_load_is_up_before_any_lanes_first_step(
        tmp_path: Path, ends: bool) -> None:
    """Two lanes (a background step has its own): ``load_started`` runs once, after every
    client alive invoked an op, and before either lane's fault starts; a run that ends before
    the load is up never calls it (the power loss's write-back of the set-up)."""
    import random
    import time
    from types import SimpleNamespace

    from harness.controller.faults import FaultRunner
    from harness.core.cluster import NemesisContext
    from harness.core.journal import JournalWriter

    live = SlowStart(0.3)
    clients = SimpleNamespace(alive=lambda: [0, 1])
    ctx = NemesisContext(None, [], clients, live, random.Random(1), 2.0)  # type: ignore[arg-type]
    journal = JournalWriter(tmp_path / "nemesis.jsonl", "nemesis", time.monotonic_ns())
    nem = CountsLoad(live)
    steps = (Step(0.0, "scripted"), Step(0.0, "scripted", background=True))
    runner = FaultRunner({"scripted": nem}, Schedule(steps), ctx,
                         journal)  # type: ignore[dict-item]
    runner.start()
    if ends:
        time.sleep(0.1)
        runner.finish()
        assert nem.events == []
        return
    deadline = time.monotonic() + 5
    while time.monotonic() < deadline and len(runner.faults) < 2:
        time.sleep(0.01)
    runner.finish()
    assert len(runner.faults) == 2, runner.skipped
    assert nem.events == [("load", True), ("start", True), ("start", True)], nem.events
