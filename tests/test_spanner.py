"""The spanner DB (Google's Cloud Spanner emulator, a real server) and its locks and resource:
the refusals without the emulator and on ssh, the statements each lock sends, the locks and
the resource against a live node (aborts retried, expiry on Spanner's time, the fence of the
lock row's version), a kill that loses every row and says so, and the issue's rows as real runs
(the client-clock row in CI's set; the others slow)."""

from __future__ import annotations

import json
import os
import time
from pathlib import Path
from typing import Any

import pytest

from dbs.spanner import SpannerDB
from harness.core.cluster import Node
from harness.core.locks import LockConfig
from harness.core.resource import Write
from tests.harness_runs import docker_engine, harness, history, ran
from workloads.locks.spanner_lease import SpannerClientClockLock, SpannerLeaseLock, rfc3339

installed = pytest.mark.skipif(SpannerDB.unavailable() is not None,
                               reason=f"spanner: {SpannerDB.unavailable()}: run "
                                      "`harness setup --db spanner`")


def check(results: dict[str, Any], name: str) -> dict[str, Any]:
    return dict(results["checks"][name])


def config(nodes: Any, process: int = 0, ttl: float = 1.0) -> LockConfig:
    return LockConfig(nodes=tuple(nodes), ttl=ttl, op_timeout=1.0, process=process)


# without servers ---------------------------------------------------------------------------
@pytest.mark.parametrize("backend", ["local", pytest.param("docker", marks=pytest.mark.docker)])
def test_a_run_without_the_emulator_is_refused_in_one_line_before_anything_starts(
        tmp_path: Path, backend: str) -> None:
    if backend == "docker":
        docker_engine()
    store = tmp_path / "store"
    proc = harness("run", "--db", "spanner", "--backend", backend, "--store", str(store),
                   "--time-limit", "5",
                   env={**os.environ, "LOCK_HARNESS_SPANNER_EMULATOR": str(tmp_path)})
    assert proc.returncode == 3, proc.stdout + proc.stderr
    lines = [x for x in proc.stderr.splitlines() if x.strip()]
    assert len(lines) == 1 and "the Spanner emulator is not installed" in lines[0], lines
    assert "`harness setup --db spanner`" in lines[0]
    assert not store.exists() or not any(store.rglob("history.jsonl")), "nothing may start"


def test_setup_installs_the_emulator_with_apt_and_setup_sh_and_the_image_leave_it_out(
        ) -> None:
    from harness.controller import packages

    proc = harness("setup", "--db", "spanner", "--dry-run")
    assert proc.returncode == 0, proc.stderr
    apt = [x for x in proc.stdout.splitlines() if "apt-get install" in x]
    assert len(apt) == 1 and " google-cloud-cli-spanner-emulator " in apt[0], proc.stdout
    for image in (False, True):
        assert "google-cloud-cli-spanner-emulator" not in packages.packages(
            packages.builtin_dbs(), image=image)


def test_the_ssh_backend_is_refused_in_one_line(tmp_path: Path) -> None:
    key = tmp_path / "key"
    key.write_text("")
    key.chmod(0o600)
    hosts = tmp_path / "HOSTS.toml"  # a host never reached: refused before anything starts
    hosts.write_text(f'[[hosts]]\naddress = "10.255.255.1"\nkey = "{key}"\n')
    proc = harness("run", "--backend", "ssh", "--hosts", str(hosts), "--db", "spanner",
                   "--nemesis", "none", "--time-limit", "5", "--quiet",
                   "--store", str(tmp_path / "store"))
    lines = [x for x in proc.stderr.splitlines() if x.strip()]
    assert proc.returncode == 3 and len(lines) == 1, proc.stderr
    assert lines[0].startswith("harness: --backend ssh cannot run --db spanner: ")
    assert not any((tmp_path / "store").rglob("history.jsonl")), "nothing may start"


def test_expiry_is_spanners_time_or_the_clients_wall_clock() -> None:
    node = (Node("n1", "127.0.0.1", 9),)
    sql = "SELECT {live} ... SET expires = {expires} WHERE {mine}"
    spanner, params, types = SpannerLeaseLock(config(node)).statement(sql, owner="o", version=3)
    assert spanner.count("CURRENT_TIMESTAMP()") == 2 and "@now" not in spanner
    assert "now" not in params and params["version"] == "3" and params["ms"] == "1000"
    before = time.time()
    client, params, types = SpannerClientClockLock(config(node)).statement(sql)
    assert client.count("@now") == 2 and "CURRENT_TIMESTAMP" not in client
    assert types["now"] == "TIMESTAMP" and params["now"] >= rfc3339(before)
    assert "owner = @owner AND version = @version" in client
    assert rfc3339(0.5) == "1970-01-01T00:00:00.500000Z"


