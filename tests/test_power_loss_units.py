"""Power loss without servers: the Redis persistence modes' config, the fault's words, where it
is refused, and the suite of its rows."""

from __future__ import annotations

from pathlib import Path

import pytest

from dbs.redis import RedisDB
from harness.controller import syncfs_mounts
from harness.controller.backends.docker import DockerBackend
from harness.controller.backends.ssh.hosts import environment_unmet as ssh_unmet
from harness.controller.store import RunDir
from harness.core.capabilities import PowerLoss as OnSyncFS
from harness.core.cluster import Node
from harness.core.fault_run import FaultRun
from nemesis.power_loss import PowerLoss

ROOT = Path(__file__).resolve().parent.parent


@pytest.mark.parametrize(("mode", "appendonly", "appendfsync"), [
    ("none", "no", "always"), ("appendonly", "yes", "always"),
    ("everysec", "yes", "everysec"), ("nofsync", "yes", "no")])
def test_redis_persistence_modes_set_appendonly_and_appendfsync(
        mode: str, appendonly: str, appendfsync: str, tmp_path: Path) -> None:
    conf = RedisDB(persistence=mode).files(Node("n1", "127.0.0.2", 16379), [], tmp_path)
    lines = conf["redis.conf"].splitlines()
    assert f"appendonly {appendonly}" in lines
    assert f"appendfsync {appendfsync}" in lines


def run(detail: dict[str, object] | None) -> FaultRun:
    return FaultRun("power-loss", 0, "majority", ("n1", "n2", "n3"), 3.25, 3.5, detail)


def test_a_power_loss_says_what_it_dropped() -> None:
    words = PowerLoss.describe(run({"dropped": {"n1": 625, "n2": 0, "n3": 250}}))
    assert words == ("a power loss (SIGKILL, unsynced data dropped) of n1,n2,n3 at 3.2 s, 875 "
                     "unsynced bytes dropped (n1 625, n3 250), restarted after 0.2 s")


def test_a_power_loss_that_dropped_nothing_says_so() -> None:
    words = PowerLoss.describe(run({"dropped": {"n1": 0, "n2": 0, "n3": 0}}))
    assert words.endswith("at 3.2 s, nothing unsynced dropped, restarted after 0.2 s")


def test_power_loss_is_refused_in_one_line_where_there_is_no_fuse(
        monkeypatch: pytest.MonkeyPatch) -> None:
    assert syncfs_mounts.unavailable() is None or "FUSE" in str(syncfs_mounts.unavailable())
    monkeypatch.setattr(syncfs_mounts.os.path, "exists", lambda p: p != "/dev/fuse")
    assert syncfs_mounts.unavailable() == "power loss needs FUSE, and /dev/fuse is missing"


def test_power_loss_runs_on_docker_where_the_host_has_fuse_and_is_refused_on_ssh(
        monkeypatch: pytest.MonkeyPatch) -> None:
    assert PowerLoss.requires == (OnSyncFS,)
    docker = object.__new__(DockerBackend)
    monkeypatch.setattr("os.path.exists", lambda p: True)
    assert docker.environment_unmet(OnSyncFS) is None
    monkeypatch.setattr("os.path.exists", lambda p: p != "/dev/fuse")
    assert docker.environment_unmet(OnSyncFS) == (
        "power loss needs FUSE, and this host has no /dev/fuse to give the containers")
    assert ssh_unmet(None, OnSyncFS) == "the ssh backend has no PowerLoss"  # type: ignore[arg-type]


def test_a_power_loss_container_gets_fuse_and_the_filesystems_code(tmp_path: Path) -> None:
    docker = object.__new__(DockerBackend)
    docker.run = RunDir(tmp_path / "run")
    docker.run.path.mkdir()
    volumes: dict[str, dict[str, str]] = {}
    extra = docker._fuse(volumes)
    assert extra["devices"] == ["/dev/fuse:/dev/fuse:rwm"]
    assert "SYS_ADMIN" in extra["cap_add"] and "NET_ADMIN" in extra["cap_add"]
    assert volumes[str(docker.run.path / "syncfs")] == {"bind": "/syncfs", "mode": "rw"}
    assert {"bind": "/opt/lock-harness/py/harness", "mode": "ro"} in volumes.values()


def test_the_power_loss_suite_holds_issue_27s_rows() -> None:
    from harness.presentation import suite as suite_mod

    s = suite_mod.load(ROOT / "suites" / "power-loss.toml")
    rows = sorted((e.options["db"], e.options["lock"], e.options.get("persistence", "none"),
                   str(e.options.get("nemesis-opt", {})), e.expect) for e in s.entries)
    assert rows == sorted(3 * [
        ("redis-masters", "redlock", "everysec", "{}", "invalid"),
        ("redis-masters", "redlock", "appendonly", "{}", "valid"),
        ("redis-masters", "redlock", "everysec", "{'restart': 'delayed'}", "valid"),
        ("redis", "redis-fenced", "everysec", "{}", "invalid"),
        ("zookeeper", "zookeeper", "forcesync", "{}", "valid"),
        ("etcd", "etcd", "none", "{}", "valid"),
        ("postgres", "pg-row", "fsync", "{}", "valid")])
    assert all(e.options["nemesis"] == "power-loss" for e in s.entries)


def test_harness_list_db_offers_the_persistence_modes(capsys: pytest.CaptureFixture[str]
                                                      ) -> None:
    from harness.presentation.list_roles import list_roles

    assert list_roles(db="redis-masters") == 0
    out = capsys.readouterr().out.splitlines()
    modes = out[out.index("  persistence (--persistence MODE):") + 1:]
    assert [line.split()[0] for line in modes] == ["none", "appendonly", "everysec", "nofsync"]
    assert "appendfsync everysec: fsynced once a second" in modes[2]


@pytest.mark.parametrize(("mode", "line"), [("none", "forceSync=no"),
                                            ("forcesync", "forceSync=yes")])
def test_zookeeper_persistence_sets_force_sync(mode: str, line: str) -> None:
    from dbs.zookeeper import ZooKeeperDB

    node = Node("n1", "127.0.0.2", 2181)
    cfg = ZooKeeperDB(persistence=mode).files(node, [node], Path("/node"))["zoo.cfg"]
    assert line in cfg.splitlines()


@pytest.mark.parametrize(("mode", "settings"), [
    ("none", ["fsync=off", "full_page_writes=off", "synchronous_commit=on"]),
    ("fsync", ["fsync=on", "full_page_writes=on", "synchronous_commit=on"]),
    ("async-commit", ["fsync=on", "full_page_writes=on", "synchronous_commit=off"])])
def test_postgres_persistence_sets_fsync_and_synchronous_commit(
        mode: str, settings: list[str]) -> None:
    from dbs.postgres import PostgresDB

    argv = PostgresDB(persistence=mode).argv(Node("n1", "127.0.0.2", 5432), Path("/node"))
    given = [argv[i + 1] for i, a in enumerate(argv) if a == "-c"]
    assert [s for s in given if s.split("=")[0] in
            ("fsync", "full_page_writes", "synchronous_commit")] == settings
