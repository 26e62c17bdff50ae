"""``harness suite --shard I/N`` and ``harness suite merge``: the split is deterministic, covers
every entry once, ignores the order of the file's tables and balances time; the merge rebuilds
what one unsharded suite run writes and refuses duplicates, gaps and foreign shards in one
line. The real-run acceptance test (6 runs on Redis, split in two, merged) is at the end."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

from harness.controller.store import RunDir
from harness.core.errors import HarnessError, UsageError
from harness.presentation.suite import (
    Outcome,
    Shard,
    Suite,
    assign,
    load,
    numbers,
    parse,
    parse_shard,
)
from harness.presentation.suite_merge import find, merge
from harness.presentation.suite_output import write_outputs
from tests.harness_runs import bounded

ROOT = Path(__file__).parent.parent

TABLES = [
    {"lock": ["redis-setnx", "redis-del", "redis-get-del"], "nemesis": "none",
     "seeds": [1, 2], "expect": "valid", "time-limit": 4},
    {"lock": "redis-fenced", "workload": "fenced", "nemesis": ["pause", "kill"],
     "seed": 1, "expect": "valid", "time-limit": 30},
    {"db": "zookeeper", "lock": "zookeeper", "nemesis": "pause", "seeds": [1, 2, 3],
     "expect": "invalid", "time-limit": 12},
]


def suite_of(tables: list[dict[str, object]], name: str = "s") -> Suite:
    return parse({"name": name, "run": tables}, Path(f"{name}.toml"))


def harness(*args: str, cwd: Path = ROOT, timeout: float = 120
            ) -> subprocess.CompletedProcess[str]:
    return bounded([sys.executable, "-m", "harness.cli", *args], timeout=timeout, cwd=cwd)


# the split ----------------------------------------------------------------------------------
def test_parse_shard() -> None:
    assert parse_shard("2/4") == Shard(2, 4) and str(parse_shard(" 1 / 1 ")) == "1/1"
    for bad in ("0/2", "3/2", "1/0", "2", "a/b", "-1/2"):
        with pytest.raises(UsageError, match="expected I/N"):
            parse_shard(bad)


@pytest.mark.parametrize("count", [1, 2, 3, 4, 7, 11, 20])
def test_every_entry_runs_in_exactly_one_shard(count: int) -> None:
    s = suite_of(TABLES)
    parts = [s.sharded(Shard(i, count)) for i in range(1, count + 1)]
    ran = sorted(e.number for p in parts for e in p.entries)
    assert ran == list(range(1, s.total + 1))
    for p in parts:
        assert p.total == s.total and p.fingerprint() == s.fingerprint()
        assert sorted(e.number for e in p.entries + p.elsewhere) == ran
        assert [e.number for e in p.entries] == sorted(e.number for e in p.entries)


def test_the_split_ignores_the_order_of_the_tables() -> None:
    """Each entry's shard is a function of what it is, not of where the file lists it."""
    a = suite_of(TABLES)
    b = suite_of(list(reversed(TABLES)))
    for count in (2, 3, 5):
        def by_shard(s: Suite, count: int = count) -> list[set[str]]:
            return [{e.digest() for e in s.sharded(Shard(i, count)).entries}
                    for i in range(1, count + 1)]
        assert by_shard(a) == by_shard(b)


def test_the_split_is_balanced_by_estimated_time() -> None:
    s = suite_of(TABLES)  # 6 x (4+5) s, 2 x (30+5) s, 3 x (12+5) s = 175 s
    loads = [sum(e.estimate() for e in part) for part in assign(s.entries, 2)]
    assert sum(loads) == pytest.approx(s.estimate())
    assert max(loads) - min(loads) <= max(e.estimate() for e in s.entries)
    assert max(loads) - min(loads) <= 10  # LPT: 87 and 88, not a count-even 6/5 split


