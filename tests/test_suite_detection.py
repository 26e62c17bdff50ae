"""``harness suite FILE --seeds LIST``: the seeds' grammar, every row under each seed, the Wilson
interval, the detection table (console, JUnit, index, summary.json) from synthetic outcomes, the
literature suite, and a real 2-row suite over seeds 1-2 on Redis."""

from __future__ import annotations

import json
import shutil
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from harness.controller.store import RunDir
from harness.core.errors import UsageError
from harness.presentation import suite as suite_mod
from harness.presentation.suite import Outcome, parse, parse_seeds, unshown, violation_at
from harness.presentation.suite_detection import rows, table, wilson
from harness.presentation.suite_output import tally, write_outputs
from tests.test_suite import harness

LITERATURE = Path(__file__).parent.parent / "suites" / "literature.toml"


@pytest.mark.parametrize("text, seeds", [
    ("1-20", list(range(1, 21))), ("3", [3]), ("1,4,7-9", [1, 4, 7, 8, 9]),
    (" 2 - 4 , 1", [2, 3, 4, 1]), ("5,5,4-6", [5, 4, 6]), ("0", [0]),
])
def test_seed_lists(text: str, seeds: list[int]) -> None:
    assert parse_seeds(text) == seeds


@pytest.mark.parametrize("text, message", [
    ("", "expected seeds"), ("x", "expected seeds"), ("1,,2", "expected seeds"),
    ("-3", "expected seeds"), ("1-", "expected seeds"), ("1.5", "expected seeds"),
    ("9-3", "runs backwards"), ("1-99999", "more than"), ("1-1500,2000-2600", "more than"),
])
def test_bad_seed_lists_are_usage_errors(text: str, message: str) -> None:
    with pytest.raises(UsageError, match=message):
        parse_seeds(text)


def test_bad_seeds_exit_64_before_anything_runs(tmp_path: Path) -> None:
    proc = harness("suite", str(LITERATURE), "--seeds", "20-1", "--store", str(tmp_path / "s"))
    assert proc.returncode == 64, proc.stderr
    assert proc.stderr.strip() == "harness: --seeds '20-1': the range 20-1 runs backwards"
    proc = harness("suite", "merge", str(tmp_path), "--seeds", "1-2")
    assert proc.returncode == 64 and "not --shard, --seeds" in proc.stderr
    assert not (tmp_path / "s").exists()


def test_every_row_runs_under_each_seed() -> None:
    s = parse({"run": [
        {"lock": "redis-setnx", "nemesis": "pause", "seeds": [1, 2, 3], "expect": "invalid",
         "reason": "a lease"},
        {"lock": ["redis-setnx", "redis-del"], "nemesis": "none", "expect": "valid"},
    ]}, Path("m.toml")).reseeded([7, 8])
    assert [(e.number, e.options.get("lock"), e.options["nemesis"], e.options["seed"])
            for e in s.entries] == [
        (1, "redis-setnx", "pause", 7), (2, "redis-setnx", "pause", 8),
        (3, "redis-setnx", "none", 7), (4, "redis-setnx", "none", 8),
        (5, "redis-del", "none", 7), (6, "redis-del", "none", 8)]
    assert [e.reason for e in s.entries[:3]] == ["a lease", "a lease", ""]
    assert len({e.row() for e in s.entries}) == 3
    with pytest.raises(UsageError, match="reason must be"):
        parse({"run": [{"nemesis": "none", "expect": "valid", "reason": 3}]}, Path("r.toml"))
    with pytest.raises(UsageError, match="more than"):
        s.reseeded(list(range(suite_mod.MAX_RUNS)))


@pytest.mark.parametrize("k, n, lo, hi", [
    (20, 20, 0.8389, 1.0), (19, 20, 0.7639, 0.9911), (10, 20, 0.2993, 0.7007),
    (0, 5, 0.0, 0.4345), (0, 0, 0.0, 1.0),
])
def test_wilson_score_interval(k: int, n: int, lo: float, hi: float) -> None:
    assert wilson(k, n) == pytest.approx((lo, hi), abs=1e-4)


@given(st.integers(0, 500).flatmap(lambda n: st.tuples(st.integers(0, n), st.just(n))))
def test_wilson_holds_the_rate_inside_zero_one(kn: tuple[int, int]) -> None:
    k, n = kn
    lo, hi = wilson(k, n)
    assert 0.0 <= lo <= hi <= 1.0
    if n:
        assert lo <= k / n <= hi and hi - lo > 0
        assert wilson(k, n, z=1.0)[1] - wilson(k, n, z=1.0)[0] < hi - lo


def test_a_rate_out_of_range_is_refused() -> None:
    with pytest.raises(ValueError):
        wilson(3, 2)


