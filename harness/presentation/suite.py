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
    reason = "a lease expires under its frozen holder"   # optional: why, in one line
    shows = ["mutex.lock-overlap-count"]  # optional: figures of results.json that must be > 0

A row with ``shows`` is right only when its run shows what it is for: a fencing row VALID with
no stale write rejected proved nothing about fencing, and counts as unknown.

``harness suite FILE --seeds 1-20`` runs every row (an entry but its seed) under each of those
seeds instead of the file's, and shows how often each row was right (:mod:`suite_detection`).

``expect = "invalid"`` is a real test: a lock known to be unsafe under a fault must still be
caught, or the harness has stopped finding bugs. Each run is a child process of its own (the
same code path ``harness run`` takes, isolated: a crash or hang in one run cannot take the suite
down; a run that outlives its time budget is stopped with SIGTERM, which heals and saves it).
The suite makes each run's directory through the store, so it knows where every run is. Every
entry is validated before anything runs, so a typo fails in a second, not after 29 minutes.

Across machines, ``--shard I/N`` runs a deterministic 1/N of the entries (:func:`assign`: the
same on every machine, whatever the order of the file's tables, balanced by estimated time) and
``harness suite merge`` (:mod:`harness.presentation.suite_merge`) puts the shards back together.

Exit codes: 0 every verdict as expected, 1 any differs (a run the harness could not run differs
too), 3 interrupted or the outputs could not be written, 64 bad usage.
"""

from __future__ import annotations

import hashlib
import itertools
import json
import math
import re
import shlex
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from harness.controller.registry import Registry
from harness.controller.spec import TestSpec
from harness.controller.store import RunDir, Store
from harness.core.errors import EXIT_INVALID, EXIT_SETUP, EXIT_VALID, HarnessError, UsageError
from harness.core.tomlfile import read_toml
from harness.presentation.runs import run_in_child

RUN_KEYS = ("db", "lock", "workload", "nemesis", "backend", "nodes", "clients", "time-limit",
            "seed", "ttl", "persistence", "hold", "think", "acquire-timeout", "keys", "hosts",
            "resource", "resource-mode", "links", "op-timeout")
NEMESIS_OPT = "nemesis-opt"  # a table {key = value} or a list of "key=value"; repeated flags
LOCK_OPT = "lock-opt"  # the same, for the lock's declared options
OPTION_TABLES = {NEMESIS_OPT: "nemesis_options", LOCK_OPT: "lock_options"}
SHOWS = "shows"  # figures ("check.figure") a run must show > 0 for its verdict to count
FIGURE = re.compile(r"^[a-z][a-z0-9-]*\.[a-z][a-z0-9-]*$")
AXES = ("db", "lock", "workload", "nemesis", "resource-mode", "backend")
EXPECTS = ("valid", "invalid")
EXIT_VERDICTS = {0: "valid", 1: "invalid", 2: "unknown"}
OVERHEAD_S = 5.0  # start-up, quiesce, teardown, checking: measured 2 s (redis) to 5 s (zookeeper)
SHARD = re.compile(r"^\s*(\d+)\s*/\s*(\d+)\s*$")
SEED_PART = re.compile(r"^\s*(\d+)\s*(?:-\s*(\d+)\s*)?$")


@dataclass
class Entry:
    """One run of the suite: the options for ``harness run`` and the verdict expected."""

    number: int
    options: dict[str, Any]
    expect: str
    source: int  # which [[run]] table (1-based) it came from
    reason: str = ""  # why the literature predicts the verdict (the table's ``reason``)

    @property
    def time_limit(self) -> float:
        return float(self.options.get("time-limit", 20.0))

    def estimate(self) -> float:
        """Seconds this entry should take: its time limit and the harness's overhead."""
        return self.time_limit + OVERHEAD_S

    def digest(self) -> str:
        """What the entry is (its options and expectation), not where it stands in the file:
        the same on every machine (sha256 of canonical JSON, never Python's salted hash)."""
        canonical = json.dumps({"options": self.options, "expect": self.expect},
                               sort_keys=True, separators=(",", ":"), default=str)
        return hashlib.sha256(canonical.encode()).hexdigest()

    def row(self) -> str:
        """Which row it is a seed of: the digest of its options but the seed, and its
        expectation (the entries ``--seeds`` makes of one row share it)."""
        return Entry(0, unseeded(self.options), self.expect, 0).digest()

    def label(self, seed: bool = True) -> str:
        o = self.options
        seed_text = f" seed {o['seed']}" if seed and "seed" in o else ""
        resource = "".join(f" {o[k]}" for k in ("resource", "resource-mode", "backend")
                           if k in o)
        return (f"{o.get('db', 'redis')} {lock_of(o)} "
                f"{o.get('workload', 'mutex')} {o.get('nemesis', 'pause')}{resource}{seed_text}")

    def command(self) -> str:
        """The ``harness run`` line a person types to repeat this entry."""
        return shlex.join(["harness", "run", *self.run_args()])

    def run_args(self) -> list[str]:
        return run_args(self.options)

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
    violation_at: float | None = None  # seconds into the run of its first violation, if timed

    @property
    def as_expected(self) -> bool:
        return self.verdict == self.entry.expect

    @property
    def report(self) -> Path | None:
        if self.run_dir is None or not self.run_dir.report.exists():
            return None
        return self.run_dir.report


@dataclass(frozen=True)
class Shard:
    """``--shard I/N``: the I-th of N parts (1-based)."""

    index: int
    count: int

    def __str__(self) -> str:
        return f"{self.index}/{self.count}"


def parse_shard(text: str) -> Shard:
    m = SHARD.match(text)
    if not m or not 1 <= int(m.group(1)) <= int(m.group(2)):
        raise UsageError(f"--shard {text!r}: expected I/N with 1 <= I <= N, e.g. --shard 2/4")
    return Shard(int(m.group(1)), int(m.group(2)))


@dataclass
class Suite:
    """A suite file's entries, or the part of them one shard runs (``shard`` set: ``entries``
    are its own, ``elsewhere`` the other shards'). ``total`` and ``fingerprint`` are always
    the whole suite's, so that a merge can tell shards of one suite run apart from others."""

    name: str
    path: Path
    entries: list[Entry] = field(default_factory=list)
    shard: Shard | None = None
    elsewhere: list[Entry] = field(default_factory=list)
    merged: list[str] = field(default_factory=list)  # the shards a merged suite came from

    @property
    def total(self) -> int:
        return len(self.entries) + len(self.elsewhere)

    @property
    def title(self) -> str:
        return f"{self.name} shard {self.shard}" if self.shard else self.name

    def fingerprint(self) -> str:
        """Which suite this is: every entry's number and digest, in order."""
        everything = sorted(self.entries + self.elsewhere, key=lambda e: e.number)
        h = hashlib.sha256()
        for e in everything:
            h.update(f"{e.number}:{e.digest()}\n".encode())
        return h.hexdigest()[:16]

    def estimate(self) -> float:
        """Seconds the suite should take, from the time limits (for the 30-minute budget)."""
        return sum(e.estimate() for e in self.entries)

    def wall_estimate(self, jobs: int) -> float:
        """Seconds it should take with ``jobs`` local runs at once (the others one at a time)."""
        shared = sum(e.estimate() for e in self.entries if local(e))
        return shared / max(1, jobs) + self.estimate() - shared

    def reseeded(self, seeds: list[int]) -> Suite:
        """Every row (the entries that differ only in their seed are one) under each of
        ``seeds``, in the file's order: ``--seeds``."""
        rows: dict[str, Entry] = {}
        for e in self.entries:
            rows.setdefault(e.row(), e)
        if len(rows) * len(seeds) > MAX_RUNS:
            raise UsageError(f"--seeds: {len(rows)} row(s) x {len(seeds)} seed(s) is more than "
                             f"{MAX_RUNS:,} runs (split the suite, or shard it with --shard)")
        entries = [Entry(0, {**unseeded(e.options), "seed": s}, e.expect, e.source, e.reason)
                   for e in rows.values() for s in seeds]
        for number, e in enumerate(entries, 1):
            e.number = number
        return Suite(self.name, self.path, entries)

    def sharded(self, shard: Shard) -> Suite:
        """The part ``shard`` runs: the same on every machine that reads the same file."""
        if self.shard is not None:
            raise ValueError("already a shard")
        parts = assign(self.entries, shard.count)
        mine = parts[shard.index - 1]
        others = sorted((e for i, part in enumerate(parts) if i != shard.index - 1
                         for e in part), key=lambda e: e.number)
        return Suite(self.name, self.path, mine, shard, others)


def assign(entries: list[Entry], count: int) -> list[list[Entry]]:
    """Deal ``entries`` to ``count`` shards, balanced by estimated time: longest first, each to
    the shard with the least time so far (ties: the lower shard). Entries are taken in the
    order of (estimate, digest), never of the file, so reordering the file's tables moves no
    entry to another shard; two identical entries are told apart by their number. Each shard's
    entries run in suite order."""
    order = sorted(entries, key=lambda e: (-e.estimate(), e.digest(), e.number))
    loads = [0.0] * count
    parts: list[list[Entry]] = [[] for _ in range(count)]
    for e in order:
        i = min(range(count), key=lambda k: (loads[k], k))
        parts[i].append(e)
        loads[i] += e.estimate()
    return [sorted(p, key=lambda e: e.number) for p in parts]


def unseeded(options: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in options.items() if k != "seed"}


def parse_seeds(text: str) -> list[int]:
    """``--seeds``: ``1-20``, ``3``, ``1,4,7-9``: the seeds in the order given, each once."""
    seeds: dict[int, None] = {}
    for part in text.split(","):
        m = SEED_PART.match(part)
        if not m:
            raise UsageError(f"--seeds {text!r}: expected seeds and ranges of seeds, e.g. 1-20, "
                             "3 or 1,4,7-9")
        lo, hi = int(m.group(1)), int(m.group(2) or m.group(1))
        if hi < lo:
            raise UsageError(f"--seeds {text!r}: the range {part.strip()} runs backwards")
        if hi - lo >= MAX_RUNS:
            raise UsageError(f"--seeds {text!r}: more than {MAX_RUNS:,} seeds")
        seeds.update(dict.fromkeys(range(lo, hi + 1)))
    if len(seeds) > MAX_RUNS:
        raise UsageError(f"--seeds {text!r}: more than {MAX_RUNS:,} seeds")
    return list(seeds)


def numbers(entries: list[Entry]) -> str:
    """#1-#3, #7: entry numbers, runs of consecutive ones as ranges."""
    nums = sorted(e.number for e in entries)
    out: list[str] = []
    i = 0
    while i < len(nums):
        j = i
        while j + 1 < len(nums) and nums[j + 1] == nums[j] + 1:
            j += 1
        out.append(f"#{nums[i]}" if i == j else f"#{nums[i]}-#{nums[j]}")
        i = j + 1
    return ", ".join(out)


# parsing ----------------------------------------------------------------------------------------
def load(path: Path) -> Suite:
    return parse(read_toml(path, "suite"), path)


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
        where = f"{path} [[run]] #{i}"
        reason = table.get("reason", "") if isinstance(table, dict) else ""
        if not isinstance(reason, str):
            raise UsageError(f"{where}: reason must be a line of text, got {reason!r}")
        for options, expect in expand({**defaults, **table}, where):
            suite.entries.append(Entry(len(suite.entries) + 1, options, expect, i, reason))
        if len(suite.entries) > MAX_RUNS:
            raise UsageError(f"suite {path}: more than {MAX_RUNS:,} runs; a suite holds at "
                             f"most {MAX_RUNS:,} (split it, or shard it with --shard)")
    return suite


MAX_RUNS = 2_000  # runs in one suite: the nightly is about 60; 2,000 runs take days


def expand(table: dict[str, Any], where: str) -> list[tuple[dict[str, Any], str]]:
    """One [[run]] table -> (options, expect) for each point of its matrix, validated."""
    norm = {k.replace("_", "-"): v for k, v in table.items() if k != "reason"}
    allowed = {*RUN_KEYS, *OPTION_TABLES, "seeds", "expect", "reason", SHOWS}
    unknown = sorted(set(norm) - allowed)
    if unknown:
        raise UsageError(f"{where}: unknown key {unknown[0]!r}: use "
                         + ", ".join(sorted(allowed)))
    expect = norm.pop("expect", None)
    if expect not in EXPECTS:
        raise UsageError(f"{where}: expect must be \"valid\" or \"invalid\", got {expect!r}")
    if "seed" in norm and "seeds" in norm:
        raise UsageError(f"{where}: give seed or seeds, not both")
    shows = norm.get(SHOWS, [])
    if not isinstance(shows, list) or not all(isinstance(f, str) and FIGURE.match(f)
                                              for f in shows):
        raise UsageError(f"{where}: shows must be a list of figures of results.json, "
                         f"\"check.figure\" (e.g. \"fencing.stale-rejected\"), got {shows!r}")
    seeds = norm.pop("seeds", None)
    if seeds is not None and (not isinstance(seeds, list) or not seeds):
        raise UsageError(f"{where}: seeds must be a non-empty list of integers")
    axes = {k: v if isinstance(v, list) else [v] for k, v in norm.items() if k in AXES}
    for k, values in axes.items():
        if not values or not all(isinstance(v, str) for v in values):
            raise UsageError(f"{where}: {k} must be a name or a list of names")
    count = math.prod(len(v) for v in axes.values()) * len(seeds or [None])
    if count > MAX_RUNS:
        raise UsageError(f"{where}: its matrix is {count:,} runs; a suite holds at most "
                         f"{MAX_RUNS:,}")
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


def lock_of(options: dict[str, Any]) -> str:
    """The lock an entry runs: its own, else its DB's (``--db zookeeper`` alone takes the
    zookeeper lock), else the default."""
    if "lock" in options:
        return str(options["lock"])
    try:
        db = Registry().load("dbs", str(options.get("db", "redis")))
    except (HarnessError, UsageError):
        return "redis-setnx"
    return str(db.default_lock or "redis-setnx")


def run_args(options: dict[str, Any]) -> list[str]:
    """``harness run``'s flags for an entry's options."""
    args = []
    for key in RUN_KEYS:
        if key in options:
            args += [f"--{key}", str(options[key])]
    for table in OPTION_TABLES:
        for k, v in option_table(options, table).items():
            args += [f"--{table}", f"{k}={v}"]
    return args


def option_table(options: dict[str, Any], key: str) -> dict[str, str]:
    """``nemesis-opt`` / ``lock-opt`` of an entry: a table, or a list of "key=value"."""
    raw = options.get(key) or {}
    if isinstance(raw, dict):
        return {str(k): str(v) for k, v in raw.items()}
    if isinstance(raw, list) and all(isinstance(x, str) and "=" in x for x in raw):
        return dict(x.split("=", 1) for x in raw)
    raise UsageError(f"{key} must be a table or a list of \"key=value\", got {raw!r}")


def spec_of(options: dict[str, Any], store: Path | None = None) -> TestSpec:
    """The spec of one entry, validated as ``harness run`` validates its flags."""
    spec = {k: v for k, v in options.items() if k not in OPTION_TABLES and k != SHOWS}
    for table, key in OPTION_TABLES.items():
        if table in options:
            spec[key] = option_table(options, table)
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
    log = log_dir / f"{entry.number:03d}.log"
    spec = entry.spec(store)
    run = Store(store).create(spec.test_name)
    started = time.monotonic()
    child = run_in_child(spec, run, log)
    seconds = time.monotonic() - started
    run_dir = run if run.is_run() else None
    verdict, first = judge(child.code, run_dir)
    if child.interrupted:
        verdict = "interrupted"
    if verdict in ("error", "interrupted") and not first:
        first = last_line(child.output)
    results = run_dir.load_results() if run_dir is not None and verdict in (
        "valid", "invalid") else {}
    not_shown = unshown(entry.options.get(SHOWS) or [], results) if results else ""
    if not_shown:
        verdict, first = "unknown", f"{verdict.upper()}, but {not_shown}"
    at = violation_at(results) if verdict == "invalid" else None
    return Outcome(entry, verdict, child.code, seconds, run_dir, child.output, first, log, at)


def unshown(figures: list[str], results: dict[str, Any]) -> str:
    """What a run was to show and did not: the first of ``figures`` ("check.figure") not
    above 0 in its results, said in words ("" when every one is)."""
    for figure in figures:
        check, key = figure.split(".", 1)
        value = ((results.get("checks") or {}).get(check) or {}).get(key)
        if not isinstance(value, int | float) or value <= 0:
            return f"{figure} = {value}: the run never showed what the row is for"
    return ""


def violation_at(results: dict[str, Any]) -> float | None:
    """Seconds into the run of its first violation: the earliest ``first-violation-at`` of
    the checks that failed (the mutex checker's first overlap); None when none of them
    times what it found (fencing and linearizability name ops, not times)."""
    times = [c["first-violation-at"] for c in (results.get("checks") or {}).values()
             if isinstance(c, dict) and c.get("valid") is False
             and isinstance(c.get("first-violation-at"), int | float)]
    return min(times) if times else None


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
    if code == 3 and results.get("could-not-test"):  # the run says why in one line
        return "error", f"could not test: {str(results['could-not-test']).splitlines()[0]}"
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
    undecided = [name for name, check in (results.get("checks") or {}).items()
                 if isinstance(check, dict) and check.get("valid") == "unknown"]
    return f"undecided: {', '.join(undecided)}" if undecided else ""


def last_line(text: str) -> str:
    lines = [x for x in text.strip().splitlines() if x.strip()]
    return lines[-1][:300] if lines else "no output"


def run_suite(suite: Suite, store: Path, out_dir: Path, *, echo: Any = print, jobs: int = 1,
              said: Callable[[Outcome], str] | None = None) -> list[Outcome]:
    """Run the suite's entries (a shard's: its own), one line each; ``jobs`` > 1: that many at
    once (:func:`run_parallel`). Ctrl-C stops after the current runs have healed and saved,
    and the rest are reported as skipped. The outcomes are in suite order either way.
    ``said``: a caller's own handling of each run as it finishes, and its line's words."""
    log_dir = out_dir / "logs"
    log_dir.mkdir(parents=True, exist_ok=True)
    if said is not None or (jobs > 1 and len(suite.entries) > 1):
        return run_parallel(suite, store, log_dir, jobs, echo, said)
    outcomes: list[Outcome] = []
    total = len(suite.entries)
    width = len(str(total))
    for i, entry in enumerate(suite.entries):
        left = sum(e.estimate() for e in suite.entries[i:])
        number = f" #{entry.number}" if suite.shard else ""
        echo(f"[{i + 1:>{width}}/{total}]{number} {entry.label()} (expect {entry.expect}, "
             f"~{left / 60:.0f} min left) ...", end=" ", flush=True)
        outcome = run_entry(entry, store, log_dir)
        outcomes.append(outcome)
        echo(outcome_words(outcome), flush=True)
        if outcome.verdict == "interrupted":
            outcomes.extend(Outcome(e, "skipped", None, 0.0, None, "")
                            for e in suite.entries[i + 1:])
            break
    return outcomes


def outcome_words(outcome: Outcome) -> str:
    """``INVALID ok (12.3 s)``, with the report and the error where it differs."""
    mark = "ok" if outcome.as_expected else "DIFFERS"
    where = f"  {outcome.report}" if not outcome.as_expected and outcome.report else ""
    why = f"  {outcome.first_violation}" if outcome.verdict == "error" else ""
    return f"{outcome.verdict.upper()} {mark} ({outcome.seconds:.1f} s){where}{why}"


def local(entry: Entry) -> bool:
    """Runs on this machine's local backend: it may share the machine with other runs (each
    takes its own 127.x block). Docker and SSH runs go one at a time, as before."""
    return str(entry.options.get("backend", "local")) == "local"


def run_parallel(suite: Suite, store: Path, log_dir: Path, jobs: int, echo: Any,
                 said: Callable[[Outcome], str] | None = None) -> list[Outcome]:
    """``jobs`` local runs at once, longest first (the suite ends sooner); then the others one
    at a time. A line per run as it finishes; the outcomes in suite order."""
    from harness.presentation.parallel import run_all

    total = len(suite.entries)
    width = len(str(total))
    shared = sorted((e for e in suite.entries if local(e)),
                    key=lambda e: (-e.estimate(), e.number))
    alone = [e for e in suite.entries if not local(e)]
    left = [sum(e.estimate() for e in shared) / jobs + sum(e.estimate() for e in alone)]
    finished: dict[int, Outcome] = {}
    echo(f"{len(shared)} local run(s), {jobs} at a time"
         + (f"; then {len(alone)} on other backends, one at a time" if alone else ""),
         flush=True)

    def done(_: int, outcome: Outcome) -> None:
        finished[outcome.entry.number] = outcome
        e = outcome.entry
        left[0] -= e.estimate() / (jobs if local(e) else 1)
        words = said(outcome) if said else (f"#{e.number} {e.label()} (expect {e.expect}): "
                                             f"{outcome_words(outcome)}")
        echo(f"[{len(finished):>{width}}/{total}] {words}  ~{max(0.0, left[0]) / 60:.0f} min "
             "left", flush=True)

    def work(entry: Entry) -> Outcome:
        return run_entry(entry, store, log_dir)

    def interrupted(outcome: Outcome) -> bool:
        return outcome.verdict == "interrupted"

    started = time.monotonic()
    _, stopped = run_all(shared, work, jobs, done=done, stop=interrupted)
    if not stopped:
        run_all(alone, work, 1, done=done, stop=interrupted)
    outcomes = [finished.get(e.number) or Outcome(e, "skipped", None, 0.0, None, "")
                for e in suite.entries]
    runs = sum(o.seconds for o in outcomes)
    echo(f"{runs / 60:.1f} min of runs in {(time.monotonic() - started) / 60:.1f} min, "
         f"{jobs} at a time", flush=True)
    return outcomes


def exit_code(outcomes: list[Outcome]) -> int:
    if any(o.verdict in ("interrupted", "skipped") for o in outcomes):
        return EXIT_SETUP
    return EXIT_VALID if all(o.as_expected for o in outcomes) else EXIT_INVALID