def test_the_ci_example_splits_the_nightly_suite_consistently() -> None:
    """docs/nightly.yml: the matrix and the --shard I/N agree, every shard job runs one part,
    the merge job reads them all, and each part fits well inside the job's time."""
    yml = (ROOT / "docs" / "nightly.yml").read_text()
    matrix = re.search(r"^\s+shard: \[([\d, ]+)\]$", yml, re.M)
    assert matrix, "a matrix of shards"
    shards = [int(x) for x in matrix.group(1).split(",")]
    counts = set(re.findall(r"--shard \$\{\{ matrix\.shard \}\}/(\d+)", yml))
    assert counts == {str(len(shards))} and shards == list(range(1, len(shards) + 1))
    assert "harness suite merge results/shards" in yml and "pattern: nightly-shard-*" in yml
    nightly = load(ROOT / "suites" / "nightly.toml")
    for i in shards:
        assert nightly.sharded(Shard(i, len(shards))).estimate() < 10 * 60


def test_more_shards_than_entries_leaves_some_empty() -> None:
    s = suite_of(TABLES[:1])
    parts = assign(s.entries, 10)
    assert sum(1 for p in parts if p) == len(s.entries) == 6


def test_identical_entries_are_two_runs_in_the_split() -> None:
    twice = [{"lock": "redis-setnx", "nemesis": "pause", "expect": "invalid"}] * 2
    s = suite_of(twice)
    assert s.entries[0].digest() == s.entries[1].digest()
    assert sorted(e.number for p in assign(s.entries, 2) for e in p) == [1, 2]


def test_numbers_are_ranges() -> None:
    s = suite_of(TABLES)
    assert numbers([s.entries[i] for i in (0, 1, 2, 4, 7, 8)]) == "#1-#3, #5, #8-#9"
    assert numbers([]) == ""


def test_dry_run_of_a_shard_names_what_it_skips(tmp_path: Path) -> None:
    f = tmp_path / "s.toml"
    f.write_text('[[run]]\nlock = ["redis-setnx", "redis-del"]\nnemesis = "none"\n'
                 'seeds = [1, 2, 3]\nexpect = "valid"\n')
    outs = [harness("suite", str(f), "--shard", f"{i}/2", "--dry-run") for i in (1, 2)]
    assert [p.returncode for p in outs] == [0, 0], outs
    listed = [[int(x.split(".")[0]) for x in p.stdout.splitlines()[1:]] for p in outs]
    assert sorted(listed[0] + listed[1]) == [1, 2, 3, 4, 5, 6]
    assert "3 of 6 run(s)" in outs[0].stdout and "3 skipped here" in outs[0].stdout
    bad = harness("suite", str(f), "--shard", "3/2")
    assert bad.returncode == 64 and bad.stderr.count("\n") == 1 and "I/N" in bad.stderr


# the merge ----------------------------------------------------------------------------------
VERDICTS = ["valid", "invalid", "valid", "error", "valid", "valid", "invalid", "invalid",
            "valid", "unknown", "invalid"]


def fake_shards(tmp_path: Path, count: int) -> tuple[Suite, list[Path]]:
    """Each shard's outputs as `harness suite --shard` writes them, with made-up outcomes
    (a report for every run, one failure, one error) in a store of its own."""
    whole = suite_of(TABLES, "fake")
    dirs = []
    for i in range(1, count + 1):
        part = whole.sharded(Shard(i, count))
        store = tmp_path / f"machine-{i}" / "results"
        out = store / "_suites" / "fake" / f"2026-shard-{i}-of-{count}"
        (out / "logs").mkdir(parents=True)
        outcomes = []
        for e in part.entries:
            run = store / "t" / f"run{e.number}"
            run.mkdir(parents=True)
            (run / "report.html").write_text("<html></html>")
            log = out / "logs" / f"{e.number:03d}.log"
            log.write_text(f"output of #{e.number}\n")
            verdict = VERDICTS[e.number - 1]
            outcomes.append(Outcome(e, verdict, {"valid": 0, "invalid": 1}.get(verdict, 3),
                                    float(e.number), RunDir(run), log.read_text(),
                                    "boom" if verdict == "error" else "", log))
        write_outputs(out, out / "junit.xml", part, outcomes, 1000.0 + i)
        dirs.append(out)
    return whole, dirs


def cases(junit: Path) -> list[tuple[str, str, str, str]]:
    """(classname, name, outcome element, verdict) of each testcase."""
    ts = ET.parse(junit).getroot().find("testsuite")
    assert ts is not None
    out = []
    for tc in ts.findall("testcase"):
        kind = next((c.tag for c in tc if c.tag in ("failure", "error", "skipped")), "passed")
        verdict = next(p.get("value", "") for p in tc.iter("property")
                       if p.get("name") == "verdict")
        out.append((tc.get("classname", ""), tc.get("name", ""), kind, verdict))
    return out


