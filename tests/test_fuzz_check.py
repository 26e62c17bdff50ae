"""Fuzzing ``harness check`` (bounded in examples and time): damaged histories and run
directories never produce a traceback, never an error longer than one line, and never exit 1
unless what was checked is a well-formed history with a violation in it."""

from __future__ import annotations

import contextlib
import io
import random
import shutil
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from harness import cli
from harness.controller.store import RunDir
from harness.core.errors import HarnessError
from harness.core.history import HistoryError
from harness.core.interop import load_any
from tests.malformed import MAKERS, damaged_run

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


def well_formed(path: Path) -> bool:
    try:
        if path.is_dir():
            RunDir(path).load_test()
            RunDir(path).load_history()
        else:
            load_any(path)
    except (HistoryError, HarnessError):
        return False
    return True


def assert_honest(path: Path, code: int, out: str, err: str) -> None:
    assert code in (0, 1, 2, 3, 64), (code, out, err)
    assert "Traceback" not in out + err
    assert err.count("\n") <= 1, err
    if code == 1:
        assert well_formed(path), f"exit 1 on malformed input {path}: {out[:300]}"
    if code in (3, 64):
        assert err.startswith("harness: "), err


@SETTINGS
@given(kind=st.sampled_from(sorted(MAKERS)), seed=st.integers(0, 2**32 - 1))
def test_damaged_history_files_are_never_a_crash_or_a_false_verdict(
        tmp_path_factory: pytest.TempPathFactory, kind: str, seed: int) -> None:
    suffix, make = MAKERS[kind]
    path = tmp_path_factory.mktemp("f") / f"history{suffix}"
    path.write_bytes(make(random.Random(seed)))
    assert_honest(path, *run_check(path))


@SETTINGS
@given(seed=st.integers(0, 2**32 - 1))
def test_damaged_run_directories_are_never_a_crash_or_a_false_verdict(
        tmp_path_factory: pytest.TempPathFactory, seed: int) -> None:
    dest = tmp_path_factory.mktemp("r") / "run"
    damaged_run(random.Random(seed), dest)
    try:
        assert_honest(dest, *run_check(dest))
    finally:
        shutil.rmtree(dest, ignore_errors=True)
