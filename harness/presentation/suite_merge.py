"""``harness suite merge DIR...``: the shards of one suite run, put back together.

Each ``harness suite FILE --shard I/N`` writes its own junit.xml, index.html and summary.json.
The merge reads the shards' summary.json (each entry's identity, outcome, and its run and log
by paths relative to the shard's directory, so a shard downloaded from another machine still
links its reports) and writes the three files again, through the same writer as an unsharded
suite: the merged JUnit XML has the cases one unsharded run would have, in suite order.

It refuses, in one line, what would make the merged verdict a lie: shards of different suite
files or of different splits, an entry found twice, an entry found nowhere (a shard that never
finished or was not downloaded).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from harness.controller.store import RunDir
from harness.core.errors import HarnessError, UsageError
from harness.presentation.suite import Entry, Outcome, Suite, numbers

SUMMARY = "summary.json"
JUNIT = "junit.xml"


@dataclass
class ShardResult:
    """One suite directory a shard (or a whole suite run) wrote."""

    path: Path
    summary: dict[str, Any]

    @property
    def shard(self) -> str:
        return str(self.summary.get("shard") or "1/1")

    @property
    def split(self) -> tuple[int, int]:
        index, count = self.shard.split("/")
        return int(index), int(count)

    @property
    def label(self) -> str:
        return f"shard {self.shard} ({self.path})"

    def outcome(self, run: dict[str, Any]) -> Outcome:
        """A run of this shard as the suite recorded it, its paths taken from where the shard
        is now."""
        entry = Entry(int(run["number"]), dict(run["options"]), str(run["expect"]),
                      int(run.get("source") or 0), str(run.get("reason") or ""))
        if run.get("digest") != entry.digest():
            raise UsageError(f"{self.path / SUMMARY}: entry #{entry.number} does not match its "
                             "digest: the file was edited; rerun the shard")
        rel_run, rel_log = run.get("run_dir_relative"), run.get("log_relative")
        run_dir = RunDir((self.path / rel_run).resolve()) if rel_run else None
        if run_dir is not None and not run_dir.path.is_dir():
            run_dir = None  # not downloaded with the shard: the merged row says "no report"
        log = (self.path / rel_log).resolve() if rel_log else None
        output = log.read_text(errors="replace") if log is not None and log.is_file() else ""
        return Outcome(entry, str(run["verdict"]), run.get("exit_code"),
                       float(run.get("seconds") or 0.0), run_dir, output,
                       str(run.get("first_violation") or ""),
                       log if log is not None and log.is_file() else None,
                       run.get("violation_at"))


def find(dirs: list[Path]) -> list[ShardResult]:
    """The suite directories in or under each of ``dirs`` (summary.json beside junit.xml)."""
    found: list[ShardResult] = []
    seen: dict[Path, Path] = {}
    for d in dirs:
        if not d.is_dir():
            raise UsageError(f"{d} is not a directory: give the directories the shards wrote "
                             "(or directories holding them)")
        here = [d] if (d / SUMMARY).is_file() else sorted(
            p.parent for p in d.rglob(SUMMARY) if (p.parent / JUNIT).is_file())
        if not here:
            raise UsageError(f"{d} holds no suite results ({SUMMARY} beside {JUNIT}): give the "
                             "directories `harness suite --shard I/N` wrote")
        for path in here:
            real = path.resolve()
            if real in seen:
                raise UsageError(f"{path} is given twice (also as {seen[real]}): give each "
                                 "shard once")
            seen[real] = path
            found.append(ShardResult(path, load_summary(path / SUMMARY)))
    return found


def load_summary(path: Path) -> dict[str, Any]:
    try:
        data = json.loads(path.read_text())
    except OSError as err:
        raise UsageError(f"cannot read {path}: {err.strerror}") from None
    except ValueError:
        raise UsageError(f"{path} is not valid JSON") from None
    if not isinstance(data, dict) or not isinstance(data.get("runs"), list):
        raise UsageError(f"{path} is not a suite summary")
    if not isinstance(data.get("suite"), dict):
        raise UsageError(f"{path} has no suite fingerprint (written by an older harness): "
                         "rerun the shard")
    return data


def merge(shards: list[ShardResult]) -> tuple[Suite, list[Outcome], float]:
    """The whole suite from its shards: (suite, outcomes in suite order, when it started)."""
    first = shards[0]
    name, suite = first.summary["name"], first.summary["suite"]
    for s in shards[1:]:
        if s.summary["suite"] != suite or s.summary["name"] != name:
            raise UsageError(f"{s.label} is of suite {s.summary['name']!r} "
                             f"{s.summary['suite'].get('fingerprint')}, but {first.label} of "
                             f"{name!r} {suite.get('fingerprint')}: merge the shards of one "
                             "suite file, run from the same commit")
        if s.split[1] != first.split[1]:
            raise UsageError(f"{s.label} and {first.label} are of different splits: merge the "
                             "shards of one --shard I/N matrix")
    by_number: dict[int, tuple[ShardResult, Outcome]] = {}
    for s in shards:
        for run in s.summary["runs"]:
            o = s.outcome(run)
            if o.entry.number in by_number:
                other = by_number[o.entry.number][0]
                raise UsageError(f"entry #{o.entry.number} is in {other.label} and in "
                                 f"{s.label}: give each shard once")
            by_number[o.entry.number] = (s, o)
    total = int(suite["entries"])
    missing = [n for n in range(1, total + 1) if n not in by_number]
    if missing:
        count = first.split[1]
        absent = sorted(set(range(1, count + 1)) - {s.split[0] for s in shards})
        which = f" (shard {', '.join(f'{i}/{count}' for i in absent)} not given)" if (
            absent) else ""
        shown = numbers([Entry(n, {}, "valid", 0) for n in missing])
        raise HarnessError(f"{len(missing)} of the suite's {total} entries are in no shard "
                           f"given: {shown}{which}; give every shard's directory")
    outcomes = [by_number[n][1] for n in sorted(by_number)]
    merged = Suite(name, Path(str(first.summary.get("file", name))),
                   [o.entry for o in outcomes],
                   merged=[s.label for s in sorted(shards, key=lambda s: s.split)])
    started = min(float(s.summary.get("started_epoch") or 0.0) for s in shards)
    return merged, outcomes, started
