"""harness doctor and harness setup (issue 28): the table of what this machine has, read from
the roles' declarations; a missing server named with the command that installs it, by doctor
and by `harness run` (exit 3, before anything starts); setup's commands for what lacks."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from harness.controller import needs, setup_cmd
from harness.controller.registry import default_registry
from harness.core.errors import UsageError
from tests.harness_runs import bounded

REPO = Path(__file__).resolve().parents[1]
LINE = ("db redis: redis-server is missing (Debian package redis-server): run "
        "`harness setup --db redis`")


def harness(*argv: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return bounded([sys.executable, "-m", "harness.cli", *argv], cwd=REPO, env=env,
                   timeout=120)


@pytest.fixture
def without_redis(tmp_path: Path) -> dict[str, str]:
    """An environment whose PATH has every command of this one's except redis-server."""
    if shutil.which("redis-server") is None:
        pytest.skip("redis-server missing: run `bash setup.sh`")
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    for folder in os.environ["PATH"].split(os.pathsep):
        if not os.path.isdir(folder):
            continue
        for entry in os.scandir(folder):
            link = bin_dir / entry.name
            if entry.name != "redis-server" and not link.exists() and not link.is_symlink():
                link.symlink_to(entry.path)
    return {**os.environ, "PATH": str(bin_dir)}


def test_doctor_names_a_hidden_server_and_the_command_that_installs_it(
        without_redis: dict[str, str]) -> None:
    proc = harness("doctor", "--db", "redis", env=without_redis)
    assert proc.returncode == 1, proc.stderr
    rows = {tuple(line.split()[:2]): line for line in proc.stdout.splitlines()}
    assert rows[("db", "redis")].split()[2:] == ["MISSING", "harness", "setup", "--db", "redis"]
    assert f"doctor: {LINE}" in proc.stdout.splitlines()
    # only what a run on that DB needs: no other DB's row, no client's
    assert {k for k in rows if k[0] != "doctor:"} == {("backend", "local"), ("db", "redis"),
                                                      ("fault", "pause")}
    full = harness("doctor", env=without_redis)  # alone: every row
    assert full.returncode == 1 and "db       zookeeper" in full.stdout


def test_doctor_alone_names_every_lock_a_client_serves() -> None:
    proc = harness("doctor")
    rows = [line.split(None, 2) for line in proc.stdout.splitlines()
            if line.startswith("client ")]
    reg = default_registry()
    served = {name for _, _, rest in rows for name in rest.partition("(locks ")[2]
              .rstrip(")").split(", ")}
    built_by_clients = {n for n in reg.names("locks")
                        if isinstance(getattr(reg.load("locks", n), "build", None), str)}
    assert "redis-semaphore" in built_by_clients and served == built_by_clients, rows


def test_run_refuses_a_missing_server_with_doctors_line_before_anything_starts(
        tmp_path: Path, without_redis: dict[str, str]) -> None:
    store = tmp_path / "results"
    proc = harness("run", "--db", "redis", "--store", str(store), "--quiet", env=without_redis)
    assert proc.returncode == 3
    assert proc.stderr.strip().splitlines() == [f"harness: {LINE}"]
    assert not store.exists()  # no run directory: nothing started


def test_doctor_exits_1_for_a_backend_that_is_missing_and_0_for_what_is_here(
        without_redis: dict[str, str]) -> None:
    assert harness("doctor", "--db", "zookeeper", "--nemesis", "none",
                   env=without_redis).returncode == 1  # the resource is a Redis
    env = {**without_redis, "PATH": os.environ["PATH"]}
    proc = harness("doctor", "--db", "redis", "--nemesis", "partition,clock", env=env)
    assert proc.returncode == 0, proc.stdout
    assert proc.stdout.splitlines()[-1] == ("doctor: ready for --db redis --lock redis-setnx "
                                            "--backend local --nemesis partition,clock")


def test_the_table_has_one_row_per_role_and_family_from_their_declarations() -> None:
    reg = default_registry()
    rows = needs.table(reg)
    assert [r.name for r in rows if r.kind == "db"] == reg.names("dbs")
    assert [r.name for r in rows if r.kind == "backend"] == ["local", "docker", "ssh"]
    faults = [r.name for r in rows if r.kind == "fault"]
    assert "partition" in faults and "partition-halves" not in faults  # aliases are families'
    assert [r.name for r in rows if r.kind == "client"] == ["curator", "go-etcd-mutex",
                                                            "node-redlock"]
    partition = next(r for r in rows if r.name == "partition")
    assert partition.packages == {"iptables": "iptables"}
    clock = next(r for r in rows if r.name == "clock")
    assert list(clock.packages.values()) == ["libfaketime"]


