"""``harness explore``: search fault schedules for a violation, shrink it, replay it.

The search itself is :class:`harness.controller.search.Search` (hypothesis over a space of
schedules); here each example becomes a real run in a child process of its own (as a suite's
runs: one bad run cannot take the search down), and what the search found becomes files under
the store (``<store>/_explore/<test>/<stamp>/``): ``minimal.toml``, the run directories of the
first failure and of the minimal one (links), ``runs.jsonl``, ``summary.json`` and
``summary.txt``. The minimal schedule is replayed ``reproduce`` times to measure how often it
fails, and its run's report says what shrinking removed.

Progress goes to stderr as it happens (runs done, the best schedule so far, time left); the
summary to stdout. Exit 1: a violation was found (a run was invalid); 0: none in the budget;
2: no run was valid either (every one unknown); 3: the harness could not run the test, or the
search was interrupted before it found anything.
"""

from __future__ import annotations

import dataclasses
import os
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any, TextIO

from harness.controller.progress import Progress
from harness.controller.search import Outcome, Search, Space, Trial, check_limits, space_for
from harness.controller.spec import TestSpec
from harness.controller.store import ExploreDir, RunDir, Store
from harness.core.atomic import write_json, write_text
from harness.core.errors import (
    EXIT_INVALID,
    EXIT_SETUP,
    EXIT_UNKNOWN,
    EXIT_VALID,
    HarnessError,
    UsageError,
)
from harness.core.schedule import Schedule
from harness.presentation.parallel import check_jobs, run_all
from harness.presentation.report import verdict_word, write_report
from harness.presentation.report.incidents import frees_of, incidents
from harness.presentation.report.narrative import describe, from_record, removed
from harness.presentation.runs import Child, interrupt_children, run_in_child

WORDS = {0: "VALID", 1: "INVALID", 2: "UNKNOWN", 3: "COULD NOT RUN", 64: "BAD USAGE"}
Runner = Callable[[TestSpec, RunDir, Path], Child]


def clock(seconds: float) -> str:
    s = max(0, round(seconds))
    return f"{s // 60}:{s % 60:02d}"


def load() -> str:
    try:
        return "/".join(f"{x:.1f}" for x in os.getloadavg())
    except OSError:
        return "?"


