"""The plugin path, for real: the README's example lock, written into a directory outside the
project, on PYTHONPATH, run with ``harness run --lock mymod:MyLock`` against a real Redis."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.harness_runs import bounded

REPO = Path(__file__).resolve().parents[1]

pytestmark = pytest.mark.servers


def readme_example() -> str:
    """The first python block of the README's "A lock of your own" section."""
    text = (REPO / "README.md").read_text()
    section = text.split("## A lock of your own", 1)[1]
    match = re.search(r"```python\n(.*?)```", section, re.S)
    assert match, "the README shows an example lock"
    return match.group(1)


def test_readme_example_is_short_and_complete() -> None:
    code = readme_example()
    assert len(code.strip().splitlines()) <= 30
    namespace: dict[str, object] = {}
    exec(compile(code, "README example", "exec"), namespace)  # it is valid, importable code
    cls = namespace["MyLock"]
    assert callable(getattr(cls, "acquire", None)) and callable(getattr(cls, "release", None))


@pytest.mark.skipif(shutil.which("redis-server") is None, reason="redis-server missing")
def test_a_lock_outside_the_project_runs_through_the_plugin_path(tmp_path: Path) -> None:
    plugins = tmp_path / "elsewhere"
    plugins.mkdir()
    (plugins / "mymod.py").write_text(readme_example())
    store = tmp_path / "results"
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(plugins), str(REPO)])}
    proc = subprocess.run(
        [sys.executable, "-m", "harness.cli", "run", "--lock", "mymod:MyLock", "--nemesis",
         "none", "--time-limit", "5", "--seed", "1", "--quiet", "--store", str(store)],
        cwd=plugins, env=env, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    run_dir = (store / "latest").resolve()
    results = json.loads((run_dir / "results.json").read_text())
    assert results["checks"]["stats"]["counts"]["acquire"]["ok"] >= 5
    spec = json.loads((run_dir / "test.json").read_text())["spec"]
    assert spec["lock"] == "mymod:MyLock"


def test_a_plugin_that_cannot_be_imported_is_one_line_and_exit_64(tmp_path: Path) -> None:
    proc = bounded([sys.executable, "-m", "harness.cli", "run", "--lock",
                    "nosuchmod:Lock", "--store", str(tmp_path)],
                   cwd=REPO, timeout=60)
    assert proc.returncode == 64
    assert proc.stderr.count("\n") == 1 and "cannot import module" in proc.stderr