def test_merge_rebuilds_what_one_unsharded_run_writes(tmp_path: Path) -> None:
    whole, dirs = fake_shards(tmp_path, 3)
    merged, outcomes, started = merge(find(dirs))
    assert [o.entry.number for o in outcomes] == list(range(1, whole.total + 1))
    assert merged.fingerprint() == whole.fingerprint() and started == 1001.0
    assert all(o.report is not None for o in outcomes)
    assert outcomes[3].first_violation == "boom" and outcomes[3].output == "output of #4\n"

    # the same outcomes written as one unsharded run would have: the same cases
    ref = tmp_path / "unsharded"
    ref.mkdir()
    write_outputs(ref, ref / "junit.xml", whole, outcomes, started)
    out = tmp_path / "merged"
    out.mkdir()
    write_outputs(out, out / "junit.xml", merged, outcomes, started)
    assert cases(out / "junit.xml") == cases(ref / "junit.xml")
    kinds = [k for _, _, k, _ in cases(out / "junit.xml")]
    assert kinds.count("failure") == 5 and kinds.count("error") == 1  # #2, #7-#10; #4
    index = (out / "index.html").read_text()
    assert index.count("report</a>") == whole.total and "Merged from 3 shard(s)" in index
    assert 'href="../machine-1/results/t/run' in index  # relative: works as an artifact


def test_merge_from_the_command_line_finds_shards_under_a_directory(tmp_path: Path) -> None:
    whole, _ = fake_shards(tmp_path, 2)
    store = tmp_path / "results"
    proc = harness("suite", "merge", str(tmp_path), "--store", str(store), "--junit",
                   str(tmp_path / "merged.xml"))
    assert proc.returncode == 1, proc.stdout + proc.stderr  # 5 differ, 1 error
    assert "merging 2 shard(s), 11 run(s)" in proc.stdout
    assert "#2 redis redis-setnx mutex none seed 2: expected valid, got invalid" in proc.stdout
    assert "suite fake: 5 of 11 as expected, 6 differ" in proc.stdout
    assert len(cases(tmp_path / "merged.xml")) == 11
    [summary] = store.glob("_suites/fake/*-merged/summary.json")
    data = json.loads(summary.read_text())
    assert data["suite"]["fingerprint"] == whole.fingerprint() and len(data["merged"]) == 2
    assert [r["number"] for r in data["runs"]] == list(range(1, 12))


def test_a_missing_shard_is_one_line(tmp_path: Path) -> None:
    _, dirs = fake_shards(tmp_path, 3)
    with pytest.raises(HarnessError, match=r"entries are in no shard given: .*"
                       r"\(shard 2/3 not given\); give every shard's directory"):
        merge(find([dirs[0], dirs[2]]))
    proc = harness("suite", "merge", str(dirs[0]), str(dirs[2]), "--store",
                   str(tmp_path / "r"))
    assert proc.returncode == 3 and proc.stderr.count("\n") == 1, proc.stderr
    assert not (tmp_path / "r").exists()


def test_a_shard_given_twice_is_one_line(tmp_path: Path) -> None:
    _, dirs = fake_shards(tmp_path, 2)
    copy = tmp_path / "copy"
    shutil.copytree(dirs[0].parents[3], copy)  # the same shard, downloaded twice
    with pytest.raises(UsageError, match=r"entry #\d+ is in shard 1/2 .* and in shard 1/2"):
        merge(find([*dirs, copy]))
    with pytest.raises(UsageError, match="given twice"):
        find([dirs[0], dirs[0].parent])
    proc = harness("suite", "merge", *map(str, dirs), str(copy), "--store", str(tmp_path / "r"))
    assert proc.returncode == 64 and proc.stderr.count("\n") == 1, proc.stderr


