"""``harness suite``: parsing and validation (pure), JUnit XML and index.html, the shipped
nightly suite (every lock, within 33 minutes), and a real 4-entry suite on Redis: exit 0 when
every verdict is as expected (two runs at once), 1 when one expectation is flipped (one at a
time)."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

from harness.controller.registry import BUILTINS
from harness.controller.store import RunDir
from harness.core.errors import UsageError
from harness.presentation import suite as suite_mod
from harness.presentation.suite import Entry, Outcome, judge, parse
from harness.presentation.suite_output import write_outputs
from tests.harness_runs import bounded

ROOT = Path(__file__).parent.parent
NIGHTLY = ROOT / "suites" / "nightly.toml"

FOUR = """
name = "four"
[defaults]
time-limit = {t}
seed = 1

[[run]]
lock = "redis-setnx"
nemesis = "none"
time-limit = 6
expect = "valid"

[[run]]
lock = "redis-fenced"
workload = "fenced"
nemesis = "pause"
expect = "{fenced}"

[[run]]
lock = ["redis-setnx", "redis-del"]
nemesis = "pause"
expect = "invalid"
"""


def harness(*args: str, timeout: float = 600) -> subprocess.CompletedProcess[str]:
    return bounded([sys.executable, "-m", "harness.cli", *args], timeout=timeout, cwd=ROOT)


# parsing ------------------------------------------------------------------------------------
def test_matrix_defaults_and_seeds() -> None:
    s = parse({"name": "m", "defaults": {"time-limit": 7, "clients": 3}, "run": [
        {"lock": ["redis-setnx", "redis-del"], "nemesis": ["pause", "none"],
         "seeds": [1, 2], "expect": "invalid"},
        {"lock": "redis-fenced", "workload": "fenced", "nemesis": "pause,kill",
         "expect": "valid", "time_limit": 9},
    ]}, Path("m.toml"))
    assert len(s.entries) == 2 * 2 * 2 + 1
    first = s.entries[0]
    assert first.options == {"time-limit": 7, "clients": 3, "lock": "redis-setnx",
                             "nemesis": "pause", "seed": 1}
    assert first.expect == "invalid" and first.number == 1
    assert [e.options["seed"] for e in s.entries[:2]] == [1, 2]
    last = s.entries[-1]
    assert last.options["nemesis"] == "pause,kill" and "seed" not in last.options
    assert last.time_limit == 9
    assert last.command() == ("harness run --lock redis-fenced --workload fenced --nemesis "
                              "pause,kill --clients 3 --time-limit 9")
    assert s.estimate() == pytest.approx(8 * (7 + suite_mod.OVERHEAD_S) + 9 + suite_mod.OVERHEAD_S)


@pytest.mark.parametrize("run, message", [
    ({"lock": "redis-setnx"}, "expect must be"),
    ({"lock": "redis-setnx", "expect": "maybe"}, "expect must be"),
    ({"lock": "no-such-lock", "expect": "valid"}, "unknown lock 'no-such-lock'"),
    ({"lokc": "redis-setnx", "expect": "valid"}, "unknown key 'lokc'"),
    ({"nemesis": "gremlins", "expect": "valid"}, "gremlins"),
    ({"time-limit": -1, "expect": "valid"}, "--time-limit"),
    ({"seed": 1, "seeds": [2], "expect": "valid"}, "seed or seeds"),
    ({"lock": "redis-setnx", "workload": "fenced", "expect": "valid"}, "fencing tokens"),
])
def test_bad_entries_fail_before_anything_runs(run: dict[str, object], message: str) -> None:
    with pytest.raises(UsageError, match=message) as info:
        parse({"run": [{"lock": "redis-setnx", "expect": "valid"}, run]}, Path("bad.toml"))
    assert "[[run]] #2" in str(info.value)


def test_bad_files_are_usage_errors(tmp_path: Path) -> None:
    bad = tmp_path / "bad.toml"
    bad.write_text("[[run]]\nlock = \n")
    proc = harness("suite", str(bad), "--store", str(tmp_path / "store"))
    assert proc.returncode == 64 and "not valid TOML" in proc.stderr
    empty = tmp_path / "empty.toml"
    empty.write_text('name = "x"\n')
    proc = harness("suite", str(empty))
    assert proc.returncode == 64 and "no [[run]] tables" in proc.stderr
    assert not (tmp_path / "store").exists()


def test_a_crash_is_never_a_found_bug(tmp_path: Path) -> None:
    """A Python traceback exits 1 like an invalid verdict: only results.json says invalid."""
    assert judge(1, None) == ("error", "")
    run = RunDir(tmp_path / "run")
    run.path.mkdir()
    assert judge(1, run)[0] == "error"
    run.results.write_text(json.dumps({"valid": True, "checks": {}}))
    assert judge(1, run)[0] == "error"
    assert judge(0, run) == ("valid", "")
    run.results.write_text(json.dumps({"valid": False, "checks": {"mutex": {
        "valid": False, "lock-overlaps": [{"explanation": "two holders"}]}}}))
    assert judge(1, run) == ("invalid", "two holders")
    run.results.write_text(json.dumps({"valid": "unknown", "checks": {}, "could-not-test":
                                       "client(s) 2 never had an answer\nmore"}))
    assert judge(3, run) == ("error", "could not test: client(s) 2 never had an answer")
    assert judge(1, run)[0] == "error" and "does not match" in judge(1, run)[1]


def test_junit_and_index(tmp_path: Path) -> None:
    s = parse({"name": "j", "run": [
        {"lock": "redis-setnx", "nemesis": "none", "seed": 1, "expect": "valid"},
        {"lock": "redis-del", "nemesis": "pause", "seed": 1, "expect": "invalid"},
        {"lock": "redis-setnx", "nemesis": "pause", "seed": 2, "expect": "invalid"},
    ]}, Path("j.toml"))
    run_dir = tmp_path / "store" / "t" / "r"
    run_dir.mkdir(parents=True)
    (run_dir / "report.html").write_text("<html></html>")
    outcomes = [
        Outcome(s.entries[0], "valid", 0, 7.5, RunDir(run_dir), "VALID\n"),
        Outcome(s.entries[1], "valid", 0, 8.0, RunDir(run_dir), "VALID\n"),
        Outcome(s.entries[2], "error", 3, 1.0, None, "harness: boom\n", "harness: boom"),
    ]
    out = tmp_path / "store" / "_suites" / "j" / "1"
    out.mkdir(parents=True)
    write_outputs(out, tmp_path / "junit.xml", s, outcomes, 0.0)
    root = ET.parse(tmp_path / "junit.xml").getroot()
    ts = root.find("testsuite")
    assert ts is not None
    assert (ts.get("tests"), ts.get("failures"), ts.get("errors")) == ("3", "1", "1")
    cases = ts.findall("testcase")
    assert cases[0].get("classname") == "lock-harness.redis.redis-setnx"
    assert cases[0].find("failure") is None and cases[0].find("error") is None
    failure = cases[1].find("failure")
    assert failure is not None and "expected invalid, got valid" in failure.get("message", "")
    assert str(run_dir / "report.html") in failure.get("message", "")
    error = cases[2].find("error")
    assert error is not None and "harness: boom" in error.get("message", "")
    assert (out / "junit.xml").read_bytes() == (tmp_path / "junit.xml").read_bytes()
    index = (out / "index.html").read_text()
    assert "1 of 3 as expected" in index and 'href="../../../t/r/report.html"' in index
    assert json.loads((out / "summary.json").read_text())["differ"] == 2


# the nightly suite --------------------------------------------------------------------------
def test_nightly_covers_every_lock_within_33_minutes() -> None:
    s = suite_mod.load(NIGHTLY)
    locks = {e.options.get("lock", "redis-setnx") for e in s.entries}
    # the zoo's libraries are an optional extra, run by harness zoo (tests/test_zoo.py)
    LOCKS = [n for n, t in BUILTINS["locks"].items() if not t.startswith("workloads.zoo.")]
    assert set(LOCKS) <= locks, f"not in the nightly suite: {sorted(set(LOCKS) - locks)}"
    # 30, 1 of clock rows (#26), 0.75 of the DynamoDB locks (#32), 0.5 of the Spanner ones (#44),
    # 0.75 of the etcd and ZooKeeper membership rows (#45)
    assert s.estimate() <= 33.25 * 60, f"{s.estimate() / 60:.1f} min"
    assert {e.expect for e in s.entries} == {"valid", "invalid"}
    for lock in LOCKS:  # every lock has its no-fault baseline
        assert any(e.options.get("lock") == lock and e.options.get("nemesis") == "none"
                   and e.expect == "valid" for e in s.entries), lock
    proc = harness("suite", str(NIGHTLY), "--dry-run", timeout=60)
    assert proc.returncode == 0, proc.stderr
    assert f"{len(s.entries)} run(s)" in proc.stdout


# a real suite -------------------------------------------------------------------------------
@pytest.mark.servers
@pytest.mark.skipif(shutil.which("redis-server") is None,
                    reason="redis-server missing: run `bash setup.sh`")
def test_four_entry_suite_on_redis(tmp_path: Path) -> None:
    store = tmp_path / "results"
    good = tmp_path / "four.toml"
    good.write_text(FOUR.format(t=8, fenced="valid"))
    proc = harness("suite", str(good), "--store", str(store), "--junit",
                   str(tmp_path / "junit.xml"), "--jobs", "2")  # two at once (issue 30)
    out = proc.stdout + proc.stderr
    assert proc.returncode == 0, out
    assert "[1/4]" in out and "[4/4]" in out and "4 of 4 as expected" in out
    assert "4 local run(s), 2 at a time" in out
    ts = ET.parse(tmp_path / "junit.xml").getroot().find("testsuite")
    assert ts is not None and ts.get("tests") == "4"
    assert ts.get("failures") == "0" and ts.get("errors") == "0"
    cases = ts.findall("testcase")
    assert [c.get("classname") for c in cases] == [
        "lock-harness.redis.redis-setnx", "lock-harness.redis.redis-fenced",
        "lock-harness.redis.redis-setnx", "lock-harness.redis.redis-del"]
    reports = [p.get("value") for c in cases for p in c.iter("property")
               if p.get("name") == "report"]
    assert len(reports) == 4 and all(Path(r).is_file() for r in reports)  # type: ignore[arg-type]
    [index] = store.glob("_suites/four/*/index.html")
    assert index.read_text().count("report</a>") == 4

    flipped = tmp_path / "flipped.toml"
    flipped.write_text(FOUR.format(t=8, fenced="invalid"))
    proc = harness("suite", str(flipped), "--store", str(store), "--junit",
                   str(tmp_path / "flipped.xml"), "--jobs", "1")
    out = proc.stdout + proc.stderr
    assert proc.returncode == 1, out
    assert "3 of 4 as expected, 1 differ" in out
    ts = ET.parse(tmp_path / "flipped.xml").getroot().find("testsuite")
    assert ts is not None and ts.get("failures") == "1" and ts.get("errors") == "0"
    [failure] = [f for c in ts.findall("testcase") for f in c.findall("failure")]
    assert "expected invalid, got valid; report: " in failure.get("message", "")
    assert failure.get("message", "").endswith("/report.html")


def test_every_long_option_of_harness_run() -> None:
    s = parse({"run": [{"db": "redis", "lock": "redis-fenced", "workload": "fenced",
                        "nemesis": "kill-majority", "backend": "local", "nodes": 1, "clients": 3,
                        "time-limit": 6, "ttl": 1.5, "persistence": "appendonly",
                        "nemesis-opt": {"kill-delay": 3}, "seed": 4, "expect": "valid"}]},
              Path("all.toml"))
    assert s.entries[0].run_args() == [
        "--db", "redis", "--lock", "redis-fenced", "--workload", "fenced", "--nemesis",
        "kill-majority",
        "--backend", "local", "--nodes", "1", "--clients", "3", "--time-limit", "6", "--seed",
        "4", "--ttl", "1.5", "--persistence", "appendonly", "--nemesis-opt", "kill-delay=3"]


def test_an_entry_is_the_spec_harness_run_would_make() -> None:
    e = Entry(1, {"lock": "redis-del", "nemesis": "pause", "seed": 3}, "invalid", 1)
    spec = e.spec(Path("/tmp/s"))
    assert (spec.lock, spec.nemesis, spec.seed, spec.store) == ("redis-del", ["pause"], 3,
                                                                "/tmp/s")
    assert e.command() == "harness run --lock redis-del --nemesis pause --seed 3"
