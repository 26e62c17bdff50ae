"""``harness suite FILE.toml``: a matrix of runs with an expected verdict each, for CI.

A suite file is ``[[run]]`` tables whose keys are ``harness run``'s long options plus
``expect``::

    name = "nightly"                      # optional; default: the file's stem
    [defaults]                            # optional; merged into every [[run]]
    time-limit = 20

    [[run]]
    lock = ["redis-setnx", "redis-del"]   # a list is a matrix axis (db, lock, workload, nemesis)
    nemesis = "pause"                     # "pause,kill" is one combined nemesis, not two runs
    seeds = [1, 2]                        # or seed = 1; neither: a random seed, recorded
    expect = "invalid"                    # valid | invalid

``expect = "invalid"`` is a real test: a lock known to be unsafe under a fault must still be
caught, or the harness has stopped finding bugs. Each run is a child process of its own (the
same code path ``harness run`` takes, isolated: a crash or hang in one run cannot take the suite
down; a run that outlives its time budget is stopped with SIGTERM, which heals and saves it).
The suite makes each run's directory through the store, so it knows where every run is. Every
entry is validated before anything runs, so a typo fails in a second, not after 29 minutes.

Exit codes: 0 every verdict as expected, 1 any differs (a run the harness could not run differs
too), 3 interrupted or the outputs could not be written, 64 bad usage.
"""

from __future__ import annotations

import itertools
import shlex
import signal
import subprocess
import sys
import time
import tomllib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from harness.controller.spec import TestSpec
from harness.controller.store import RunDir, Store
from harness.core.atomic import write_json
from harness.core.errors import EXIT_INVALID, EXIT_SETUP, EXIT_VALID, HarnessError, UsageError

RUN_KEYS = ("db", "lock", "workload", "nemesis", "backend", "nodes", "clients", "time-limit",
            "seed", "ttl", "persistence")
NEMESIS_OPT = "nemesis-opt"  # a table {key = value} or a list of "key=value"; repeated flags
AXES = ("db", "lock", "workload", "nemesis")
EXPECTS = ("valid", "invalid")
EXIT_VERDICTS = {0: "valid", 1: "invalid", 2: "unknown"}
OVERHEAD_S = 5.0  # start-up, quiesce, teardown, checking: measured 2 s (redis) to 5 s (zookeeper)
STOP_GRACE_S = 30.0


@dataclass
class Entry:
    """One run of the suite: the options for ``harness run`` and the verdict expected."""

    number: int
    options: dict[str, Any]
    expect: str
    source: int  # which [[run]] table (1-based) it came from

    @property
    def time_limit(self) -> float:
        return float(self.options.get("time-limit", 20.0))

    def label(self) -> str:
        o = self.options
        seed = f" seed {o['seed']}" if "seed" in o else ""
        return (f"{o.get('db', 'redis')} {o.get('lock', 'redis-setnx')} "
                f"{o.get('workload', 'mutex')} {o.get('nemesis', 'pause')}{seed}")

    def command(self) -> str:
        """The ``harness run`` line a person types to repeat this entry."""
        return shlex.join(["harness", "run", *self.run_args()])

    def run_args(self) -> list[str]:
        args = []
        for key in RUN_KEYS:
            if key in self.options:
                args += [f"--{key}", str(self.options[key])]
        for k, v in nemesis_options(self.options).items():
            args += ["--nemesis-opt", f"{k}={v}"]
        return args

    def spec(self, store: Path) -> TestSpec:
        return spec_of(self.options, store)


@dataclass
class Outcome:
    entry: Entry
    verdict: str  # valid / invalid / unknown / error / interrupted / skipped
    exit_code: int | None
    seconds: float
    run_dir: RunDir | None
    output: str
    first_violation: str = ""
    log: Path | None = None

    @property
    def as_expected(self) -> bool:
        return self.verdict == self.entry.expect

    @property
    def report(self) -> Path | None:
        if self.run_dir is None or not self.run_dir.report.exists():
            return None
        return self.run_dir.report


@dataclass
class Suite:
    name: str
    path: Path
    entries: list[Entry] = field(default_factory=list)

    def estimate(self) -> float:
        """Seconds the suite should take, from the time limits (for the 30-minute budget)."""
        return sum(e.time_limit + OVERHEAD_S for e in self.entries)


# parsing ----------------------------------------------------------------------------------------
def load(path: Path) -> Suite:
    try:
        data = tomllib.loads(path.read_text())
    except OSError as err:
        raise UsageError(f"cannot read suite {path}: {err.strerror}") from None
    except tomllib.TOMLDecodeError as err:
        raise UsageError(f"suite {path} is not valid TOML: {err}") from None
    return parse(data, path)


