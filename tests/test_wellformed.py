"""The well-formedness stage (issue 24, case 6): damaged copies of real runs' histories, each
made knowing its damage (tests/malformed.py), are exit 3 with one line naming the file, the
line and the rule, never a verdict; benign changes keep the verdict exactly; and the rules one
by one on small histories."""

from __future__ import annotations

import collections
import json
import os
import re
import sys
from pathlib import Path

import pytest

from harness.core.history import HistoryError
from harness.core.history_file import read_history
from harness.core.journal import JournalWriter, merge_journals
from harness.core.wellformed import problem
from tests.harness_runs import bounded
from tests.malformed import (
    BASES,
    FORMATS,
    MALFORMED,
    Case,
    base_ops,
    base_verdict,
    render,
    semantic_cases,
)
from tests.test_fuzz_check import no_rlimit  # noqa: F401  (autouse: in-process checks)
from tests.test_fuzz_check import run_check as check

CASES = semantic_cases()


def write(tmp: Path, case: Case) -> Path:
    path = tmp / f"{case.name}{case.suffix}"
    path.write_bytes(case.data)
    return path


def test_the_generator_covers_every_kind_in_every_format_a_thousand_times() -> None:
    bad = [c for c in CASES if c.malformed]
    assert len(bad) >= 1000
    made = collections.Counter((c.kind, c.fmt) for c in bad)
    assert {(k, f) for k, fmts in MALFORMED.items() for f in fmts} == set(made)
    assert {c.base for c in bad} == set(BASES) and {c.fmt for c in bad} == set(FORMATS)


def test_the_bases_are_well_formed_and_keep_their_real_verdicts(tmp_path: Path) -> None:
    for base in BASES:
        ops = base_ops(base)
        assert problem(ops) is None
        for fmt, suffix in FORMATS.items():
            path = tmp_path / f"{base}{suffix}"
            path.write_text("\n".join(render(op, fmt) for op in ops) + "\n")
            code, out, err = check(path)
            assert (code, err) == (0 if base_verdict(base) else 1, ""), (path, out)


def test_every_malformed_history_is_exit_3_in_one_line_naming_file_line_and_rule(
        tmp_path: Path) -> None:
    wrong = []
    for case in CASES:
        if not case.malformed:
            continue
        path = write(tmp_path, case)
        code, out, err = check(path)
        said = err.rstrip("\n")
        if (code != 3 or out or "\n" in said or not said.startswith(f"harness: {path}")
                or (case.line is not None and not re.search(
                    rf" line {case.line}( column \d+)?:", said))):
            wrong.append((case.name, case.fmt, case.line, code, said[:300], out[:100]))
        path.unlink()
    assert not wrong, f"{len(wrong)} wrong, e.g. {wrong[:5]}"


def test_benign_changes_keep_the_verdict_exactly(tmp_path: Path) -> None:
    plain = {}
    for base in BASES:
        for fmt, suffix in FORMATS.items():
            path = tmp_path / f"plain{suffix}"
            path.write_text("\n".join(render(op, fmt) for op in base_ops(base)) + "\n")
            code, out, _ = check(path)
            plain[base, fmt] = code, out.replace(str(path), "FILE")
    for case in CASES:
        if case.malformed:
            continue
        path = write(tmp_path, case)
        code, out, err = check(path)
        assert err == "", (case, err)
        assert (code, out.replace(str(path), "FILE")) == plain[case.base, case.fmt], case
        assert code == (0 if base_verdict(case.base) else 1)


def test_some_through_the_real_harness_command(tmp_path: Path) -> None:
    """One case of each kind, in turn JSONL, EDN and log, through a real process."""
    seen = []
    for n, (kind, fmts) in enumerate(MALFORMED.items()):
        fmt = list(FORMATS)[n % 3] if list(FORMATS)[n % 3] in fmts else fmts[0]
        seen.append(next(c for c in CASES if (c.kind, c.fmt) == (kind, fmt)))
    assert {c.fmt for c in seen} == set(FORMATS)
    for case in seen:
        path = write(tmp_path, case)
        proc = bounded([sys.executable, "-m", "harness.cli", "check", str(path)],
                       timeout=120)
        assert proc.returncode == 3 and proc.stdout == "", (case, proc.stdout, proc.stderr)
        assert proc.stderr.count("\n") == 1 and proc.stderr.startswith(f"harness: {path}")


# The rules one by one -----------------------------------------------------------------------

def op(i: int, process: object, type_: str, f: str = "acquire", **extra: object
       ) -> dict[str, object]:
    return {"index": i, "time": i * 10, "process": process, "type": type_, "f": f,
            "value": None, **extra}


GOOD = [op(0, 0, "invoke"), op(1, 1, "invoke"), op(2, 0, "ok"), op(3, "nemesis", "invoke",
        "pause"), op(4, "nemesis", "invoke", "kill"), op(5, "nemesis", "info", "pause"),
        op(6, "nemesis", "info", "kill"), op(7, "nemesis", "info", "heal"), op(8, 1, "fail"),
        op(9, 0, "invoke", "release"), op(10, 1, "invoke")]


def test_a_crashed_client_and_overlapping_nemesis_lanes_are_well_formed() -> None:
    # process 0's release and process 1's acquire never complete (they crashed); the nemesis's
    # two lanes overlap and a fault that could not start is a lone info
    assert problem(GOOD) is None


