"""The wheel carries everything an installed harness runs: every module, the report's assets,
the ssh backend's host script, the clients' sources and the node image's build (issue 28)."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

from tests.harness_runs import bounded

REPO = Path(__file__).resolve().parents[1]
ROLES = ("workloads", "nemesis", "checker", "dbs")  # harness.<role> once installed
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
    modules = tracked("harness") + [f"harness/{p}" for p in tracked(*ROLES)]
    shipped = [f"harness/shipped/{p}" for p in tracked("clients", "docker", "suites")]
    missing = [p for p in (*modules, *shipped) if p not in names]
    assert missing == []
    assert "harness/shipped/clients/curator/build.sh" in names
    assert "harness/shipped/docker/build_image.py" in names
    assert "harness/shipped/suites/zoo.toml" in names  # harness zoo's default file
    assert "harness/controller/backends/ssh/ssh_host.sh" in names
    assert not [n for n in names if "__pycache__" in n or n.startswith(("tests/", "clients/"))]


def test_the_wheel_claims_no_generic_top_level_name(wheel: Path) -> None:
    """Issue 43: site-packages gets ``harness`` (and its metadata), never a ``checker``,
    ``dbs``, ``nemesis`` or ``workloads`` of its own; no module of the wheel imports or names
    one of those top-level packages."""
    archive = zipfile.ZipFile(wheel)
    tops = {n.split("/")[0] for n in archive.namelist()}
    assert tops == {"harness", *(t for t in tops if t.endswith(".dist-info"))}
    stray = re.compile(rf"""(?m)(^\s*from\s+|^\s*import\s+|["'])({"|".join(ROLES)})"""
                       r"(\.|\s+import\b)")
    left = [(n, m[0]) for n in archive.namelist() if n.endswith(".py")
            for m in stray.finditer(archive.read(n).decode())]
    assert left == []
    assert "harness.workloads.client" in archive.read("harness/controller/clients.py").decode()


# the acceptance test: the wheel installed outside the checkout ------------------------------
@pytest.fixture(scope="session")
def installed(wheel: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A fresh venv in a temporary directory with the wheel and its dependencies (PyPI, or
    pip's cache): its bin/."""
    venv = tmp_path_factory.mktemp("installed") / "venv"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True, timeout=120)
    proc = subprocess.run([str(venv / "bin" / "python"), "-m", "pip", "install", "-q",
                           "--disable-pip-version-check", str(wheel)], capture_output=True,
                          text=True, timeout=900, env=outside())
    assert proc.returncode == 0, proc.stderr[-2000:]
    return venv / "bin"


def outside() -> dict[str, str]:
    """This environment without any path to the checkout."""
    return {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV")}


def from_venv(bin_dir: Path, *argv: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([str(bin_dir / argv[0]), *argv[1:]], cwd=cwd, env=outside(),
                          capture_output=True, text=True, timeout=300)


@pytest.mark.slow
@pytest.mark.servers
@pytest.mark.skipif(shutil.which("redis-server") is None,
                    reason="redis-server missing: run `bash setup.sh`")
def test_the_installed_wheel_runs_as_the_checkout_does(installed: Path, tmp_path: Path) -> None:
    where = from_venv(installed, "python", "-c", "import harness, "
                      "harness.workloads.external.builds as b; from harness.core.shipped "
                      "import shipped; print(harness.__file__); "
                      "print(shipped('docker')); print(b.CLIENTS)", cwd=tmp_path)
    assert where.returncode == 0, where.stderr
    site = Path(where.stdout.split()[0]).parents[1]
    assert site.is_relative_to(installed.parent) and not site.is_relative_to(REPO)
    assert where.stdout.split()[1:] == [str(site / "harness" / "shipped" / "docker"),
                                        str(site / "harness" / "shipped" / "clients")]
    # the clients and the image are the checkout's: the same sources, the same cache keys
    tags = [subprocess.run([python, str(docker / "build_image.py"), "--print-tag"],
                           capture_output=True, text=True, timeout=60, env=env).stdout
            for python, docker, env in ((sys.executable, REPO / "docker", os.environ),
                                        (str(installed / "python"),
                                         site / "harness" / "shipped" / "docker", outside()))]
    assert tags[0] and tags[0] == tags[1]
    matrix = from_venv(installed, "harness", "zoo", "--dry-run", "--store", str(tmp_path / "z"),
                       cwd=tmp_path)  # no FILE: the zoo file the package ships
    assert matrix.returncode == 0 and "redis-py x pause: harness run" in matrix.stdout, (
        matrix.stdout + matrix.stderr)
    for db, lock in (("redis", "redis-setnx"), ("zookeeper", "curator")):  # curator: built
        doctor = from_venv(installed, "harness", "doctor", "--db", db, "--lock", lock,
                           cwd=tmp_path)
        assert doctor.returncode == 0, doctor.stdout + doctor.stderr
    argv = ("run", "--db", "redis", "--nemesis", "none", "--time-limit", "4", "--seed", "1",
            "--quiet")
    there = from_venv(installed, "harness", *argv, "--store", str(tmp_path / "a"), cwd=tmp_path)
    here = bounded([sys.executable, "-m", "harness.cli", *argv, "--store",
                    str(tmp_path / "b")], cwd=REPO, timeout=300)
    assert (there.returncode, here.returncode) == (0, 0), there.stderr + here.stderr
    verdicts = [json.loads(next((tmp_path / d).rglob("results.json")).read_text())["valid"]
                for d in ("a", "b")]
    assert verdicts == [True, True]
    # the runs: a real client in another language, built from the package's sources,
    # broken by a pause as from the checkout; and the docker backend, its image found from the
    # package's docker/ (the checkout's tag, above)
    curator = ("run", "--db", "zookeeper", "--lock", "curator", "--nemesis", "pause",
               "--time-limit", "10", "--seed", "1", "--quiet", "--store", str(tmp_path / "c"))
    broken = from_venv(installed, "harness", *curator, cwd=tmp_path)
    assert broken.returncode == 1, broken.stdout + broken.stderr
    overlaps = json.loads(next((tmp_path / "c").rglob("results.json")).read_text())
    assert overlaps["checks"]["mutex"]["lock-overlap-count"] >= 1
    docker = ("run", "--backend", "docker", "--nemesis", "none", "--time-limit", "4",
              "--seed", "1", "--quiet", "--store", str(tmp_path / "d"))
    contained = from_venv(installed, "harness", *docker, cwd=tmp_path)
    assert contained.returncode == 0, contained.stdout + contained.stderr
