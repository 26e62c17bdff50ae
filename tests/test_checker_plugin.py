"""A checker and a nemesis carry their own words: a package of a third party's own, installed
through entry points, adds a checker in one file, a nemesis in one file (and a workload that asks
for the checker), and the words they declare (the checker's figures and violations, the
nemesis's description of its faults and its colour) are what the summary, the incidents, serve
and report.html say. Presentation keeps no table of role names: a result of a checker that is
not installed is shown with its raw keys, a fault of a nemesis that is not installed in generic
words, and a checker that declares its words wrongly is one line."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any, ClassVar

import pytest

from harness.controller.registry import Registry
from harness.controller.store import Store
from harness.core.errors import UsageError
from harness.core.fault_run import FaultRun
from harness.presentation.report import narrative, words
from harness.presentation.serve import read_run
from tests.harness_runs import bounded

REPO = Path(__file__).resolve().parents[1]

CHECKER = '''
"""Grants that took longer than a second: the demo package's checker, in one file."""
from checker.base import Checker

NS = 1_000_000_000


class SlowGrants(Checker):
    name = "demo-slow-grants"
    summary = "acquires granted more than a second after they were asked for"
    figures = {"slow-grant-count": "sluggish grants", "grant-count": None}
    violations = {"slow-grants": ("grant slower than a second", "grants slower than a second")}

    @staticmethod
    def check(history, *, limit_s=1.0):
        asked, slow, grants = {}, [], 0
        for op in history:
            if op.get("f") != "acquire" or not isinstance(op.get("process"), int):
                continue
            if op["type"] == "invoke":
                asked[op["process"]] = op
            elif op["type"] == "ok":
                grants += 1
                inv = asked.pop(op["process"])
                took = (op["time"] - inv["time"]) / NS
                if took > limit_s:
                    slow.append({"process": op["process"], "index": [inv["index"], op["index"]],
                                 "explanation": f"process {op['process']} waited {took:.1f} s "
                                                "for its grant"})
        return {"valid": not slow, "slow-grant-count": len(slow), "grant-count": grants,
                "slow-grants": slow}
'''

WORKLOAD = '''
"""The lock-only loop, checked for slow grants as well."""
from workloads.lock_only import LockWorkload


class SlowGrantsWorkload(LockWorkload):
    name = "demo-slow"
    summary = "acquire, hold, release; grants slower than a second are violations"

    @classmethod
    def checkers(cls, spec):
        return [*super().checkers(spec), ("demo-slow-grants", {})]
'''

NEMESIS = '''
"""Slow the holder's network card down: the demo package's nemesis, in one file."""
from nemesis.base import CLIENT_TARGETS, BaseNemesis, client_target


class Molasses(BaseNemesis):
    name = "demo-molasses"
    summary = "pour molasses on a client's network card"
    targets = CLIENT_TARGETS
    colour = "#7a4f1d"

    @classmethod
    def describe(cls, run):
        return f"molasses poured on {run.who()} {run.when()}"

    def select(self, ctx, target=None):
        return client_target(ctx, target)

    def start(self, ctx, targets):
        return None

    def stop(self, ctx, targets):
        return None
