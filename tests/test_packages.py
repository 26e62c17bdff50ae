"""A DB declares its Debian packages once (``debian_packages`` on its class); setup.sh and the
node image install the lists harness.controller.packages derives from the classes."""

from __future__ import annotations

import re
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import ClassVar

import pytest

from dbs.base import DB
from dbs.faketime import DEBIAN_PACKAGES as FAKETIME
from harness.controller import packages
from harness.controller.registry import BUILTINS, default_registry

ROOT = Path(__file__).resolve().parents[1]
SYSTEM_PYTHON = "/usr/bin/python3"


class ToyDB(DB):
    """A DB of a test: its own server package, and clock faults through libfaketime."""

    name: ClassVar[str] = "toy"
    summary: ClassVar[str] = "a toy server"
    port: ClassVar[int] = 7777
    debian_packages: ClassVar[dict[str, str]] = {"toyd": "toy-server", "toyctl": "toy-tools"}

    def clock_fault_support(self) -> str | None:
        return None

    def read_clock(self, node: object) -> float:
        return 0.0


class GoToyDB(ToyDB):
    """Its clocks move by a vDSO patch: no libfaketime."""

    clock_mechanism: ClassVar[str] = "vdso"


class NoClockDB(DB):
    """No clock faults at all: no libfaketime either."""

    name: ClassVar[str] = "no-clock"
    summary: ClassVar[str] = "a server without clock faults"
    port: ClassVar[int] = 7778
    debian_packages: ClassVar[dict[str, str]] = {"plain": "plain-server"}


def test_a_db_brings_its_declared_packages_into_the_host_and_image_lists() -> None:
    host = packages.packages([ToyDB])
    image = packages.packages([ToyDB], image=True)
    for listed in (host, image):
        assert listed[:len(packages.HARNESS)] == list(packages.HARNESS)
        assert [p for p in listed if p.startswith("toy-")] == ["toy-server", "toy-tools"]
        assert [p for p in listed if p in FAKETIME] == list(FAKETIME)
    assert "openssh-client" in host and "openssh-client" not in image
    assert "openssh-server" in image and "openssh-server" not in host


def test_libfaketime_only_for_a_db_whose_clock_faults_use_it() -> None:
    assert packages.db_packages(ToyDB) == ["toy-server", "toy-tools", *FAKETIME]
    assert packages.db_packages(GoToyDB) == ["toy-server", "toy-tools"]
    assert packages.db_packages(NoClockDB) == ["plain-server"]


def test_each_package_is_listed_once() -> None:
    listed = packages.packages([ToyDB, GoToyDB, NoClockDB])
    assert len(listed) == len(set(listed))
    assert listed.count("toy-server") == 1 and listed.count("libfaketime") == 1


def test_a_new_db_is_one_file_plus_its_registry_entry(tmp_path: Path,
                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    """The lists are read from the registry's entries: a DB module and one line in BUILTINS
    put its packages in both, with nothing else written anywhere."""
    (tmp_path / "new_db.py").write_text(textwrap.dedent('''
        from dbs.base import DB

        class NewDB(DB):
            name = "new"
            summary = "a new server"
            port = 9999
            debian_packages = {"newd": "new-server"}
    '''))
    registry = tmp_path / "registry.py"
    registry.write_text(textwrap.dedent('''
        BUILTINS: dict[str, dict[str, str]] = {
            "dbs": {"redis": "dbs.redis:RedisDB", "new": "new_db:NewDB"},
            "locks": {},
        }
    '''))
    monkeypatch.syspath_prepend(str(tmp_path))
    found = packages.builtin_dbs(registry)
    assert [db.name for db in found] == ["redis", "new"]
    for image in (False, True):
        listed = packages.packages(found, image=image)
        assert "new-server" in listed and "redis-server" in listed


def test_the_builtin_dbs_are_the_registrys() -> None:
    assert [db.name for db in packages.builtin_dbs()] == list(BUILTINS["dbs"])
    assert packages.builtin_dbs() == [default_registry().load("dbs", n) for n in BUILTINS["dbs"]]


@pytest.mark.skipif(not Path(SYSTEM_PYTHON).exists(), reason="no system python3")
@pytest.mark.parametrize("image", [False, True])
def test_the_system_python_derives_the_lists_before_the_venv_exists(image: bool) -> None:
    """setup.sh runs it with the system Python, isolated from any site-packages here: every
    DB module loads with the standard library alone, and each built-in DB's declared
    packages (read from its class) are in the list, but those of another repository."""
    argv = [SYSTEM_PYTHON, "-I", "-c", "import sys; sys.path.insert(0, '.'); "
            "from harness.controller.packages import main; sys.exit(main(sys.argv[1:]))"]
    proc = subprocess.run([*argv, *(["--image"] if image else [])], cwd=ROOT,
                          capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    listed = proc.stdout.split()
    assert listed == packages.packages(packages.builtin_dbs(), image=image)
    for name in BUILTINS["dbs"]:
        db = default_registry().load("dbs", name)
        declared = set(db.debian_packages.values())
        assert declared, name  # another repository's (apt_source): in neither list
        assert declared <= set(listed) if db.apt_source is None else not declared & set(listed)


def test_the_image_build_installs_the_derived_list() -> None:
    """The image's package step, as a dry run (no build): it installs the derived list."""
    proc = subprocess.run([sys.executable, str(ROOT / "docker" / "build_image.py"),
                           "--print-packages"], capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.split() == packages.packages(packages.builtin_dbs(), image=True)


def test_the_image_recipe_changes_with_a_dbs_packages(monkeypatch: pytest.MonkeyPatch) -> None:
    sys.path.insert(0, str(ROOT / "docker"))
    try:
        import build_image
    finally:
        sys.path.remove(str(ROOT / "docker"))
    before = build_image.recipe_hash()
    listed = build_image.package_list()
    monkeypatch.setattr(build_image, "package_list", lambda: listed + "new-server\n")
    assert build_image.recipe_hash() != before
    monkeypatch.setattr(build_image, "package_list", lambda: listed)
    assert build_image.recipe_hash() == before


def test_no_db_package_is_listed_by_hand_in_setup_or_docker() -> None:
    """setup.sh's own lists and docker/'s files name no package a DB declares (docker's
    packages.txt is generated, not in git)."""
    declared = {p for db in packages.builtin_dbs() for p in packages.db_packages(db)}
    arrays = re.findall(r"^\w*packages=\((.*?)\)", (ROOT / "setup.sh").read_text(), re.S | re.M)
    assert len(arrays) == 2  # the venv's, then the report tests'
    words = {w for a in arrays for line in a.splitlines() for w in line.split("#")[0].split()}
    assert {"python3-venv", "chromium"} <= words and not words & declared
    tracked = subprocess.run(["git", "ls-files", "docker"], cwd=ROOT, capture_output=True,
                             text=True, check=True).stdout.split()
    assert "docker/packages.txt" not in tracked
    for path in tracked:
        for line in (ROOT / path).read_text().replace("\\\n", " ").splitlines():
            if "apt-get install" in line or "install -y" in line:
                assert not set(line.split()) & declared, (path, line)
