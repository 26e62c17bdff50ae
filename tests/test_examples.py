"""examples/tinylock, a lock library with its own pyproject.toml and one test that uses the
`lock_harness` fixture, as a library's CI runs it (docs/ci.md): its pytest passes for the lock
and fails, with the violation in words, for its buggy variant. Two real runs of 6 s."""

from __future__ import annotations

import os
import re
import shutil
from pathlib import Path

import pytest

from tests.test_pytest_plugin import pytest_in

EXAMPLE = Path(__file__).resolve().parents[1] / "examples" / "tinylock"


def test_the_workflow_a_library_copies_installs_sets_up_and_runs_its_pytest() -> None:
    text = (EXAMPLE / ".github" / "workflows" / "lock-harness.yml").read_text()
    runs = [line.split("- run: ", 1)[1] for line in text.splitlines() if "- run: " in line]
    assert runs[1].endswith('pip install -q "$LOCK_HARNESS" -e \'.[test]\'')
    assert runs[2:4] == ["/venv/bin/harness setup --db redis",
                         "/venv/bin/harness doctor --db redis"]
    assert runs[4].startswith("/venv/bin/python -m pytest -q --harness-require-servers")
    assert "lock-harness" in (EXAMPLE / "pyproject.toml").read_text()


@pytest.mark.servers
@pytest.mark.skipif(shutil.which("redis-server") is None,
                    reason="redis-server missing: run `bash setup.sh`")
def test_the_example_librarys_pytest_passes_for_its_lock_and_fails_for_the_unsafe_one(
        tmp_path: Path) -> None:
    store = f"--harness-store={tmp_path / 'runs'}"
    safe = pytest_in(EXAMPLE, "-q", store, env={**os.environ, "TINYLOCK": "Lock"})
    assert safe.returncode == 0, safe.stdout + safe.stderr
    assert "1 passed" in safe.stdout
    unsafe = pytest_in(EXAMPLE, "-q", store, env={**os.environ, "TINYLOCK": "UnsafeLock"})
    out = unsafe.stdout + unsafe.stderr
    assert unsafe.returncode == 1, out
    assert "1 failed" in out
    assert "lock test_lock:TinyLock on redis (mutex workload) under no faults" in out
    assert re.search(r"first of lock-overlaps: process \d+ acquired at [\d.]+ s while process "
                     r"\d+, which acquired at [\d.]+ s, had not released", out), out
