"""The layers point one way, and the contract that says so can fail.

``lint-imports`` runs the contracts of pyproject.toml; here it runs on the checkout (it must
pass) and on a copy in which one import points the wrong way (it must fail, naming the
contract).
"""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
LINT = Path(sys.executable).with_name("lint-imports")
PACKAGES = ("harness", "workloads", "nemesis", "checker")

pytestmark = pytest.mark.skipif(not LINT.exists(), reason="import-linter is not installed")


def lint(cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([str(LINT), "--no-cache"], cwd=cwd, capture_output=True, text=True,
                          timeout=120, env={"PYTHONPATH": str(cwd), "PATH": "/usr/bin:/bin"})


def test_the_checkout_keeps_its_layers() -> None:
    proc = lint(ROOT)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "0 broken" in proc.stdout


def copy_tree(tmp_path: Path) -> Path:
    for name in PACKAGES:
        shutil.copytree(ROOT / name, tmp_path / name,
                        ignore=shutil.ignore_patterns("__pycache__", "assets"))
    shutil.copy(ROOT / "pyproject.toml", tmp_path / "pyproject.toml")
    return tmp_path


@pytest.mark.parametrize(("module", "line"), [
    ("nemesis/base.py", "import harness.controller.run"),  # a role importing the controller
    ("harness/core/history.py", "import checker.mutex"),  # the core importing a role
    ("workloads/mutex.py", "import nemesis.base"),  # one role importing another
    ("harness/controller/spec.py", "import harness.presentation.runs"),  # controller -> up
])
def test_a_wrong_way_import_breaks_the_contract(tmp_path: Path, module: str, line: str) -> None:
    tree = copy_tree(tmp_path)
    path = tree / module
    path.write_text(path.read_text() + f"\n{line}  # noqa\n")
    proc = lint(tree)
    assert proc.returncode != 0, proc.stdout
    assert "BROKEN" in proc.stdout and line.split()[1] in proc.stdout
