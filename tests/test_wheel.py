"""The wheel carries everything an installed harness runs: every module, the report's assets,
the ssh backend's host script, the clients' sources and the node image's build (issue 28)."""

from __future__ import annotations

import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
PACKAGES = ("harness", "workloads", "nemesis", "checker", "dbs")
GENERATED = {"docker/packages.txt"}  # written by build_image.py, not in git


@pytest.fixture(scope="session")
def wheel(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The wheel of this checkout, built once per test session (`pip wheel .`: ~10 s)."""
    out = tmp_path_factory.mktemp("wheel")
    proc = subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps", "-q",
                           "--disable-pip-version-check", "-w", str(out), str(REPO)],
                          capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr[-2000:]
    (built,) = out.glob("lock_harness-*.whl")
    return built


def tracked(*paths: str) -> list[str]:
    listed = subprocess.run(["git", "-C", str(REPO), "ls-files", *paths], capture_output=True,
                            text=True, check=True).stdout.split()
    return [p for p in listed if p not in GENERATED and (REPO / p).is_file()]


def test_the_wheel_holds_every_file_the_harness_runs(wheel: Path) -> None:
    names = set(zipfile.ZipFile(wheel).namelist())
    modules = tracked(*PACKAGES)
    shipped = [f"harness/shipped/{p}" for p in tracked("clients", "docker")]
    missing = [p for p in (*modules, *shipped) if p not in names]
    assert missing == []
    assert "harness/shipped/clients/curator/build.sh" in names
    assert "harness/shipped/docker/build_image.py" in names
    assert "harness/controller/backends/ssh/ssh_host.sh" in names
    assert not [n for n in names if "__pycache__" in n or n.startswith(("tests/", "clients/"))]
