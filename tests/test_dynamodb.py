"""The dynamodb DB (dynalite, a real DynamoDB API server from npm) and its locks: the refusal
without dynalite, the set-up step, the lock client's algorithm against a live node, and the
issue's detection rows as real runs (the holder pause in CI's set; the others slow; one pause
run on the docker backend)."""

from __future__ import annotations

import json
import os
import time
from pathlib import Path
from typing import Any

import pytest

from dbs.dynamodb import DynamoDB, cli_path
from harness.core.locks import LockConfig
from tests.harness_runs import docker_engine, harness, history, ran

installed = pytest.mark.skipif(DynamoDB.unavailable() is not None,
                               reason=f"dynamodb: {DynamoDB.unavailable()}: run "
                                      "`harness setup --db dynamodb`")


def without_dynalite(tmp_path: Path) -> dict[str, str]:
    return {**os.environ, "LOCK_HARNESS_DYNALITE": str(tmp_path / "none")}


def check(results: dict[str, Any], name: str) -> dict[str, Any]:
    return dict(results["checks"][name])


# without servers ---------------------------------------------------------------------------
def test_a_run_without_dynalite_is_refused_in_one_line_before_anything_starts(
        tmp_path: Path) -> None:
    store = tmp_path / "store"
    proc = harness("run", "--db", "dynamodb", "--store", str(store), "--time-limit", "5",
                   env=without_dynalite(tmp_path))
    assert proc.returncode == 3, proc.stdout + proc.stderr
    lines = [x for x in proc.stderr.splitlines() if x.strip()]
    assert len(lines) == 1, proc.stderr
    assert "dynalite is not installed" in lines[0]
    assert "`harness setup --db dynamodb`" in lines[0]
    assert not store.exists() or not any(store.rglob("history.jsonl")), "nothing may start"


def test_setup_installs_dynalite_from_npm_when_it_is_missing(tmp_path: Path) -> None:
    proc = harness("setup", "--db", "dynamodb", "--dry-run", env=without_dynalite(tmp_path))
    assert proc.returncode == 0, proc.stderr
    npm = [x for x in proc.stdout.splitlines() if x.startswith("npm install")]
    assert npm == [f"npm install --prefix {tmp_path / 'none'} --no-audit --no-fund --no-save "
                   "--loglevel=error dynalite@4.0.0"], proc.stdout


def test_list_and_the_pytest_plugin_know_the_db_its_locks_and_the_client_clock(
        tmp_path: Path) -> None:
    proc = harness("list")
    assert proc.returncode == 0, proc.stderr
    for name in ("dynamodb", "dynamodb-lease", "dynamodb-cas", "clock-client"):
        assert any(line.split()[:1] == [name] for line in proc.stdout.splitlines()), name
    from harness.presentation.pytest_plugin import db_missing

    os.environ["LOCK_HARNESS_DYNALITE"] = str(tmp_path / "none")
    try:
        missing = db_missing("dynamodb")
    finally:
        del os.environ["LOCK_HARNESS_DYNALITE"]
    assert missing is not None and "dynalite is not installed" in missing[0]


def test_bad_client_clock_options_are_refused_before_the_run(tmp_path: Path) -> None:
    proc = harness("run", "--db", "dynamodb", "--nemesis", "clock-client", "--nemesis-opt",
                   "client-clock-pattern=strobe", "--store", str(tmp_path))
    assert proc.returncode == 64, proc.stdout + proc.stderr
    assert "client-clock-pattern" in proc.stderr