class Explore:
    """One search, its runs, its files and its summary."""

    def __init__(self, spec: TestSpec, menu: list[str], *, budget: int, replays: int = 2,
                 reproduce: int = 10, max_steps: int | None = None,
                 progress: Progress | None = None, out: TextIO | None = None,
                 runner: Runner | None = None, jobs: int | None = 1) -> None:
        check_limits(budget, replays)
        self.jobs = check_jobs(jobs)
        if not 0 <= reproduce <= 100:
            raise UsageError(f"--reproduce must be 0 to 100 replays, got {reproduce}")
        self.spec = spec
        self.menu = menu
        self.budget = budget
        self.replays = replays
        self.reproduce = reproduce
        self.progress = progress or Progress()
        self.out = out or sys.stdout
        self.runner: Runner = runner or run_in_child
        self.store = Store(spec.store)
        self.space: Space = space_for(spec, menu, max_steps=max_steps)
        self.dir: ExploreDir | None = None
        self.search: Search | None = None
        self.n = 0  # runs started, search and reproduction
        self.numbers: dict[str, int] = {}  # a run's directory -> its n (its log's number)
        self.lock = threading.Lock()  # runs start in worker threads with --jobs
        self.replayed: list[Outcome] = []
        self.started = time.monotonic()
        self.search_seconds = 0.0
        self.load_seen = [load()]

    # the run function ----------------------------------------------------------------------
    def run_schedule(self, schedule: Schedule, trial: Trial | None = None) -> Outcome:
        """One real run of ``schedule``, in a child process (from a worker thread too); what
        it was for is recorded in runs.jsonl when the search takes it (:meth:`record`)."""
        assert self.dir is not None
        with self.lock:
            self.n += 1
            n = self.n
        spec = dataclasses.replace(self.spec, schedule=schedule.to_dict())
        run = self.store.create(spec.test_name)
        with self.lock:
            self.numbers[str(run.path)] = n
        started = time.monotonic()
        child = self.runner(spec, run, self.dir.log(n))
        seconds = time.monotonic() - started
        code = child.code if child.code is not None else EXIT_SETUP
        note = ""
        if code not in (EXIT_VALID, EXIT_INVALID, EXIT_UNKNOWN):
            errors = [x for x in child.output.splitlines() if x.startswith("harness:")]
            note = (errors[-1].removeprefix("harness:").strip() if errors
                    else f"exit {code}, see {self.dir.log(n)}")
        return Outcome(code, str(run.path), seconds, note, child.interrupted)

    def record(self, outcome: Outcome, schedule: Schedule, phase: str,
               trial: Trial | None = None, replay: int | None = None) -> None:
        """A line of runs.jsonl: the run, what it was for and how it ended."""
        assert self.dir is not None
        n = self.numbers.get(outcome.run or "", 0)
        self.dir.add_run({"n": n, "phase": phase, "trial": trial.n if trial else None,
                          "replay": replay, "schedule": schedule.to_dict(), "exit": outcome.code,
                          "verdict": WORDS.get(outcome.code, str(outcome.code)),
                          "run": outcome.run, "seconds": round(outcome.seconds, 1),
                          "note": outcome.note or None})

    # progress --------------------------------------------------------------------------------
    def on_run(self, search: Search, trial: Trial, outcome: Outcome) -> None:
        self.load_seen.append(load())
        k = len(trial.outcomes)
        self.record(outcome, trial.schedule, "search", trial, k)
        steps = trial.schedule.describe()
        self.progress.line(
            f"[run {search.runs:>3}/{search.budget} {clock(search.elapsed())}, "
            f"~{clock(self.time_left(search))} left] schedule #{trial.n} "
            f"({len(trial.schedule.steps)} step(s)) replay {k}/{trial.replays}: "
            f"{WORDS.get(outcome.code, outcome.code)} in {outcome.seconds:.0f} s  {steps}"
            + (f"  ({outcome.note})" if outcome.note else ""))
        if trial.failing:
            best = search.minimal
            if search.first is trial:
                self.progress.line(f"  first failure: schedule #{trial.n}, fails {k} of {k}: "
                                   f"{steps}")
            if best is trial:
                self.progress.line(f"  best so far: {len(trial.schedule.steps)} step(s): "
                                   f"{steps}")

    def time_left(self, search: Search) -> float:
        mean = search.mean_run_seconds() or self.spec.time_limit + 8
        left = max(0, search.budget - search.runs)
        if search.first is not None:
            left += self.reproduce
        return left * mean / self.jobs

    # the search ------------------------------------------------------------------------------
    def execute(self) -> int:
        spec = self.spec
        self.dir = self.store.explore_dir(spec.test_name)
        self.progress.line(
            f"harness explore: db {spec.db} x{spec.nodes}, lock {spec.lock}, workload "
            f"{spec.workload}, {spec.clients} clients, runs of {spec.time_limit:g} s, seed "
            f"{spec.seed}; load average {self.load_seen[0]}")
        self.progress.line(f"  menu {', '.join(self.menu)}; budget {self.budget} runs; a "
                           f"schedule fails only if it fails {self.replays} of {self.replays}")
        self.progress.line(f"  schedules: {self.space.describe()}")
        self.progress.line(f"  output: {self.dir.path}")
        if self.jobs > 1 and spec.backend != "local":
            self.progress.line(f"  --backend {spec.backend}: one run at a time (its nodes are "
                               "not shared between runs)")
            self.jobs = 1
        if self.jobs > 1:
            self.progress.line(f"  {self.jobs} runs at once: the search runs ahead what it is "
                               "likely to need next, and takes the answers in its own order")
        search = self.search = Search(
            self.space, self.run_schedule, self.budget, self.replays, seed=int(spec.seed or 0),
            on_run=self.on_run, jobs=self.jobs, on_interrupt=interrupt_children)
        search.execute()
        self.search_seconds = search.elapsed()
        for spare in search.spare:
            self.record(spare.outcome, spare.schedule, "spare", None, spare.replay + 1)
        if search.spare:
            self.progress.line(f"  {len(search.spare)} run(s) made ahead were not needed "
                               "(runs.jsonl: phase spare)")
        minimal = search.minimal
        self.progress.line(
            f"search over after {search.runs} run(s) in {clock(search.elapsed())}: "
            f"{len(search.trials)} schedule(s) tried, {search.invalid_runs} invalid run(s)"
            + (f"; stopped: {search.stopped}" if search.stopped else ""))
        if minimal is not None and search.stopped is None:
            try:
                self.measure(minimal)
            except KeyboardInterrupt:
                self.progress.line("interrupted: the reproduction rate covers the replays done")
        summary = self.finish(search)
        return self.exit_code(search, summary)

    def measure(self, minimal: Trial) -> None:
        """Replay the minimal schedule ``reproduce`` times: how often does it fail?"""
        def done(_: int, outcome: Outcome) -> None:
            self.replayed.append(outcome)
            self.record(outcome, minimal.schedule, "reproduce")
            fails = sum(o.invalid for o in self.replayed)
            i = len(self.replayed)
            self.progress.line(f"[reproduce {i}/{self.reproduce}] "
                               f"{WORDS.get(outcome.code, outcome.code)} in "
                               f"{outcome.seconds:.0f} s: {fails} of {i} failed so far")

        results, _ = run_all([minimal.schedule] * self.reproduce, self.run_schedule, self.jobs,
                             done=done, stop=lambda o: o.interrupted)
        self.replayed = [o for o in results if o is not None]  # in the order they started

    # what it found ---------------------------------------------------------------------------
    def finish(self, search: Search) -> dict[str, Any]:
        assert self.dir is not None
        first, minimal = search.first, search.minimal
        summary: dict[str, Any] = {
            "spec": self.spec.to_dict(), "menu": self.menu, "budget": self.budget,
            "replays": self.replays, "runs": search.runs, "schedules": len(search.trials),
            "jobs": self.jobs, "spare-runs": len(search.spare),
            "invalid-runs": search.invalid_runs, "stopped": search.stopped,
            "seconds": round(self.search_seconds, 1),
            "seconds-total": round(time.monotonic() - self.started, 1),
            "load-average": {"start": self.load_seen[0], "end": load()},
            "space": self.space.describe(),
            "flaky-schedules": [t.schedule.to_dict() for t in search.trials
                                if t.invalid_runs and not t.failing],
            "outcomes": count_codes(search),
        }
        if first is not None:
            summary["first-failure"] = self.trial_record(first)
            self.dir.link("first-failure", RunDir(Path(first.outcomes[0].run or "")))
        if minimal is not None:
            summary["minimal"] = self.trial_record(minimal)
            self.dir.link("minimal", RunDir(Path(minimal.outcomes[0].run or "")))
            write_text(self.dir.minimal_toml, minimal_toml(self.spec, minimal.schedule,
                                                           self.dir.path))
            summary["minimal-toml"] = str(self.dir.minimal_toml)
            if self.replayed:
                fails = sum(o.invalid for o in self.replayed)
                summary["reproduced"] = {"failed": fails, "of": len(self.replayed),
                                         "runs": [o.run for o in self.replayed],
                                         "exits": [o.code for o in self.replayed],
                                         "notes": [o.note for o in self.replayed if o.note]}
            if first is not None:
                summary["removed"] = self.annotate(first, minimal, summary)
        write_json(self.dir.summary_json, summary)
        text = self.summary_text(summary)
        write_text(self.dir.summary_txt, text)
        print(text, end="", file=self.out)
        return summary

    def trial_record(self, trial: Trial) -> dict[str, Any]:
        return {"schedule": trial.schedule.to_dict(), "described": trial.schedule.describe(),
                "steps": len(trial.schedule.steps), "runs": [o.run for o in trial.outcomes],
                "trial": trial.n}

    def annotate(self, first: Trial, minimal: Trial, summary: dict[str, Any]) -> str:
        """Tell the minimal run (and the first failure) what they are, in their test.json,
        and rebuild their reports: the minimal one says what shrinking removed."""
        first_run, min_run = RunDir(Path(first.outcomes[0].run or "")), RunDir(
            Path(minimal.outcomes[0].run or ""))
        first_test, min_test = first_run.load_test(), min_run.load_test()
        rate = summary.get("reproduced")
        record = {"role": "minimal", "search": str(self.dir.path if self.dir else ""),
                  "first-failure": {"run": str(first_run.path),
                                    "faults": first_test.get("faults") or [],
                                    "skipped": len(first_test.get("skipped-steps") or []),
                                    "steps": len(first.schedule.steps)},
                  "reproduced": f"{rate['failed']} of {rate['of']} replays" if rate else None,
                  "same-run": first_run.path == min_run.path}
        min_run.update_test(explore=record)
        if first_run.path != min_run.path:
            first_run.update_test(explore={"role": "first-failure", "minimal": str(min_run.path),
                                           "search": record["search"]})
            rerender(first_run)
        rerender(min_run)
        return removed([from_record(r) for r in first_test.get("faults") or []],
                       [from_record(r) for r in min_test.get("faults") or []],
                       record["first-failure"]["skipped"])

    def summary_text(self, s: dict[str, Any]) -> str:
        lines: list[str] = []
        minimal = s.get("minimal")
        runs = f"{s['runs']} run(s) of a budget of {s['budget']}"
        if minimal is not None:
            first = s["first-failure"]
            if first["trial"] == minimal["trial"]:
                lines.append(f"VIOLATION FOUND: a schedule of {minimal['steps']} step(s), not "
                             "shrunk further within the budget")
            else:
                lines.append(f"VIOLATION FOUND: the first failing schedule had "
                             f"{first['steps']} step(s); shrunk to {minimal['steps']}")
                lines.append(f"  first failure  {first['described']}")
            lines.append(f"  minimal        {minimal['described']}")
            ran = self.ran_as(minimal["runs"][0])
            if ran:
                lines.append(f"  as it ran      {ran}")
            if s.get("removed") and first["trial"] != minimal["trial"]:
                lines.append(f"  removed        {s['removed']}")
            rate = s.get("reproduced")
            if rate:
                lines.append(f"  reproduces     in {rate['failed']} of {rate['of']} replays"
                             + reproduction_note(rate))
            for text in self.incident_lines(minimal["runs"][0]):
                lines.append(f"  incident       {text}")
        elif s["invalid-runs"]:
            lines.append(f"VIOLATION SEEN in {s['invalid-runs']} run(s), but no schedule failed "
                         f"{self.replays} of {self.replays} times: nothing to shrink (see "
                         "flaky-schedules in the summary)")
        elif s["stopped"]:
            lines.append(f"SEARCH STOPPED after {runs}: {s['stopped']}")
        else:
            unknown = s["outcomes"].get("unknown", 0)
            valid = s["outcomes"].get("valid", 0)
            lines.append(f"no violation found in {s['runs']} runs ({s['schedules']} schedules"
                         f"{f'; {unknown} run(s) unknown' if unknown else ''}"
                         f"{'' if valid else '; no run was valid either'})")
        rate = s.get("reproduced")
        more = (f" (+{rate['of']} replays: {clock(s['seconds-total'] - s['seconds'])})"
                if rate else "")
        if s["jobs"] > 1:
            more += (f", {s['jobs']} at a time (+{s['spare-runs']} run(s) made ahead, not "
                     "needed)")
        lines.append(f"  search         {runs} in {clock(s['seconds'])}{more}, "
                     f"{s['schedules']} schedule(s), {s['invalid-runs']} invalid run(s); "
                     "outcomes " + ", ".join(f"{k} {v}" for k, v in s["outcomes"].items()))
        lines.append(f"  load average   {s['load-average']['start']} at the start, "
                     f"{s['load-average']['end']} at the end (1/5/15 min)")
        if minimal is not None:
            lines.append(f"  minimal.toml   {s['minimal-toml']}  (harness run --config "
                         f"{s['minimal-toml']})")
            lines.append(f"  minimal run    {minimal['runs'][0]}/report.html")
            lines.append(f"  first failure  {s['first-failure']['runs'][0]}/report.html")
        assert self.dir is not None
        lines.append(f"  summary        {self.dir.summary_json}")
        return "\n".join(lines) + "\n"

    def ran_as(self, run_path: str) -> str:
        try:
            test = RunDir(Path(run_path)).load_test()
        except HarnessError:
            return ""
        return "; ".join(describe(from_record(r)) for r in test.get("faults") or [])

    def incident_lines(self, run_path: str) -> list[str]:
        run = RunDir(Path(run_path))
        try:
            found = incidents(run.load_history(), run.load_results(),
                              frees=frees_of(run.load_test().get("spec")))
        except HarnessError:
            return []
        return [f"{inc.title()} — {inc.folded()}" for inc in found[:3]]

    def exit_code(self, search: Search, summary: dict[str, Any]) -> int:
        if search.invalid_runs:
            return EXIT_INVALID  # a violation found is real, whatever else happened
        if search.stopped is not None:
            return EXIT_SETUP
        if not summary["outcomes"].get("valid"):
            return EXIT_UNKNOWN
        return EXIT_VALID