@pytest.mark.parametrize(("change", "at", "rule"), [
    (lambda h: h.insert(1, {**op(99, 0, "invoke", "read"), "time": 5}), 1,
     "invoke before the last completed"),
    (lambda h: h.__delitem__(0), 1, "completion without an invoke"),
    (lambda h: h[2].update(f="release"), 2, "completion's f differs"),
    (lambda h: h[2].update(lock="other"), 2, "completion's lock differs"),
    (lambda h: h[2].update(time=-1), 2, "time goes backwards in a process"),
    (lambda h: h[9].update(index=3), 9, "duplicate index"),
    (lambda h: h[0].update(process="nemesis"), 0, "client op from a non-client process"),
    (lambda h: h[3].update(f="read"), 3, "client op from a non-client process"),
])
def test_each_rule(change: object, at: int, rule: str) -> None:
    history = [dict(o) for o in GOOD]
    change(history)  # type: ignore[operator]
    found = problem(history)
    assert found is not None and found[0] == at and found[1].startswith(rule), found


def test_duplicate_json_keys_are_refused_and_colons_in_strings_are_not(tmp_path: Path) -> None:
    path = tmp_path / "h.jsonl"
    first = '{"time":1,"process":0,"type":"invoke","f":"acquire","value":null}\n'
    path.write_text(first + '{"time":2,"process":0,"type":"ok","f":"acquire",'
                    '"error":"a: b: c","value":{"x":"1:2"}}\n')
    assert len(read_history(path)) == 2  # colons inside strings: the careful reading, no error
    for dup in ('"lock":"a","lock":"b"', '"value":{"s":1,"s":2}', '"error":"a:b","f":"acquire"'):
        path.write_text(first + '{"time":2,"process":0,"type":"ok","f":"acquire",' + dup + "}\n")
        with pytest.raises(HistoryError, match=r"h\.jsonl line 2: malformed history: duplicate "
                                               "key"):
            read_history(path)


def test_a_journal_never_writes_a_lone_surrogate(tmp_path: Path) -> None:
    j = JournalWriter(tmp_path / "c0.jsonl", 0, 0)
    j.record("invoke", "acquire")
    j.record("info", "acquire", error="bad \udcff byte", extra=object())
    j.close()
    ops = merge_journals([tmp_path / "c0.jsonl"])
    assert ops[1]["error"] == "bad \\udcff byte" and problem(ops) is None


def test_the_stored_real_runs_are_well_formed() -> None:
    for base in BASES.values():
        ops = read_history(base / "history.jsonl")
        assert problem(ops) is None and len(ops) > 100
        assert os.path.getsize(base / "history.jsonl") < 100_000  # small files only


def test_a_doubled_history_is_exit_3(tmp_path: Path) -> None:
    """The before-stop hook's smoke, in CI: every line twice is never a verdict."""
    lines = (BASES["invalid"] / "history.jsonl").read_text().splitlines()
    path = tmp_path / "doubled.jsonl"
    path.write_text("".join(f"{x}\n{x}\n" for x in lines))
    code, out, err = check(path)
    assert (code, out) == (3, "") and err.startswith(f"harness: {path} line 2: malformed")
    assert json.loads(lines[0])["process"] == 0


def test_an_op_after_its_process_crashed_is_malformed_in_one_line(tmp_path: Path) -> None:
    """A process has one life: nothing of a client after the record of its crash (the
    checkers' model of lives would otherwise meet it as a bug of ours, 'internal error')."""
    crash = {"index": 2, "time": 300, "process": "nemesis", "type": "info",
             "f": "crash-client", "value": "start", "targets": ["c0"],
             "detail": {"crashed": True}}
    lines = [
        {"index": 0, "time": 100, "process": 0, "type": "invoke", "f": "acquire", "value": None},
        {"index": 1, "time": 200, "process": 0, "type": "ok", "f": "acquire", "value": None},
        crash,
        {"index": 3, "time": 400, "process": 1, "type": "invoke", "f": "acquire",
         "value": None},
        {"index": 4, "time": 500, "process": 0, "type": "invoke", "f": "release",
         "value": None},
    ]
    found = problem(lines)
    assert found is not None and found[0] == 4
    assert found[1].startswith("an op after its process crashed: process 0's invoke"), found
    assert problem(lines[:4]) is None  # another process goes on: well-formed
    assert problem([*lines[:2], {**crash, "detail": {"crashed": False}}, *lines[3:]]) is None
    path = tmp_path / "h.jsonl"
    path.write_text("".join(json.dumps(o) + "\n" for o in lines))
    code, out, err = check(path)
    assert (code, out) == (3, "")
    assert err.count("\n") == 1 and "line 5: malformed history: an op after its process" in err


def test_a_merged_history_is_checked_as_time_ordered_and_still_refused_when_malformed(
        tmp_path: Path) -> None:
    """A run's merged history is sorted by time, so its check skips each process's clock; it
    still refuses a completion with no invoke (process 1's release), naming its line."""
    from harness.controller.checking import check_history
    from harness.controller.store import RunDir
    from harness.core.checks import TIME_ORDERED

    journals = tmp_path / "journals"
    journals.mkdir()
    lines = {0: [(10, "invoke", "acquire"), (30, "ok", "acquire")],
             1: [(20, "invoke", "acquire"), (40, "fail", "acquire"), (50, "ok", "release")]}
    for p, ops in lines.items():
        (journals / f"c{p}.jsonl").write_text("".join(
            json.dumps({"time": t, "process": p, "type": k, "f": f, "lock": "l"}) + "\n"
            for t, k, f in ops))
    merged = RunDir(tmp_path).merged()
    assert merged.derived[TIME_ORDERED] is True
    assert [op["time"] for op in merged] == [10, 20, 30, 40, 50]
    with pytest.raises(HistoryError, match=r"^history.jsonl line 5: malformed history: "
                                           r"completion without an invoke: ok 'release'"):
        check_history(merged, {"workload": "mutex"})