# the lock client's algorithm against a live node ----------------------------------------------
@pytest.mark.servers
@installed
def test_lease_lock_waits_out_heartbeats_takes_over_a_silent_holder_and_fences(
        tmp_path: Path) -> None:
    from tests.one_node import lease_contract, one_node
    from workloads.locks.dynamodb_conn import TABLE
    from workloads.locks.dynamodb_lease import DynamoLeaseLock

    with one_node(DynamoDB(), tmp_path) as nodes:
        def lock(process: int) -> DynamoLeaseLock:
            return DynamoLeaseLock(LockConfig(nodes=tuple(nodes), ttl=1.0, op_timeout=1.0,
                                              process=process))

        a, b = lock(0), lock(1)
        a.setup()  # the table, made by the first client
        b.setup()  # and found there by the next
        table = a.client.describe_table(TableName=TABLE)["Table"]
        assert table["TableStatus"] == "ACTIVE" and table["ItemCount"] == 0
        lease_contract(a, b, 5.0, (1.0, 2.5))  # a lease is 1 s
        for x in (a, b):
            x.close()


@pytest.mark.slow
@pytest.mark.servers
@installed
def test_cas_lock_expires_by_the_next_clients_clock(tmp_path: Path) -> None:
    from tests.one_node import one_node
    from workloads.locks.dynamodb_cas import DynamoCasLock

    with one_node(DynamoDB(), tmp_path) as nodes:
        a, b = (DynamoCasLock(LockConfig(nodes=tuple(nodes), ttl=1.0, op_timeout=1.0,
                                         process=p)) for p in (0, 1))
        a.setup()
        first = a.acquire(2.0)
        assert first is not None and first.token is None
        began = time.monotonic()
        second = b.acquire(3.0)
        assert second is not None and time.monotonic() - began >= 0.9
        assert not a.release(first), "the expired holder's delete is refused"
        assert b.release(second)


@pytest.mark.slow
@pytest.mark.servers
@installed
def test_a_killed_node_keeps_its_items_on_disk(tmp_path: Path) -> None:
    from harness.controller.backends.local import LocalBackend
    from tests.one_node import nodes_up
    from workloads.locks.dynamodb_lease import DynamoLeaseLock

    db = DynamoDB()
    with nodes_up(LocalBackend, db, tmp_path) as (backend, nodes):
        config = LockConfig(nodes=tuple(nodes), ttl=1.0, op_timeout=1.0)
        lock = DynamoLeaseLock(config)
        lock.setup()
        grant = lock.acquire(5.0)
        assert grant is not None and lock.release(grant)
        backend.kill(nodes[0])
        backend.start(nodes[0])
        backend.wait_ready(nodes[0], 30)
        again = lock.acquire(5.0)
        assert again is not None and again.token == 2, "the fence survived a kill -9"
        lock.release(again)
        lock.close()


# the detection rows ---------------------------------------------------------------------------
@pytest.mark.servers
@installed
def test_lease_a_paused_holder_wakes_up_sharing_the_lock(store: Path) -> None:
    """CI's row: a pause of the holder past the lease stops its heartbeats; a waiter that saw
    the record unchanged for a lease takes the lock over, and the holder writes on."""
    results, run_dir = ran(store, 1, "--db", "dynamodb", "--lock", "dynamodb-lease", "--nemesis",
                           "pause", "--time-limit", "8", "--seed", "1")
    assert check(results, "mutex")["resource-interleaving-count"] > 0
    assert any(op["f"] == "pause" and op.get("value") == "start" for op in history(run_dir))


@pytest.mark.slow
@pytest.mark.servers
@installed
def test_lease_without_faults_is_valid(store: Path) -> None:
    results, _ = ran(store, 0, "--db", "dynamodb", "--lock", "dynamodb-lease", "--nemesis", "none",
                     "--time-limit", "30", "--seed", "1")
    assert check(results, "stats")["counts"]["acquire"]["ok"] >= 4


@pytest.mark.slow
@pytest.mark.servers
@installed
def test_lease_fenced_under_pause_is_valid_the_fence_rejects_the_stale_holder(
        store: Path) -> None:
    results, _ = ran(store, 0, "--db", "dynamodb", "--lock", "dynamodb-lease", "--workload",
                     "fenced", "--nemesis", "pause", "--time-limit", "30", "--seed", "1")
    assert check(results, "mutex")["lock-overlap-count"] > 0, "the pauses did overlap grants"
    fencing = check(results, "fencing")
    assert fencing["stale-rejected"] > 0 and fencing["stale-accepted-count"] == 0