def test_a_row_must_show_what_it_is_for() -> None:
    """``shows``: a fencing row VALID without a stale write rejected proved nothing."""
    s = parse({"run": [{"lock": "redis-fenced", "workload": "fenced", "nemesis": "pause",
                        "shows": ["fencing.stale-rejected"], "expect": "valid"}]},
              Path("f.toml")).reseeded([1, 2])
    e = s.entries[0]
    assert e.options["shows"] == ["fencing.stale-rejected"] and "shows" not in e.command()
    assert e.spec(Path("/tmp/s")).lock == "redis-fenced"
    assert e.row() == s.entries[1].row() and e.row() != parse({"run": [{
        "lock": "redis-fenced", "workload": "fenced", "nemesis": "pause", "expect": "valid"}]},
        Path("g.toml")).entries[0].row()
    figures = ["fencing.stale-rejected", "mutex.lock-overlap-count"]
    shown = {"checks": {"fencing": {"stale-rejected": 2}, "mutex": {"lock-overlap-count": 1}}}
    assert unshown(figures, shown) == ""
    shown["checks"]["fencing"]["stale-rejected"] = 0
    assert unshown(figures, shown) == ("fencing.stale-rejected = 0: the run never showed what "
                                       "the row is for")
    assert unshown(["linearizable.ops"], shown).startswith("linearizable.ops = None")
    for bad in ("fencing", ["fencing"], ["Fencing.x"], [3]):
        with pytest.raises(UsageError, match="shows must be"):
            parse({"run": [{"nemesis": "none", "shows": bad, "expect": "valid"}]},
                  Path("b.toml"))


def test_the_time_of_the_first_violation() -> None:
    assert violation_at({"checks": {
        "mutex": {"valid": False, "first-violation-at": 4.5},
        "other": {"valid": False, "first-violation-at": 2.5},
        "fine": {"valid": True, "first-violation-at": 1.0}}}) == 2.5
    assert violation_at({"checks": {"fencing": {"valid": False}}}) is None
    assert violation_at({}) is None


def test_detection_table_junit_index_and_summary(tmp_path: Path) -> None:
    s = parse({"name": "d", "run": [
        {"lock": "redis-setnx", "nemesis": "pause", "expect": "invalid", "reason": "lease"},
        {"lock": "redis-fenced", "workload": "fenced", "nemesis": "kill", "expect": "invalid"},
        {"lock": "redis-setnx", "nemesis": "none", "expect": "valid", "reason": "baseline"},
    ]}, Path("d.toml")).reseeded([1, 2, 3])
    run_dir = RunDir(tmp_path / "store" / "t" / "r")
    e = s.entries
    outcomes = [
        Outcome(e[0], "invalid", 1, 9.0, run_dir, "", "two holders", violation_at=2.0),
        Outcome(e[1], "valid", 0, 9.0, run_dir, ""),
        Outcome(e[2], "invalid", 1, 9.0, run_dir, "two holders", violation_at=5.0),
        Outcome(e[3], "invalid", 1, 9.0, run_dir, "", "token 3 twice"),
        Outcome(e[4], "unknown", 2, 9.0, run_dir, "", "undecided: faults"),
        Outcome(e[5], "skipped", None, 0.0, None, ""),
        Outcome(e[6], "valid", 0, 9.0, run_dir, ""),
        Outcome(e[7], "error", 3, 1.0, None, "", "harness: boom"),
        Outcome(e[8], "valid", 0, 9.0, run_dir, ""),
    ]
    found = rows(outcomes)
    assert [(r.k, r.n, r.median_at, r.first_violation()) for r in found] == [
        (2, 3, 3.5, "3.5 s (2 of 2)"), (1, 2, None, "untimed"), (2, 3, None, "-")]
    assert found[0].wrong == [(2, "VALID: no check found a violation")]
    assert found[1].wrong == [(2, "UNKNOWN: undecided: faults")]
    assert found[2].wrong == [(2, "ERROR: harness: boom")]
    assert found[0].rate() == "2/3 [0.21, 0.94]"
    text = "\n".join(table(found))
    assert "| 1 | redis redis-setnx mutex pause | invalid | 2/3 [0.21, 0.94] | 3.5 s (2 of 2) " \
           "| lease |" in text
    assert "- #3 redis redis-setnx mutex none, seed 2: ERROR: harness: boom" in text

    out = tmp_path / "store" / "_suites" / "d" / "1"
    out.mkdir(parents=True)
    write_outputs(out, out / "junit.xml", s, outcomes, 0.0)
    ts = ET.parse(out / "junit.xml").getroot().find("testsuite")
    assert ts is not None
    said = {p.get("name"): p.get("value") for p in ts.find("properties").iter("property")}
    assert said["detection #1 redis redis-setnx mutex pause expect invalid"] == found[0].line()
    assert found[0].line() == ("right in 2/3 [0.21, 0.94] (95% Wilson), first violation median "
                               "3.5 s (2 of 2); wrong: seed 2: VALID: no check found a violation")
    case = ts.findall("testcase")[4]
    assert {p.get("name"): p.get("value") for p in case.iter("property")}["detection"] \
        == found[1].line()
    summary = json.loads((out / "summary.json").read_text())
    assert [(d["right"], d["runs"], d["median-first-violation-s"]) for d in
            summary["detection"]] == [(2, 3, 3.5), (1, 2, None), (2, 3, None)]
    assert summary["runs"][0]["violation_at"] == 2.0 and summary["runs"][0]["reason"] == "lease"
    index = (out / "index.html").read_text()
    assert "<td>2/3 [0.21, 0.94]</td><td>3.5 s (2 of 2)</td>" in index
    assert "seed 2: UNKNOWN: undecided: faults" in index