def parse(data: dict[str, Any], path: Path) -> Suite:
    unknown = sorted(set(data) - {"name", "defaults", "run"})
    if unknown:
        raise UsageError(f"suite {path}: unknown key {unknown[0]!r} (use name, [defaults], "
                         "[[run]])")
    runs = data.get("run")
    if not isinstance(runs, list) or not runs:
        raise UsageError(f"suite {path} has no [[run]] tables")
    defaults = data.get("defaults", {})
    if not isinstance(defaults, dict):
        raise UsageError(f"suite {path}: [defaults] must be a table")
    suite = Suite(str(data.get("name") or path.stem), path)
    for i, table in enumerate(runs, 1):
        for options, expect in expand({**defaults, **table}, f"{path} [[run]] #{i}"):
            suite.entries.append(Entry(len(suite.entries) + 1, options, expect, i))
    return suite


def expand(table: dict[str, Any], where: str) -> list[tuple[dict[str, Any], str]]:
    """One [[run]] table -> (options, expect) for each point of its matrix, validated."""
    norm = {k.replace("_", "-"): v for k, v in table.items()}
    allowed = {*RUN_KEYS, NEMESIS_OPT, "seeds", "expect"}
    unknown = sorted(set(norm) - allowed)
    if unknown:
        raise UsageError(f"{where}: unknown key {unknown[0]!r}: use "
                         + ", ".join(sorted(allowed)))
    expect = norm.pop("expect", None)
    if expect not in EXPECTS:
        raise UsageError(f"{where}: expect must be \"valid\" or \"invalid\", got {expect!r}")
    if "seed" in norm and "seeds" in norm:
        raise UsageError(f"{where}: give seed or seeds, not both")
    seeds = norm.pop("seeds", None)
    if seeds is not None and (not isinstance(seeds, list) or not seeds):
        raise UsageError(f"{where}: seeds must be a non-empty list of integers")
    axes = {k: v if isinstance(v, list) else [v] for k, v in norm.items() if k in AXES}
    for k, values in axes.items():
        if not values or not all(isinstance(v, str) for v in values):
            raise UsageError(f"{where}: {k} must be a name or a list of names")
    out = []
    keys = list(axes)
    for combo in itertools.product(*(axes[k] for k in keys)):
        for seed in seeds if seeds is not None else [norm.get("seed")]:
            options = {**norm, **dict(zip(keys, combo, strict=True))}
            options.pop("seed", None)
            if seed is not None:
                options["seed"] = seed
            validate(options, where)
            out.append((options, expect))
    return out


def nemesis_options(options: dict[str, Any]) -> dict[str, str]:
    raw = options.get(NEMESIS_OPT) or {}
    if isinstance(raw, dict):
        return {str(k): str(v) for k, v in raw.items()}
    if isinstance(raw, list) and all(isinstance(x, str) and "=" in x for x in raw):
        return dict(x.split("=", 1) for x in raw)
    raise UsageError(f"{NEMESIS_OPT} must be a table or a list of \"key=value\", got {raw!r}")


def spec_of(options: dict[str, Any], store: Path | None = None) -> TestSpec:
    """The spec of one entry, validated as ``harness run`` validates its flags."""
    spec = {k: v for k, v in options.items() if k != NEMESIS_OPT}
    if NEMESIS_OPT in options:
        spec["nemesis_options"] = nemesis_options(options)
    if store is not None:
        spec["store"] = str(store)
    return TestSpec.from_dict(spec).validate()


def validate(options: dict[str, Any], where: str) -> None:
    """The same checks ``harness run`` makes, now: unknown lock, bad nemesis, negative time."""
    try:
        spec_of(options)
    except UsageError as err:
        raise UsageError(f"{where}: {err}") from None
    except (TypeError, ValueError) as err:
        raise UsageError(f"{where}: {err}") from None