@pytest.mark.slow
@pytest.mark.servers
@installed
def test_lease_a_waiters_fast_clock_takes_over_early(store: Path) -> None:
    results, run_dir = ran(store, 1, "--db", "dynamodb", "--lock", "dynamodb-lease", "--nemesis",
                           "clock-client", "--time-limit", "30", "--seed", "1")
    assert check(results, "mutex")["resource-interleaving-count"] > 0
    starts = [op for op in history(run_dir)
              if op["f"] == "clock-client" and op.get("value") == "start"
              and op["type"] != "invoke"]
    assert starts and all(op["detail"]["rate"] == 5.0 for op in starts)
    assert check(results, "faults")["valid"] is True  # each waiter's clock read back at ~x5


@pytest.mark.slow
@pytest.mark.servers
@installed
def test_lease_on_the_monotonic_clock_is_not_moved_by_a_wall_clock_fault(store: Path) -> None:
    """The control of the row above: the same faults, the watch timed on the monotonic
    clock they leave alone."""
    # the faults check included: the wall clocks were read back moved
    results, _ = ran(store, 0, "--db", "dynamodb", "--lock", "dynamodb-lease", "--lock-opt",
                     "watch-clock=monotonic", "--nemesis", "clock-client", "--time-limit", "30",
                     "--seed", "1")
    assert check(results, "mutex")["lock-overlap-count"] == 0


@pytest.mark.slow
@pytest.mark.servers
@installed
def test_cas_a_paused_holder_shares_the_lock(store: Path) -> None:
    results, _ = ran(store, 1, "--db", "dynamodb", "--lock", "dynamodb-cas", "--nemesis", "pause",
                     "--time-limit", "30", "--seed", "1")
    assert check(results, "mutex")["resource-interleaving-count"] > 0


@pytest.mark.slow
@pytest.mark.docker
@installed
def test_docker_lease_a_paused_holder_shares_the_lock(store: Path) -> None:
    docker_engine()
    results, run_dir = ran(store, 1, "--backend", "docker", "--db", "dynamodb", "--lock",
                           "dynamodb-lease", "--nemesis", "pause", "--time-limit", "15", "--seed",
                           "1")
    assert check(results, "mutex")["resource-interleaving-count"] > 0
    assert json.loads((run_dir / "test.json").read_text())["spec"]["backend"] == "docker"
    listening = [x for x in (run_dir / "logs" / "n1.log").read_text().splitlines()
                 if x.startswith("Dynalite listening at: http://")]
    assert listening and "//127." not in listening[0], "dynalite ran in its container"


def test_the_install_dir_is_where_the_db_looks(tmp_path: Path) -> None:
    os.environ["LOCK_HARNESS_DYNALITE"] = str(tmp_path)
    try:
        assert cli_path() == tmp_path / "node_modules" / "dynalite" / "cli.js"
        assert DynamoDB.unavailable() is not None
    finally:
        del os.environ["LOCK_HARNESS_DYNALITE"]


def test_the_node_image_installs_the_dynalite_the_db_looks_for() -> None:
    from dbs.dynamodb import DEFAULT_DIR, DYNALITE

    setup = (Path(__file__).parents[1] / "docker" / "rootfs-setup.sh").read_text()
    assert f"npm install --prefix {DEFAULT_DIR} " in setup
    build = (Path(__file__).parents[1] / "docker" / "build_image.py").read_text()
    assert f'"{DEFAULT_DIR}"))' in build
    assert f" {DYNALITE}\n" in setup
    assert f"{DEFAULT_DIR}/node_modules/dynalite/cli.js" in setup