# against a live emulator --------------------------------------------------------------------
@pytest.mark.slow
@pytest.mark.servers
@installed
def test_lease_heartbeats_fences_and_takes_over_on_spanners_time(tmp_path: Path) -> None:
    from tests.one_node import lease_contract, one_node

    with one_node(SpannerDB(), tmp_path) as nodes:
        a, b = SpannerLeaseLock(config(nodes, 0)), SpannerLeaseLock(config(nodes, 1))
        lease_contract(a, b, 2.0, (0.5, 2.5))  # the lease runs out on Spanner's time


@pytest.mark.slow
@pytest.mark.servers
@installed
def test_the_resource_fences_on_the_lock_rows_version_and_a_kill_loses_every_row(
        tmp_path: Path) -> None:
    from harness.controller.backends.local import LocalBackend
    from tests.one_node import nodes_up
    from workloads.resources.spanner import SpannerResource

    db = SpannerDB()
    with nodes_up(LocalBackend, db, tmp_path) as (backend, nodes):
        lock = SpannerLeaseLock(config(nodes))
        old = lock.acquire(2.0)
        assert old is not None
        old.handle.stop.set()
        time.sleep(1.2)  # the lease is past on Spanner's time
        new = SpannerLeaseLock(config(nodes, 1)).acquire(2.0)
        assert new is not None and new.token == old.token + 1
        res = SpannerResource(nodes[0].host, nodes[0].port, mode="fenced")
        assert res.write(Write(1, 1, "enter", token=new.token)).accepted
        assert not res.write(Write(0, 1, "enter", token=old.token)).accepted, "stale"
        assert [e["accepted"] for e in res.read_log()] == [True, False]
        assert res.read_state()["locks"]["lock"]["last_fencing_token"] == new.token
        backend.kill(nodes[0])
        assert db.repair_before_restart(nodes[0], tmp_path, tmp_path) == [
            "in memory: every row was lost; the instance, database and tables were made "
            "anew, empty, at the restart"]
        backend.start(nodes[0])
        backend.wait_ready(nodes[0], 30)
        assert res.read_log() == [], "the restarted emulator has the tables, empty"
        again = lock.acquire(2.0)
        assert again is not None and again.token == 1, "the version starts over: state lost"


# the rows -----------------------------------------------------------------------------
@pytest.mark.servers
@installed
@pytest.mark.parametrize(("lock", "code"), [
    ("spanner-lease-client-clock", 1),
    pytest.param("spanner-lease", 0, marks=pytest.mark.slow)])
def test_a_waiters_fast_clock_breaks_the_client_clock_lease_only(store: Path, lock: str,
                                                                 code: int) -> None:
    """CI's row (the first): a waiter's wall clock at 5x sees the holder's expiry, written
    on the holder's true clock, past while the holder still works under it; Spanner's time
    is not moved (the faults check included: the clocks were read back moved)."""
    results, run_dir = ran(store, code, "--db", "spanner", "--lock", lock, "--nemesis",
                           "clock-client", "--time-limit", "12", "--seed", "1")
    assert (check(results, "mutex")["lock-overlap-count"] > 0) == (code == 1)
    assert any(op["f"] == "clock-client" and op.get("value") == "start"
               for op in history(run_dir))


@pytest.mark.slow
@pytest.mark.servers
@installed
def test_a_kill_of_the_emulator_is_invalid_and_names_the_lost_state(store: Path) -> None:
    _, run_dir = ran(store, 1, "--db", "spanner", "--lock", "spanner-lease", "--nemesis", "kill",
                     "--resource", "redis", "--time-limit", "15", "--seed", "1")
    kills = [op for op in history(run_dir) if op["f"] == "kill" and op["type"] != "invoke"
             and op.get("value") == "stop"]
    assert kills and all("every row was lost" in str(op.get("detail")) for op in kills), kills


@pytest.mark.servers
@pytest.mark.docker
@installed
def test_docker_runs_this_hosts_emulator_in_its_container_and_a_kill_loses_every_row(
        store: Path) -> None:
    """The node image lacks Google's package: the container runs this host's emulator,
    mounted read-only; killed and restarted in its container, it loses every row, said."""
    c = docker_engine()
    _, run_dir = ran(store, 1, "--backend", "docker", "--db", "spanner", "--lock", "spanner-lease",
                     "--nemesis", "kill", "--resource", "redis", "--time-limit", "15", "--seed",
                     "1")
    test = json.loads((run_dir / "test.json").read_text())
    assert test["spec"]["backend"] == "docker"
    listening = [x for x in (run_dir / "logs" / "n1.log").read_text().splitlines()
                 if "REST server listening at" in x]
    assert len(listening) >= 2 and not any(" 127." in x for x in listening), listening
    kills = [op for op in history(run_dir) if op["f"] == "kill" and op["type"] != "invoke"
             and op.get("value") == "stop"]
    assert kills and all("every row was lost" in str(op.get("detail")) for op in kills), kills
    mine = {"label": f"lock-harness.run={test['run_id']}"}
    assert not c.containers.list(all=True, filters=mine), "the run removed its containers"