def test_a_row_says_what_it_lacks_and_its_fix_in_one_line() -> None:
    row = needs.row("client", "curator", [], {"/nonexistent/javac": "openjdk-17-jdk-headless"})
    assert not row.available
    assert row.line() == ("client curator: /nonexistent/javac is missing (Debian package "
                          "openjdk-17-jdk-headless): run `harness setup --clients curator`")
    fault = needs.row("fault", "loss", [], {"/nonexistent/iptables": "iptables"})
    assert fault.fix == "harness setup --nemesis loss"


def test_setup_installs_only_the_declared_packages_that_lack(
        monkeypatch: pytest.MonkeyPatch) -> None:
    reg = default_registry()
    monkeypatch.setattr(setup_cmd, "installed",
                        lambda package, whats=(): package not in {"redis-server", "etcd-server"})
    c = setup_cmd.choice(["redis"], [], [], [], False, reg)
    steps = setup_cmd.commands(c, reg)
    assert len(steps) == 1
    what, argv, done = steps[0]
    assert what == "installing Debian packages: redis-server" and not done
    assert argv[-1].endswith("--no-install-recommends redis-server >/dev/null")


def test_setup_chooses_by_name_or_all_and_refuses_an_unknown_name() -> None:
    reg = default_registry()
    every = setup_cmd.choice([], [], [], [], True, reg)
    assert every.dbs == reg.names("dbs") and every.backends == ["local", "docker", "ssh"]
    assert every.clients == ["curator", "go-etcd-mutex", "node-redlock"]
    assert setup_cmd.choice([], ["docker,ssh"], [], ["curator"], False, reg).backends == [
        "docker", "ssh"]
    with pytest.raises(UsageError, match="unknown client 'nope'"):
        setup_cmd.choice([], [], [], ["nope"], False, reg)


def test_setup_dry_run_prints_the_commands_of_the_chosen_steps() -> None:
    proc = harness("setup", "--backend", "docker", "--clients", "curator", "--dry-run")
    assert proc.returncode == 0, proc.stderr
    lines = [line for line in proc.stdout.splitlines()
             if not line.startswith(("setup: ", "sh -c 'apt-get"))]
    assert lines[0].endswith("docker/engine.sh") and lines[1].endswith("docker/build_image.py")
    assert lines[2].endswith("docker/build_redis_libc.sh")
    assert lines[3].endswith("-m workloads.external.builds curator") and len(lines) == 4


def test_setup_dry_run_alone_prints_the_command_of_each_step_done_or_not() -> None:
    """`harness setup --dry-run` with nothing chosen: the apt command of the harness's own
    packages (marked when they are all there), and a line saying how to choose more."""
    proc = harness("setup", "--dry-run")
    assert proc.returncode == 0, proc.stderr
    lines = proc.stdout.splitlines()
    assert lines[0].startswith("setup: nothing chosen but the harness's own packages")
    apt = [line for line in lines if line.startswith("sh -c 'apt-get update")]
    assert len(apt) == 1 and "--no-install-recommends iptables iproute2" in apt[0], lines
    everything = setup_cmd.declared(setup_cmd.Choice(), default_registry())
    done = all(setup_cmd.installed(p, w) for p, w in everything.items())
    assert apt[0].endswith(f"  # already done: Debian packages: all {len(everything)} "
                           "installed") == done


def test_a_command_several_roles_declare_is_installed_only_when_it_is_there(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """redis-server is declared by three DBs: counted once, so a machine without it installs
    it (a fresh Debian's `bash setup.sh` once skipped it, for three names against one absent)."""
    monkeypatch.setenv("PATH", str(tmp_path))  # no command at all here
    monkeypatch.setattr(setup_cmd.subprocess, "run", lambda *a, **k: subprocess.CompletedProcess(
        a, 0, stdout="unknown ok not-installed", stderr=""))
    reg = default_registry()
    whats = setup_cmd.declared(setup_cmd.choice(["all"], [], [], [], False, reg), reg)
    assert whats["redis-server"].count("redis-server") > 1  # the case itself
    assert not setup_cmd.installed("redis-server", whats["redis-server"])
    (tmp_path / "redis-server").write_text("#!/bin/sh\n")
    (tmp_path / "redis-server").chmod(0o755)
    assert setup_cmd.installed("redis-server", whats["redis-server"])
