"""harness doctor and harness setup (issue 28): the table of what this machine has, read from
the roles' declarations; a missing server named with the command that installs it, by doctor
and by `harness run` (exit 3, before anything starts); setup's commands for what lacks."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
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


def test_doctor_and_run_say_clock_faults_lack_a_libc_redis_where_there_is_none(
        tmp_path: Path) -> None:
    """Debian's redis-server (jemalloc) dies under libfaketime: with no MALLOC=libc build in
    the cache, doctor is not ready for clock faults, and run refuses with its line."""
    if shutil.which("redis-server") is None or not any(
            os.path.exists(p) for p in needs.LIBFAKETIME_PATHS):
        pytest.skip("redis-server or libfaketime missing: run `bash setup.sh`")
    env = {**os.environ, "LOCK_HARNESS_CACHE": str(tmp_path / "empty-cache")}
    line = ("fault clock: clock faults on Redis need a redis-server built with MALLOC=libc "
            "(Debian's uses jemalloc, which libfaketime cannot hook): run "
            "`harness setup --nemesis clock`")
    proc = harness("doctor", "--db", "redis", "--nemesis", "clock", env=env)
    assert proc.returncode == 1, proc.stdout
    assert f"doctor: {line}" in proc.stdout.splitlines()
    store = tmp_path / "results"
    run = harness("run", "--nemesis", "clock", "--store", str(store), "--quiet", env=env)
    assert (run.returncode, run.stderr.strip().splitlines()) == (3, [f"harness: {line}"])
    assert not store.exists()
    reg = default_registry()  # and that setup builds it: alone, or once in docker's job
    alone = setup_cmd.jobs(setup_cmd.commands(setup_cmd.choice([], [], ["clock"], [], False,
                                                                reg), reg))
    assert [argv[-1].rsplit("/", 1)[-1] for _, argv, _ in alone["the libc Redis"]] == [
        "build_redis_libc.sh"]
    both = setup_cmd.commands(setup_cmd.choice([], ["docker"], ["clock"], [], False, reg), reg)
    assert [w for w, _, _ in both if "build_redis_libc" in w] == [
        "the libc Redis (docker/build_redis_libc.sh)"]


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
    # all DBs but one from another repository than Debian's (Google's for spanner: on a bare
    # Debian 12, setup.sh's `--db all` failed, 'Unable to locate package'); that one by name
    assert every.dbs == [n for n in reg.names("dbs") if n != "spanner"]
    assert reg.load("dbs", "spanner").apt_source and "spanner" in reg.names("dbs")
    assert setup_cmd.choice(["all,spanner"], [], [], [], False, reg).dbs[-1] == "spanner"
    assert every.backends == ["local", "docker", "ssh"]
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


def test_setup_builds_the_docker_steps_as_one_job_and_each_client_as_its_own() -> None:
    reg = default_registry()
    steps = setup_cmd.commands(setup_cmd.choice([], ["docker"], [], ["all"], False, reg), reg)
    builds = setup_cmd.jobs(steps)
    assert list(builds) == ["docker backend", "lock client curator", "lock client go-etcd-mutex",
                            "lock client node-redlock"]
    assert [argv[-1].rsplit("/", 1)[-1] for _, argv, _ in builds["docker backend"]] == [
        "engine.sh", "build_image.py", "build_redis_libc.sh"]
    assert not any(what.startswith("installing Debian") for job in builds.values()
                   for what, _, _ in job)


def test_setup_runs_its_builds_at_once_and_names_the_one_that_failed(
        tmp_path: Path, capsys: pytest.CaptureFixture[str],
        monkeypatch: pytest.MonkeyPatch) -> None:
    """Each job waits (at most 60 s) for a file the other writes once it is running: they pass
    only when both run at the same time. A third fails: its name, exit code, log and the log's
    tail are said, and the other jobs still finish."""
    def waits_for(mine: str, theirs: str) -> list[str]:
        return ["sh", "-c", f"touch {tmp_path / mine}; i=0; while [ ! -e {tmp_path / theirs} ]"
                f" && [ $i -lt 600 ]; do sleep 0.1; i=$((i+1)); done; [ -e {tmp_path / theirs} ]"]

    builds = {"lock client a": [("lock client a", waits_for("a", "b"), False)],
              "lock client b": [("lock client b", waits_for("b", "a"), False)],
              "docker backend": [("the engine (docker/x)", ["sh", "-c", "echo up"], False),
                                 ("the image (docker/y)", ["sh", "-c", "echo boom; exit 7"], False),
                                 ("never (docker/z)", ["sh", "-c", "touch never"], False)]}
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))  # the logs' directory
    failed = setup_cmd.run_jobs(builds, dict(os.environ))
    assert failed["docker backend"].parent.parent == tmp_path
    out, err = capsys.readouterr()
    assert list(failed) == ["docker backend"]
    assert "setup: lock client a: done in" in out and "setup: lock client b: done in" in out
    assert "setup: docker backend: the image (docker/y) failed (exit 7)" in out
    log = failed["docker backend"].read_text()
    assert "echo up" in log and "up\n" in log and "boom\n" in log and "never" not in log
    assert "docker backend| boom" in err
    assert setup_cmd.run_jobs({"lock client a": [("lock client a", ["true"], False)]},
                              dict(os.environ)) == {}
    kept = [p for p in tmp_path.iterdir() if p.is_dir()]  # the failed one's logs only
    assert kept == [failed["docker backend"].parent]


def test_setup_sh_sets_up_the_main_job_first_and_the_rest_unless_asked_not_to() -> None:
    """`bash setup.sh --dry-run` (no root, nothing run): the main job's needs (redis) come
    first; the docker image and the clients only after, and not at all with SETUP_EXTRAS=0."""
    def dry(**env: str) -> list[str]:
        proc = bounded(["bash", "setup.sh", "--dry-run"], cwd=REPO, timeout=120,
                       env={**os.environ, **env})
        assert proc.returncode == 0, proc.stderr
        return proc.stdout.splitlines()

    def first(lines: list[str], word: str) -> int:
        return next(i for i, line in enumerate(lines) if word in line)

    full, main_only = dry(), dry(SETUP_EXTRAS="0")
    assert first(full, "redis") < first(full, "docker")
    assert any("--clients" in line or "builds node-redlock" in line for line in full), full
    assert any("redis" in line for line in main_only)
    assert not any("docker" in line or "--clients" in line or "builds node-redlock" in line
                   for line in main_only), main_only
    assert bounded(["bash", "setup.sh", "--nope"], cwd=REPO, timeout=30).returncode == 64