def reproduction_note(rate: dict[str, Any]) -> str:
    """What the replays that did not fail were: ``(1 valid, 1 could not run: ...)``."""
    words = {EXIT_VALID: "valid", EXIT_UNKNOWN: "unknown"}
    counts: dict[str, int] = {}
    for code in rate["exits"]:
        if code != EXIT_INVALID:
            word = words.get(code, "could not run")
            counts[word] = counts.get(word, 0) + 1
    if not counts:
        return ""
    parts = [f"{n} {word}" for word, n in counts.items()]
    notes = rate.get("notes") or []
    return f" (the others: {', '.join(parts)}{': ' + notes[0] if notes else ''})"


def count_codes(search: Search) -> dict[str, int]:
    out: dict[str, int] = {}
    for t in search.trials:
        for o in t.outcomes:
            word = verdict_word({0: True, 1: False}.get(o.code, "unknown")).lower()
            if o.could_not_run:
                word = "could-not-run"
            out[word] = out.get(word, 0) + 1
    return out


def rerender(run: RunDir) -> None:
    test = run.load_test()
    write_report(run, test["spec"], run.load_history(), run.load_results())


def minimal_toml(spec: TestSpec, schedule: Schedule, where: Path) -> str:
    """The minimal schedule with the spec it fails under: ``harness run --config`` runs it."""
    head = (f"# Found by harness explore ({where}).\n"
            f"# Run it again: harness run --config minimal.toml\n"
            f"# The menu's faults stay in `nemesis` so the servers are set up as in the "
            f"search\n# (e.g. under libfaketime for clock faults); the [[step]] tables are what "
            f"runs.\n")
    return (head + spec.to_toml(leave=("store", "schedule", "name")) + "\n"
            + schedule.to_toml())