# running ----------------------------------------------------------------------------------------
def run_entry(entry: Entry, store: Path, log_dir: Path) -> Outcome:
    """One run in a child process, bounded in time; its output kept in ``log_dir``."""
    budget = entry.time_limit * 3 + 120
    log = log_dir / f"{entry.number:03d}.log"
    spec = entry.spec(store)
    run = Store(store).create(spec.test_name)
    spec_path = log_dir / f"{entry.number:03d}.spec.json"
    write_json(spec_path, spec.to_dict())
    argv = [sys.executable, "-m", "harness.presentation.runs", str(spec_path), str(run.path)]
    started = time.monotonic()
    interrupted = False
    with log.open("w") as fh:
        proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=fh, text=True,
                                start_new_session=True)
        try:
            out, _ = proc.communicate(timeout=budget)
        except subprocess.TimeoutExpired:
            out = stop(proc, signal.SIGTERM)
            fh.write(f"\nharness suite: stopped after {budget:.0f} s (SIGTERM)\n")
        except KeyboardInterrupt:
            interrupted = True
            out = stop(proc, signal.SIGINT)
        fh.write(out or "")
    seconds = time.monotonic() - started
    output = log.read_text(errors="replace")
    run_dir = run if run.is_run() else None
    code = proc.returncode
    verdict, first = judge(code, run_dir)
    if interrupted:
        verdict = "interrupted"
    if verdict in ("error", "interrupted") and not first:
        first = last_line(output)
    return Outcome(entry, verdict, code, seconds, run_dir, output, first, log)


def judge(code: int | None, run_dir: RunDir | None) -> tuple[str, str]:
    """The verdict, from the run's results.json, agreeing with its exit code; and the first
    violation's explanation. A crash exits 1 too (a Python traceback): without results that
    say invalid, an exit code alone never counts as finding the bug."""
    if run_dir is None:
        return "error", ""
    try:
        results = run_dir.load_results()
    except HarnessError:
        return "error", f"no results.json in {run_dir.path}"
    verdict = {True: "valid", False: "invalid"}.get(results.get("valid"), "unknown")
    if EXIT_VERDICTS.get(code) != verdict:
        return "error", f"exit code {code} does not match the verdict {verdict} in results.json"
    return verdict, first_explanation(results)


def first_explanation(results: dict[str, Any]) -> str:
    for check in (results.get("checks") or {}).values():
        if not isinstance(check, dict) or check.get("valid") is not False:
            continue
        if isinstance(check.get("witness"), dict) and check["witness"].get("explanation"):
            return str(check["witness"]["explanation"])
        for value in check.values():
            if isinstance(value, list) and value and isinstance(value[0], dict) and (
                    "explanation" in value[0]):
                return str(value[0]["explanation"])
    return ""


def stop(proc: subprocess.Popen[str], sig: signal.Signals) -> str:
    """Ask the run to stop (it heals and saves what it recorded), then insist."""
    proc.send_signal(sig)
    try:
        out, _ = proc.communicate(timeout=STOP_GRACE_S)
    except subprocess.TimeoutExpired:
        proc.kill()
        out, _ = proc.communicate()
    return out or ""


def last_line(text: str) -> str:
    lines = [x for x in text.strip().splitlines() if x.strip()]
    return lines[-1][:300] if lines else "no output"


def run_suite(suite: Suite, store: Path, out_dir: Path, *, echo: Any = print
              ) -> list[Outcome]:
    """Run every entry in order, printing one line each; Ctrl-C stops after the current run
    has healed and saved, and the rest are reported as skipped."""
    log_dir = out_dir / "logs"
    log_dir.mkdir(parents=True, exist_ok=True)
    outcomes: list[Outcome] = []
    total = len(suite.entries)
    width = len(str(total))
    done_s = 0.0
    for entry in suite.entries:
        left = sum(e.time_limit + OVERHEAD_S for e in suite.entries[entry.number - 1:])
        echo(f"[{entry.number:>{width}}/{total}] {entry.label()} (expect {entry.expect}, "
             f"~{left / 60:.0f} min left) ...", end=" ", flush=True)
        outcome = run_entry(entry, store, log_dir)
        outcomes.append(outcome)
        done_s += outcome.seconds
        mark = "ok" if outcome.as_expected else "DIFFERS"
        where = f"  {outcome.report}" if not outcome.as_expected and outcome.report else ""
        why = f"  {outcome.first_violation}" if outcome.verdict == "error" else ""
        echo(f"{outcome.verdict.upper()} {mark} ({outcome.seconds:.1f} s){where}{why}",
             flush=True)
        if outcome.verdict == "interrupted":
            outcomes.extend(Outcome(e, "skipped", None, 0.0, None, "")
                            for e in suite.entries[entry.number:])
            break
    return outcomes


def exit_code(outcomes: list[Outcome]) -> int:
    if any(o.verdict in ("interrupted", "skipped") for o in outcomes):
        return EXIT_SETUP
    return EXIT_VALID if all(o.as_expected for o in outcomes) else EXIT_INVALID