def test_the_literature_suite_gives_every_row_a_reason() -> None:
    s = suite_mod.load(LITERATURE)
    assert all(e.reason for e in s.entries)
    assert {e.expect for e in s.entries} == {"valid", "invalid"}
    names = {f"{e.options.get('db', 'redis')} {suite_mod.lock_of(e.options)}"
             for e in s.entries}
    for lock in ("redlock", "node-redlock", "curator", "go-etcd-mutex", "pg-advisory",
                 "dynamodb-lease", "zookeeper-listener", "etcd"):
        assert any(name.endswith(f" {lock}") for name in names), lock
    assert any("sentinel" in name for name in names)


@pytest.mark.servers
@pytest.mark.skipif(shutil.which("redis-server") is None,
                    reason="redis-server missing: run `bash setup.sh`")
def test_three_rows_over_two_seeds_on_redis(tmp_path: Path) -> None:
    """The third row is a fencing row with no fault: VALID, but with no stale write to reject
    it proved nothing, and ``shows`` counts it as unknown."""
    rows_toml = tmp_path / "three.toml"
    rows_toml.write_text(
        'name = "three"\n[defaults]\ntime-limit = 6\nseed = 9\n'
        '[[run]]\nnemesis = "none"\nexpect = "valid"\nreason = "no fault"\n'
        '[[run]]\nnemesis = "pause"\nexpect = "invalid"\nreason = "a lease"\n'
        '[[run]]\nlock = "redis-fenced"\nworkload = "fenced"\nnemesis = "none"\n'
        'shows = ["fencing.stale-rejected"]\nexpect = "valid"\n')
    store = tmp_path / "results"
    proc = harness("suite", str(rows_toml), "--seeds", "1-2", "--store", str(store),
                   "--jobs", "2")
    out = proc.stdout + proc.stderr
    assert proc.returncode == 1, out
    assert "6 local run(s), 2 at a time" in out
    assert "| 1 | redis redis-setnx mutex none | valid | 2/2 [0.34, 1.00] | - | no fault |" in out
    [summary] = store.glob("_suites/three/*/summary.json")
    data = json.loads(summary.read_text())
    assert sorted(r["options"]["seed"] for r in data["runs"]) == [1, 1, 1, 2, 2, 2]
    paused = data["detection"][1]
    assert (paused["right"], paused["runs"], paused["wrong"]) == (2, 2, [])
    assert paused["timed"] == 2 and 0 < paused["median-first-violation-s"] < 6
    assert f"| 2 | redis redis-setnx mutex pause | invalid | 2/2 [0.34, 1.00] | " \
           f"{paused['median-first-violation-s']:.1f} s (2 of 2) | a lease |" in out
    fenced = data["detection"][2]
    assert (fenced["right"], fenced["runs"]) == (0, 2)
    assert [w["why"] for w in fenced["wrong"]] == [
        "UNKNOWN: VALID, but fencing.stale-rejected = 0: the run never showed what the row is "
        "for"] * 2


def test_an_interrupted_suite_names_what_did_not_run() -> None:
    """An interrupted suite's tally counts what ran to a verdict; the run cut short and the
    entries never started are named as such, not as differing; a row none of whose seeds ran
    has no rate (a vacuous [0.00, 1.00] read as one)."""
    s = parse({"name": "d", "run": [
        {"lock": "redis-setnx", "nemesis": "pause", "expect": "invalid"},
        {"lock": "redis-setnx", "nemesis": "none", "expect": "valid"},
    ]}, Path("d.toml")).reseeded([1, 2])
    e = s.entries
    outcomes = [Outcome(e[0], "invalid", 1, 9.0, None, ""), Outcome(e[1], "valid", 0, 9.0,
                None, ""), Outcome(e[2], "interrupted", 3, 2.0, None, ""),
                Outcome(e[3], "skipped", None, 0.0, None, "")]
    assert tally(outcomes) == "1 of 2 as expected, 1 differ, 1 interrupted, 1 not run"
    assert tally(outcomes[:2]) == "1 of 2 as expected, 1 differ"
    assert tally(outcomes[:1]) == "1 of 1 as expected"
    found = rows(outcomes)
    assert found[0].rate() == "1/2 [0.09, 0.91]"
    assert found[1].rate() == "not run (2 seed(s) interrupted or skipped)"
    assert "| 2 | redis redis-setnx mutex none | valid | not run" in "\n".join(table(found))
