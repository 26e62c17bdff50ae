"""Run a spec and present it: the run, then report.html, the summary lines and the exit code.

The CLI's ``harness run`` and each run of a suite come through :func:`run_and_report`. A suite
runs each spec in a child process of its own (``python -m harness.presentation.runs SPEC RUN``)
so that a crash or a hang in one run cannot take the suite down; the suite made the run
directory through the store's API, so it never has to learn it from the child's output.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TextIO

from harness.controller.checking import exit_code
from harness.controller.progress import Progress
from harness.controller.run import Run
from harness.controller.spec import TestSpec
from harness.controller.store import RunDir, Store
from harness.core.atomic import write_json
from harness.core.errors import EXIT_SETUP, HarnessError, UsageError
from harness.core.schedule import Schedule, from_dict
from harness.core.text import line
from harness.presentation.report import verdict_word, write_report
from harness.presentation.report.incidents import frees_of, incidents
from harness.presentation.report.narrative import step_outcomes
from harness.presentation.report.words import caveats, figures, violation_kinds

STOP_GRACE_S = 30.0
_LIVE: dict[int, subprocess.Popen[str]] = {}  # children running now, by pid
_ASKED: set[int] = set()  # of them, those interrupt_children() asked to stop
_LIVE_LOCK = threading.Lock()
MAX_INCIDENTS = 5  # printed; the report lists them all


def run_and_report(spec: TestSpec, progress: Progress, *, run: RunDir | None = None,
                   out: TextIO | None = None) -> int:
    """Run ``spec`` (into ``run`` if given), write its report, print its summary; the exit
    code."""
    out = out or sys.stdout
    progress.line(f"harness run: db {spec.db} x{spec.nodes}, lock {spec.lock}, workload "
                  f"{spec.workload}, nemesis {'+'.join(spec.nemesis) or 'none'}, "
                  f"{spec.clients} clients, {spec.time_limit:g} s, seed {spec.seed}")
    outcome = Run(spec, progress, store=Store(spec.store), run=run).execute(save_history=False)
    history = outcome.history if outcome.results else []  # the ops the checkers judged
    # The verdict first (history.jsonl and the report of a long run take seconds to write),
    # then the report
    print_summary(outcome.results, outcome.run, out, history=history,
                  steps=spec.schedule is not None, report=False)
    out.flush()
    outcome.save_history()
    if outcome.results:
        started = time.monotonic()
        write_report(outcome.run, spec.to_dict(), history, outcome.results)
        progress.line(f"report written in {time.monotonic() - started:.1f} s")
    print(report_line(outcome.run), file=out)
    if outcome.interrupted:
        print("run interrupted: the verdict covers only what was recorded", file=sys.stderr)
        return EXIT_SETUP
    if outcome.error is not None:
        print(f"harness: {outcome.error}", file=sys.stderr)
        return outcome.error_code
    code = exit_code(outcome.results)
    if code == EXIT_SETUP:
        print(f"harness: {could_not(outcome.results)}", file=sys.stderr)
    return code


def could_not(results: dict[str, Any]) -> str:
    """Why a checked run is exit 3 (it tested nothing, or a checker crashed), in one line."""
    if results.get("could-not-test"):
        return f"could not test: {results['could-not-test']}"
    crashed = results.get("crashed-checkers") or []
    errors = [f"{n}: {(results.get('checks') or {}).get(n, {}).get('error')}" for n in crashed]
    return line("could not check: " + "; ".join(errors), 600)


def print_summary(results: dict[str, Any], run: RunDir, out: TextIO | None = None, *,
                  history: list[dict[str, Any]] | None = None, steps: bool = False,
                  report: bool = True) -> None:
    """The verdict, each checker's, the incidents (with the history) and the schedule as it
    ran (step by step with ``steps``: a replayed or explored schedule; else one line), then
    the report's path (unless not ``report``: the caller prints :func:`report_line` once the
    report is written)."""
    out = out or sys.stdout
    _print_checks(results, out)
    try:
        test = run.load_test()
    except HarnessError:
        test = {}
    schedule = _schedule_of(test)
    if history:
        found = incidents(history, results, schedule, frees=frees_of(test.get("spec")))
        if found:
            print(f"incidents: {len(found)}", file=out)
        for i, inc in enumerate(found[:MAX_INCIDENTS]):
            print(f"  {i + 1}. {inc.title()}", file=out)
            print(f"     {inc.folded()}", file=out)
        if len(found) > MAX_INCIDENTS:
            print(f"  ... and {len(found) - MAX_INCIDENTS} more in the report", file=out)
    for text in schedule_lines(test, every_step=steps):
        print(text, file=out)
    if report:
        print(report_line(run), file=out)


def report_line(run: RunDir) -> str:
    return f"report: {run.report}"


def _schedule_of(test: dict[str, Any]) -> Schedule | None:
    try:
        return from_dict(test["schedule"]) if isinstance(test.get("schedule"), dict) else None
    except UsageError:
        return None


def schedule_lines(test: dict[str, Any], *, every_step: bool) -> list[str]:
    """The schedule as it ran: each step, the targets its role resolved to, or why it was
    skipped (``every_step``); else one line of counts."""
    schedule = _schedule_of(test)
    if schedule is None or not schedule.steps:
        return []
    outcomes = step_outcomes(test)
    n = len(schedule.steps)
    ran = sum(what.startswith("ran ") for _, _, what in outcomes)
    skipped = sum(what.startswith("skipped ") for _, _, what in outcomes)
    head = (f"schedule: {n} step(s), {ran} ran, {skipped} skipped"
            + (f", {n - ran - skipped} failed" if n > ran + skipped else ""))
    if not every_step:
        return [head]
    return [head, *(f"  {i + 1}. {schedule.steps[i].describe()}: {what}"
                    for i, _step, what in outcomes)]


def _print_checks(results: dict[str, Any], out: TextIO) -> None:
    print(f"{verdict_word(results.get('valid'))}", file=out)
    for key in ("unfinished", "could-not-test", "unverified"):
        if results.get(key):
            print(f"  {key}: {results[key]}", file=out)
    for name, check in results.get("checks", {}).items():
        word = verdict_word(check.get("valid"))
        if check.get("informational") and check.get("lock-valid") is not True:
            word += f" (informational; the lock alone: {verdict_word(check.get('lock-valid'))})"
        facts = [f"{k} {v}" for k, v in figures(name, check)]
        print(f"  {name:<13} {word:<8}" + ", ".join(facts), file=out)
        for key in violation_kinds(name):
            items = check.get(key)
            if isinstance(items, list) and items:
                note = (" (withdrawn)" if check.get("withdrawn") else
                        " (informational: the resource guards the data)"
                        if check.get(f"{key}-informational") else "")
                print(f"                first of {key}{note}: {items[0]['explanation']}",
                      file=out)
        for key in caveats(name):
            for item in (check.get(key) or [])[:3]:
                print(f"                {item['explanation']}", file=out)
        if check.get("valid") == "unknown" and check.get("note"):
            print(f"                {check['note']}", file=out)  # why it proves nothing
        witness = check.get("witness")
        if isinstance(witness, dict) and witness.get("explanation"):
            label = "witness (informational)" if check.get("informational") else "witness"
            print(f"                {label}: {witness['explanation']}", file=out)
        if check.get("error"):
            print(f"                could not check: {check['error']}", file=out)


@dataclass
class Child:
    """How a run in a child process ended: its exit code (None: it never ran), its output
    (stderr, then the summary it printed), and whether we interrupted it."""

    code: int | None
    output: str
    interrupted: bool = False


def budget_for(spec: TestSpec) -> float:
    """How long a run may take before it is stopped: three times its time limit plus two
    minutes (start-up, teardown, checking)."""
    return spec.time_limit * 3 + 120


def run_in_child(spec: TestSpec, run: RunDir, log: Path, *, budget: float | None = None,
                 env: dict[str, str] | None = None) -> Child:
    """Run ``spec`` into ``run`` in a child process of its own session (a crash or a hang in
    it cannot take the caller down), its output kept in ``log``. Past ``budget`` seconds it is
    stopped with SIGTERM (it heals and saves what it recorded); Ctrl-C here becomes SIGINT
    there, and the caller learns it was interrupted."""
    spec_path = log.with_name(log.stem + ".spec.json")
    write_json(spec_path, spec.to_dict())
    argv = [sys.executable, "-m", "harness.presentation.runs", str(spec_path), str(run.path)]
    limit = budget_for(spec) if budget is None else budget
    interrupted = False
    with log.open("w") as fh:
        proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=fh, text=True,
                                start_new_session=True, env=env)
        with _LIVE_LOCK:
            _LIVE[proc.pid] = proc
        try:
            out, _ = proc.communicate(timeout=limit)
        except subprocess.TimeoutExpired:
            out = stop(proc, signal.SIGTERM)
            fh.write(f"\nharness: the run was stopped after {limit:.0f} s (SIGTERM)\n")
        except KeyboardInterrupt:
            interrupted = True
            out = stop(proc, signal.SIGINT)
        finally:
            with _LIVE_LOCK:
                _LIVE.pop(proc.pid, None)
                interrupted = interrupted or proc.pid in _ASKED
                _ASKED.discard(proc.pid)
        fh.write(out or "")
    return Child(proc.returncode, log.read_text(errors="replace"), interrupted)


def interrupt_children(sig: signal.Signals = signal.SIGINT) -> int:
    """Ctrl-C for runs in worker threads (only the main thread sees KeyboardInterrupt): send
    ``sig`` to every child running now (SIGINT: it heals and saves what it recorded; SIGKILL:
    past the grace). Their :func:`run_in_child` returns them as interrupted. How many."""
    with _LIVE_LOCK:
        for pid, proc in _LIVE.items():
            _ASKED.add(pid)
            with contextlib.suppress(ProcessLookupError):
                proc.send_signal(sig)
        return len(_LIVE)


def stop(proc: subprocess.Popen[str], sig: signal.Signals) -> str:
    """Ask the run to stop (it heals and saves what it recorded), then insist."""
    proc.send_signal(sig)
    try:
        out, _ = proc.communicate(timeout=STOP_GRACE_S)
    except subprocess.TimeoutExpired:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(proc.pid, signal.SIGKILL)  # its own session: the run and what it spawned
        try:
            out, _ = proc.communicate(timeout=STOP_GRACE_S)
        except subprocess.TimeoutExpired:  # something outside its group holds the pipe open
            proc.kill()
            proc.wait()
            return ""
    return out or ""


def main(argv: list[str]) -> int:
    """A suite's child: ``SPEC.json RUN_DIR``."""
    try:
        spec = TestSpec.from_dict(json.loads(Path(argv[1]).read_text())).validate()
        return run_and_report(spec, Progress(quiet=True), run=RunDir(Path(argv[2])))
    except HarnessError as e:
        print(f"harness: {e}", file=sys.stderr)
        return e.exit_code


if __name__ == "__main__":
    sys.exit(main(sys.argv))