'''

ENTRY_POINTS = """
[lock_harness.nemeses]
demo-molasses = demo_molasses:Molasses

[lock_harness.checkers]
demo-slow-grants = demo_slow_checker:SlowGrants

[lock_harness.workloads]
demo-slow = demo_slow_workload:SlowGrantsWorkload
"""


def installed(site: Path) -> dict[str, str]:
    """The demo package installed in ``site`` (its modules and its dist-info, as pip leaves
    them); the environment that finds it."""
    site.mkdir()
    (site / "demo_slow_checker.py").write_text(CHECKER)
    (site / "demo_slow_workload.py").write_text(WORKLOAD)
    (site / "demo_molasses.py").write_text(NEMESIS)
    info = site / "lockharness_demo_slow-0.1.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: lockharness-demo-slow\n"
                                   "Version: 0.1\n")
    (info / "entry_points.txt").write_text(ENTRY_POINTS)
    return {**os.environ, "PYTHONPATH": os.pathsep.join([str(site), str(REPO)])}


def op(index: int, t: float, process: int, type_: str, f: str, value: Any) -> dict[str, Any]:
    return {"index": index, "time": round(t * 1e9), "process": process, "type": type_, "f": f,
            "value": value, "lock": "lock"}


def history(fault: bool = False) -> list[dict[str, Any]]:
    """Process 0 holds the lock from 0.1 s to 2.0 s; process 1, which asked at 0.2 s, gets it
    at 2.1 s (1.9 s later) and releases it at 2.5 s. No overlap; with ``fault``, the demo
    nemesis is on process 1 from 0.15 s to 2.2 s."""
    steps = [(0.0, 0, "invoke", "acquire", {"timeout": 15.0}),
             (0.1, 0, "ok", "acquire", {"session": 1, "validity": None}),
             (0.2, 1, "invoke", "acquire", {"timeout": 15.0}),
             (1.9, 0, "invoke", "release", {"session": 1}),
             (2.0, 0, "ok", "release", {"session": 1}),
             (2.1, 1, "ok", "acquire", {"session": 1, "validity": None}),
             (2.4, 1, "invoke", "release", {"session": 1}),
             (2.5, 1, "ok", "release", {"session": 1})]
    ops = [op(i, *s) for i, s in enumerate(steps)]
    if fault:
        on = {"step": 0, "target": "waiter", "targets": ["c1"]}
        ops += [{"index": 0, "time": 140_000_000, "process": "nemesis", "type": "invoke",
                 "f": "demo-molasses", "value": "start", "step": 0, "target": "waiter"},
                {"index": 0, "time": 150_000_000, "process": "nemesis", "type": "info",
                 "f": "demo-molasses", "value": "start", **on},
                {"index": 0, "time": 2_190_000_000, "process": "nemesis", "type": "invoke",
                 "f": "demo-molasses", "value": "stop", **on},
                {"index": 0, "time": 2_200_000_000, "process": "nemesis", "type": "info",
                 "f": "demo-molasses", "value": "stop", **on}]
        ops.sort(key=lambda o: o["time"])
        for i, o in enumerate(ops):
            o["index"] = i
    return ops


def test_a_plugin_checker_speaks_its_own_words_in_summary_incidents_serve_and_report(
        tmp_path: Path) -> None:
    env = installed(tmp_path / "site")
    store = Store(tmp_path / "store")
    run = store.create("demo")
    run.save_test({"spec": {"workload": "demo-slow", "db": "redis", "lock": "redis-setnx",
                            "nemesis": [], "clients": 2, "ttl": 2.0}, "status": "complete"})
    run.history.write_text("".join(json.dumps(o) + "\n" for o in history()))
    proc = bounded([sys.executable, "-m", "harness.cli", "check", "--write", str(run.path)],
                   timeout=120, env=env)  # the run's own results.json, as serve reads them
    assert proc.returncode == 1, proc.stdout + proc.stderr
    out = proc.stdout.splitlines()
    assert out[-1].endswith(f"over the run's own: {run.path}") and not run.rechecks()
    results = run.load_results()
    assert results["checks"]["demo-slow-grants"]["valid"] is False
    assert results["checks"]["mutex"]["valid"] is True
    # the summary: its figures (all of them, by key), the first of its violations
    line = next(x for x in out if x.strip().startswith("demo-slow-grants"))
    assert line.split() == ["demo-slow-grants", "INVALID", "slow-grant-count", "1,",
                            "grant-count", "2"]
    assert ("                first of slow-grants: process 1 waited 1.9 s for its grant"
            in out)
    # the incidents, in its violation words
    assert "incidents: 1" in out
    assert ("  1. a grant slower than a second at 0.20 s; no fault was on: the lock let it "
            "happen on its own" in out)
    assert "     1 grant slower than a second" in out
    # report.html: its chip (a figure with words, not 0) and the incident
    report = run.report.read_text()
    assert "demo-slow-grants INVALID <span>· 1 sluggish grants</span>" in report
    assert "(1 grant slower than a second)" in report
    assert "grant-count" not in report.split('<nav class="chips">')[1].split("</nav>")[0]
    # serve's list of runs: the same chip (this process asks the registry: give it the path)
    probe = ("import sys; from pathlib import Path; from harness.controller.store import "
             "Store, RunDir; from harness.presentation.serve import read_run; "
             "print(read_run(Store(Path(sys.argv[1])), RunDir(Path(sys.argv[2])), 0.0).facts)")
    facts = subprocess.run([sys.executable, "-c", probe, str(store.root), str(run.path)],
                           capture_output=True, text=True, timeout=60, env=env)
    assert facts.stdout.strip() == "1 sluggish grants", facts.stderr


def test_a_plugin_nemesis_describes_its_own_faults_in_the_incidents_and_report(
        tmp_path: Path) -> None:
    """The same run with the demo nemesis on the waiter: the incident is opened by the fault
    in the nemesis's own words, and report.html draws its bar in its own colour."""
    env = installed(tmp_path / "site")
    run = Store(tmp_path / "store").create("demo")
    run.save_test({"spec": {"workload": "demo-slow", "db": "redis", "lock": "redis-setnx",
                            "nemesis": ["demo-molasses"], "clients": 2, "ttl": 2.0},
                   "status": "complete"})
    run.history.write_text("".join(json.dumps(o) + "\n" for o in history(fault=True)))
    proc = bounded([sys.executable, "-m", "harness.cli", "check", str(run.path)],
                   timeout=120, env=env)
    assert proc.returncode == 1, proc.stdout + proc.stderr
    words_of_fault = "molasses poured on c1 (the waiter) at 0.1 s for 2.1 s"
    line = next(x for x in proc.stdout.splitlines() if x.startswith("  1. "))
    assert line.endswith(f"; opened by {words_of_fault} (step 1)"), line
    (recheck,) = run.rechecks()  # written beside the run, which has no results of its own
    assert not run.results.exists() and proc.stdout.endswith(f": {recheck.path}\n")
    report = recheck.report.read_text()
    assert words_of_fault in report
    assert '"colour": "#7a4f1d"' in report or '"colour":"#7a4f1d"' in report
    # here, where the package is not installed, the same fault is worded generically
    fault = FaultRun("demo-molasses", 0, "waiter", ("c1",), 0.14, 2.2)
    assert narrative.describe(fault) == "demo-molasses on c1 (the waiter) at 0.1 s for 2.1 s"


def test_a_result_of_a_checker_that_is_not_installed_shows_its_raw_keys(tmp_path: Path) -> None:
    """The same run read where the package is not installed: no figures, no crash, and its
    violations called by their key."""
    store = Store(tmp_path / "store")
    run = store.create("demo")
    run.save_test({"spec": {"workload": "demo-slow"}, "status": "complete"})
    run.save_results({"valid": False, "checks": {"demo-slow-grants": {
        "valid": False, "slow-grant-count": 2, "slow-grants": [
            {"process": 1, "explanation": "process 1 waited"}]}}})
    info = read_run(store, run, 0.0)
    assert info is not None and info.facts == ""
    result = run.load_results()["checks"]["demo-slow-grants"]
    assert words.figures("demo-slow-grants", result) == []
    assert words.violation_words("demo-slow-grants", "slow-grants", 1) == "slow-grants"
    assert words.violation_words("demo-slow-grants", "slow-grant", 2) == "slow-grants"
    assert words.violation_words("mutex", "lock-overlaps", 2) == "lock overlaps"
    assert words.violation_words("mutex", "lock-overlaps", 1) == "lock overlap"
    # a result filed under module:Class is not looked up: reading results imports nothing
    by_path = {"valid": False, "lock-overlap-count": 1}
    assert words.figures("checker.mutex:MutexChecker", by_path) == []
    assert words.figures("mutex", by_path) == [("lock-overlap-count", 1)]


class Words:
    name = "bad-words"
    summary = "declares its words wrongly"
    figures: ClassVar[Any] = {}
    violations: ClassVar[Any] = {}
    caveats: ClassVar[Any] = ()

    @staticmethod
    def check(history: Any) -> dict[str, Any]:
        return {"valid": True}


class FiguresAList(Words):
    figures = ["slow-grant-count"]


class FigureWordsANumber(Words):
    figures: ClassVar[Any] = {"slow-grant-count": 3}


class ViolationsOneWord(Words):
    violations: ClassVar[Any] = {"slow-grants": "slow grant"}


class CaveatsAString(Words):
    caveats = "not-judged"


@pytest.mark.parametrize(("cls", "says"), [
    ("FiguresAList", "figures: must be a dict of result key -> words (or None), got "
                     "['slow-grant-count']"),
    ("FigureWordsANumber", "figures: must be a dict of result key -> words (or None), got "
                           "{'slow-grant-count': 3}"),
    ("ViolationsOneWord", "violations: must be a dict of result key -> (singular, plural) "
                          "words, got {'slow-grants': 'slow grant'}"),
    ("CaveatsAString", "caveats: must be a tuple of names, got 'not-judged'"),
])
def test_a_checker_that_declares_its_words_wrongly_is_one_line(cls: str, says: str) -> None:
    target = f"tests.test_checker_plugin:{cls}"
    with pytest.raises(UsageError) as e:
        Registry(entry_points=False).load("checkers", target)
    assert str(e.value) == f"checker {target!r}: {target}.{says}"


def test_every_builtin_checker_declares_words_for_what_it_lists() -> None:
    """What the built-ins declare passes the registry's check, and every violation kind has
    words of its own (the summary and the incidents name nothing by a raw key)."""
    reg = Registry(entry_points=False)
    for name in reg.names("checkers"):
        cls = reg.load("checkers", name)
        for kind, (one, many) in cls.violations.items():
            assert one != kind and many != one, (name, kind)
