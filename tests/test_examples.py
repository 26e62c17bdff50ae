"""examples/tinylock, a lock library with its own pyproject.toml and tests that use the
`lock_harness` fixture, as a library's CI runs it (docs/ci.md): its pytest gets the verdict it
expects of its lock under each fault and fails, with the violation in words, for its buggy
variant; the failure's replay line reproduces it."""

from __future__ import annotations

import os
import re
import shutil
import sys
from pathlib import Path

import pytest

from tests.test_pytest_plugin import pytest_in, replayed

EXAMPLE = Path(__file__).resolve().parents[1] / "examples" / "tinylock"


def test_the_workflow_a_library_copies_installs_sets_up_and_runs_its_pytest() -> None:
    text = (EXAMPLE / ".github" / "workflows" / "lock-harness.yml").read_text()
    runs = [line.split("- run: ", 1)[1] for line in text.splitlines() if "- run: " in line]
    assert runs[0].startswith('test -n "$LOCK_HARNESS" ||')  # not on PyPI: no default
    assert runs[2].endswith('pip install -q "$LOCK_HARNESS" -e \'.[test]\'')
    assert runs[3:5] == ["/venv/bin/harness setup --db redis",
                         "/venv/bin/harness doctor --db redis"]
    assert runs[5].startswith("/venv/bin/python -m pytest -q --harness-require-servers")
    assert "lock-harness" in (EXAMPLE / "pyproject.toml").read_text()


OVERLAP = (r"first of lock-overlaps: process \d+ acquired at [\d.]+ s while process \d+, "
           r"which acquired at [\d.]+ s, had not released")
needs_redis = pytest.mark.skipif(shutil.which("redis-server") is None,
                                 reason="redis-server missing: run `bash setup.sh`")


def example_pytest(tmp_path: Path, variant: str, *args: str) -> tuple[int, str]:
    proc = pytest_in(EXAMPLE, "-q", f"--harness-store={tmp_path / 'runs'}", *args,
                     env={**os.environ, "TINYLOCK": variant})
    return proc.returncode, proc.stdout + proc.stderr


@pytest.mark.servers
@needs_redis
def test_the_example_gets_its_expected_verdicts_and_its_unsafe_variant_fails_under_pause(
        tmp_path: Path) -> None:
    """Four real runs of 5 s (~45 s): the lock under partition, clock-client (valid) and pause
    (invalid, no lease taken early) as expected (its baseline, `none`, is left to the library's
    CI); the unsafe variant under pause fails."""
    code, out = example_pytest(tmp_path, "Lock", "-k", "not none")
    assert code == 0 and "3 passed" in out, out
    assert len(re.findall(r"^VALID ", out, re.M)) == 2 and "\nINVALID  tests/" in out, out
    code, out = example_pytest(tmp_path, "UnsafeLock", "-k", "pause")
    assert code == 1 and "1 failed" in out, out
    assert "a lease was taken while still in force" in out, out
    assert "lock test_lock:TinyLock on redis (mutex workload) under pause" in out
    assert re.search(OVERLAP, out), out


@pytest.mark.servers
@pytest.mark.slow
@needs_redis
def test_the_unsafe_variants_replay_line_pasted_into_a_shell_fails_again(
        tmp_path: Path) -> None:
    """The line names the variant and the paths the test had: a shell without TINYLOCK or
    PYTHONPATH, in another directory, gets the same verdict and the same kind of overlap."""
    code, out = example_pytest(tmp_path, "UnsafeLock", "-k", "pause")
    assert code == 1, out
    assert re.search(r"^E\s+replay: TINYLOCK=UnsafeLock PYTHONPATH=\S*examples/tinylock\S* "
                     rf"{re.escape(sys.executable)} -m harness.cli run --lock "
                     r"test_lock:TinyLock --nemesis pause", out, re.M), out
    again = replayed(out, tmp_path / "elsewhere", "TINYLOCK")
    assert again.returncode == 1, again.stdout + again.stderr
    assert re.search(r"^INVALID", again.stdout, re.M), again.stdout
    assert "lock overlaps" in again.stdout, again.stdout
