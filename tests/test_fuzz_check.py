"""Fuzzing ``harness check`` (bounded in examples and time) with damage whose outcome the
generator knows (tests/malformed.py, which reads nothing through the harness's readers): a
malformed history file or run directory is exit 3 with one line that names the file (and the
damaged line where the damage alone decides it); never a verdict, never a traceback."""

from __future__ import annotations

import contextlib
import io
import json
import random
import re
import shutil
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from harness import cli
from tests.malformed import BASES, FORMATS, MALFORMED, RUN, SYNTACTIC, base_ops, damage, syntactic

SETTINGS = settings(max_examples=60, deadline=None,
                    suppress_health_check=[HealthCheck.function_scoped_fixture,
                                           HealthCheck.too_slow])


@pytest.fixture(autouse=True)
def no_rlimit(monkeypatch: pytest.MonkeyPatch) -> None:
    """``harness check`` caps its own address space; in-process, that would cap pytest's."""
    monkeypatch.setattr("harness.core.budget.limit_memory", lambda max_memory: None)


def run_check(path: Path) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = cli.main(["check", str(path), "--time-limit", "10"])
    return code, out.getvalue(), err.getvalue()


def assert_refused(path: Path, line: int | None, names: Path | None = None, code: int = 3
                   ) -> None:
    got, out, err = run_check(path)
    assert got == code, (path.name, got, out[:300], err)
    assert "Traceback" not in out + err
    assert err.count("\n") == 1 and err.startswith(f"harness: {names or path}"), err
    if line is not None:
        assert re.search(rf" line {line}(?: column \d+)?: ", err), (line, err)


PLACES = [(kind, fmt) for kind, fmts in MALFORMED.items() for fmt in fmts]


@SETTINGS
@given(place=st.sampled_from(PLACES), base=st.sampled_from(sorted(BASES)),
       seed=st.integers(0, 2**32 - 1))
def test_semantic_damage_anywhere_is_exit_3(tmp_path_factory: pytest.TempPathFactory,
                                            place: tuple[str, str], base: str,
                                            seed: int) -> None:
    kind, fmt = place
    lines, line = damage(kind, fmt, base_ops(base), random.Random(seed))
    path = tmp_path_factory.mktemp("s") / f"history{FORMATS[fmt]}"
    path.write_bytes(("\n".join(lines) + "\n").encode("utf-8", "surrogatepass"))
    assert_refused(path, line)


@SETTINGS
@given(kind=st.sampled_from(SYNTACTIC), fmt=st.sampled_from(sorted(FORMATS)),
       base=st.sampled_from(sorted(BASES)), seed=st.integers(0, 2**32 - 1))
def test_syntax_damage_anywhere_is_exit_3(tmp_path_factory: pytest.TempPathFactory, kind: str,
                                          fmt: str, base: str, seed: int) -> None:
    data, line = syntactic(kind, fmt, base, random.Random(seed))
    path = tmp_path_factory.mktemp("y") / f"history{FORMATS[fmt]}"
    path.write_bytes(data)
    assert_refused(path, line)


def _spec(run: Path, value: object) -> None:
    test = json.loads((run / "test.json").read_text())
    test["spec"] = value
    (run / "test.json").write_text(json.dumps(test))


RUN_DAMAGE = {  # what was damaged: (the damage, the exit code it must give)
    "test.json not JSON": (lambda run, rng: (run / "test.json").write_text(
        rng.choice(["", "{", "[]", "null", "[" * 1200 + "]" * 1200])), 3),
    "spec not an object": (lambda run, rng: _spec(run, rng.choice([[], "spec", None, 5])), 3),
    "no history": (lambda run, rng: (run / "history.jsonl").unlink(), 3),
    "no test.json: not a run directory": (lambda run, rng: (run / "test.json").unlink(), 64),
}


@SETTINGS
@given(what=st.sampled_from(sorted(RUN_DAMAGE)), seed=st.integers(0, 2**32 - 1))
def test_damaged_run_directories_are_one_line_never_a_verdict(
        tmp_path_factory: pytest.TempPathFactory, what: str, seed: int) -> None:
    dest = tmp_path_factory.mktemp("r") / "run"
    shutil.copytree(RUN, dest)
    try:
        change, want = RUN_DAMAGE[what]
        change(dest, random.Random(seed))
        assert_refused(dest, None, names=dest, code=want)
    finally:
        shutil.rmtree(dest, ignore_errors=True)


@SETTINGS
@given(place=st.sampled_from([p for p in PLACES if p[1] == "jsonl"]),
       seed=st.integers(0, 2**32 - 1))
def test_a_run_directory_with_a_malformed_history_is_exit_3(
        tmp_path_factory: pytest.TempPathFactory, place: tuple[str, str], seed: int) -> None:
    dest = tmp_path_factory.mktemp("h") / "run"
    shutil.copytree(RUN, dest)
    try:
        lines, line = damage(place[0], "jsonl", base_ops("invalid"), random.Random(seed))
        (dest / "history.jsonl").write_bytes(("\n".join(lines) + "\n").encode())
        assert_refused(dest, line, names=dest / "history.jsonl")
        assert json.loads((dest / "results.json").read_text())["valid"] is False  # untouched
    finally:
        shutil.rmtree(dest, ignore_errors=True)