def test_shards_of_other_suites_or_splits_are_refused(tmp_path: Path) -> None:
    _, two = fake_shards(tmp_path / "a", 2)
    _, three = fake_shards(tmp_path / "b", 3)
    with pytest.raises(UsageError, match="different splits"):
        merge(find([two[0], three[1], three[2]]))
    edited = suite_of([*TABLES[:2], {**TABLES[2], "seeds": [1, 2, 4]}], "fake")
    part = edited.sharded(Shard(2, 2))
    out = tmp_path / "c"
    out.mkdir()
    write_outputs(out, out / "junit.xml", part, [], 0.0)
    with pytest.raises(UsageError, match="merge the shards of one suite file"):
        merge(find([two[0], out]))
    with pytest.raises(UsageError, match="holds no suite results"):
        find([tmp_path / "a" / "machine-1" / "results" / "t"])


def test_an_empty_shard_writes_empty_results_and_merges(tmp_path: Path) -> None:
    f = tmp_path / "one.toml"
    f.write_text('[[run]]\nlock = "redis-setnx"\nnemesis = "none"\nseed = 1\n'
                 'expect = "valid"\n')
    store = tmp_path / "results"
    proc = harness("suite", str(f), "--shard", "2/2", "--store", str(store))
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "0 of 1 run(s)" in proc.stdout and "0 of 0 as expected" in proc.stdout
    [d] = store.glob("_suites/one/*-shard-2-of-2")
    assert cases(d / "junit.xml") == []
    with pytest.raises(HarnessError, match=r"#1 \(shard 1/2 not given\)"):
        merge(find([d]))


# the acceptance test: real runs ---------------------------------------------------------------
SIX = """
name = "six"
[defaults]
time-limit = 3
nemesis = "none"

[[run]]
lock = ["redis-setnx", "redis-del"]
seeds = [1, 2]
expect = "valid"

[[run]]
lock = "redis-get-del"
seed = 1
expect = "valid"

# without faults every lock is safe: this expectation is wrong on purpose, so that a failing
# case has to come through the merge too
[[run]]
lock = "redis-fenced"
seed = 1
expect = "invalid"
"""


@pytest.mark.servers
@pytest.mark.slow
@pytest.mark.skipif(shutil.which("redis-server") is None,
                    reason="redis-server missing: run `bash setup.sh`")
def test_six_runs_split_in_two_merge_into_the_unsharded_cases(tmp_path: Path) -> None:
    """12 real runs of 3 s on Redis: the suite whole, then as shards 1/2 and 2/2 on two
    "machines" (stores of their own), merged from their directories."""
    f = tmp_path / "six.toml"
    f.write_text(SIX)
    whole = harness("suite", str(f), "--store", str(tmp_path / "whole"), timeout=600)
    assert whole.returncode == 1, whole.stdout + whole.stderr  # #6 differs, on purpose
    assert "[6/6]" in whole.stdout and "5 of 6 as expected, 1 differ" in whole.stdout
    ran = []
    for i in (1, 2):
        p = harness("suite", str(f), "--shard", f"{i}/2", "--store",
                    str(tmp_path / f"machine-{i}"), timeout=600)
        assert "3 skipped here" in p.stdout, p.stdout
        mine = _entry_numbers(p.stdout)
        assert p.returncode == (1 if 6 in mine else 0), p.stdout + p.stderr  # #6 differs
        ran += mine
    assert sorted(ran) == [1, 2, 3, 4, 5, 6], ran  # each case once
    merged = harness("suite", "merge", str(tmp_path / "machine-1"), str(tmp_path / "machine-2"),
                     "--store", str(tmp_path / "merged"))
    assert merged.returncode == 1, merged.stdout + merged.stderr
    assert "5 of 6 as expected, 1 differ" in merged.stdout
    [ref] = (tmp_path / "whole").glob("_suites/six/*/junit.xml")
    [got] = (tmp_path / "merged").glob("_suites/six/*-merged/junit.xml")
    assert cases(got) == cases(ref)
    assert [kind for _, _, kind, _ in cases(got)] == ["passed"] * 5 + ["failure"]
    [index] = (tmp_path / "merged").glob("_suites/six/*-merged/index.html")
    for href in re.findall(r'href="([^"]+/report.html)"', index.read_text()):
        assert (index.parent / href).is_file(), href
    assert index.read_text().count("report</a>") == 6


def _entry_numbers(stdout: str) -> list[int]:
    """The entry numbers a shard printed: ``[1/3] #4 redis ...``."""
    return [int(m) for m in re.findall(r"^\[\s*\d+/\d+\] #(\d+) ", stdout, re.M)]
