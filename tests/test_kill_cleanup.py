"""Cleanup after SIGKILL, for every backend and DB (issue 31): a ``harness run`` killed with -9
while a partition is in force leaves its servers, clients, rules, containers and networks
behind; ``harness clean`` must remove every one of them.

What the run recorded is read before the kill's remains are cleaned: its pids (and their
descendants: PostgreSQL's backends, a JVM under a start script), its iptables rules in the
project's chain, its labelled containers and networks and the mounts of those containers. The
test first asserts each of them is there (so that "nothing left" means clean removed it),
then that nothing is left. Local Redis and the link proxy have their own such tests
(``test_runs.py``, ``test_network_runs.py``); the ssh backend's are slow
(``test_ssh_backend.py``). ``harness clean --store`` touches only that store's runs: what the
tests use, beside one another.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import uuid
from pathlib import Path
from typing import Any

import pytest

from harness.controller import syncfs_mounts
from harness.controller.cleanup import mark_active
from harness.controller.places import scratch_dir
from harness.controller.procs import ProcessTable
from harness.controller.store import RunDir
from harness.core.atomic import write_json
from tests.harness_runs import alive, docker_engine, harness, killed_mid_run, own_rules

pytestmark = [pytest.mark.servers]

PARTITION_ON = '"type":"info","f":"partition","value":"start"'
# The holder cut off at 0.5 s and for the rest of the run: the kill lands while the cut is on,
# as early as the run allows (a drawn schedule's first step may come seconds later).
SCHEDULE = '[[step]]\nat = 0.5\nfault = "partition"\nduration = 100\n'


def descendants(pids: set[int]) -> set[int]:
    """Every live process below one of ``pids`` (by parent pid, transitively)."""
    parent: dict[int, int] = {}
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        try:
            stat = Path(f"/proc/{name}/stat").read_text()
        except OSError:
            continue
        parent[int(name)] = int(stat.rsplit(")", 1)[1].split()[1])
    out: set[int] = set()
    frontier = set(pids)
    while frontier:
        frontier = {p for p, pp in parent.items() if pp in frontier and p not in out}
        out |= frontier
    return out


def recorded_pids(run_dir: Path) -> set[int]:
    processes = json.loads((run_dir / "pids.json").read_text())["processes"]
    return {int(pid) for pid, _ in processes.values()}


def mounts() -> str:
    return Path("/proc/self/mounts").read_text()


def labelled(client: Any, run_id: str) -> tuple[list[Any], list[Any]]:
    selector = f"lock-harness.run={run_id}"
    return (client.containers.list(all=True, filters={"label": selector}),
            client.networks.list(filters={"label": selector}))


CASES = [
    pytest.param(("--db", "zookeeper"), id="zookeeper"),
    pytest.param(("--db", "etcd"), id="etcd"),
    pytest.param(("--db", "postgres", "--lock", "pg-row"), id="postgres"),
    pytest.param(("--backend", "docker"), id="docker-redis", marks=pytest.mark.docker),
]


@pytest.mark.parametrize("args", CASES)
def test_clean_removes_everything_a_run_killed_with_sigkill_left(
        args: tuple[str, ...], store: Path, tmp_path: Path) -> None:
    docker = "docker" in args
    client = docker_engine() if docker else None
    config = tmp_path / "cut.toml"
    config.write_text(SCHEDULE)
    run_dir = killed_mid_run(store, *args, "--config", str(config), until=PARTITION_ON)
    test = json.loads((run_dir / "test.json").read_text())
    run_id = test["run_id"]  # with its random tail: what clean selects the run's leftovers by
    assert run_id == f"{run_dir.parent.name}/{run_dir.name}", run_id
    assert re.fullmatch(r"\d{8}T\d{6}-[0-9a-f]{6}", run_dir.name), run_dir.name
    pids = recorded_pids(run_dir)
    below = descendants(pids)
    running = {p for p in pids | below if alive(p)}
    assert {p for p in pids if alive(p)}, "the killed run's servers and clients should run on"
    scratch = scratch_dir(run_id)  # PostgreSQL's clusters, owned by its own user
    if "postgres" in args:
        assert scratch.is_dir(), f"the killed run's {scratch} stays"
    if docker:
        containers, networks = labelled(client, run_id)
        assert containers and networks, "the killed run's containers and network stay"
        merged = [c.attrs["GraphDriver"]["Data"].get("MergedDir") for c in containers]
        assert any(m and m in mounts() for m in merged), "the containers' root mounts"
    else:
        assert own_rules(run_dir), "the partition's rules stay after the kill"
        merged = []

    cleaned = harness("clean", "--store", str(store))
    assert cleaned.returncode == 0, cleaned.stdout + cleaned.stderr

    left = sorted(p for p in running if alive(p))
    assert not left, f"processes of the run left after clean: {left}"
    assert not own_rules(run_dir), "iptables rules of the run left after clean"
    if client is not None:
        assert labelled(client, run_id) == ([], []), "containers or networks left after clean"
    table = mounts()
    assert str(run_dir) not in table
    assert not [m for m in merged if m and m in table], "container mounts left after clean"
    assert not scratch.exists(), f"{scratch} left after clean"


LOSS = '[[step]]\nat = 0.5\nfault = "power-loss"\nduration = 100\n'


@pytest.mark.skipif(syncfs_mounts.unavailable() is not None, reason="no FUSE here")
def test_clean_unmounts_the_power_loss_filesystem_a_killed_run_left(
        store: Path, tmp_path: Path) -> None:
    config = tmp_path / "loss.toml"
    config.write_text(LOSS)
    run_dir = killed_mid_run(store, "--db", "redis", "--persistence", "everysec", "--config",
                             str(config), until='"type":"info","f":"power-loss","value":"start"')
    mounted = json.loads((run_dir / "syncfs" / "mounts.json").read_text())
    assert list(mounted) == ["n1"]
    assert syncfs_mounts.mounted(Path(mounted["n1"])), "the killed run's mount stays"
    fs_pid = json.loads((run_dir / "pids.json").read_text())["processes"]["syncfs-n1"][0]
    assert alive(fs_pid), "and so does its filesystem's process"

    cleaned = harness("clean", "--store", str(store))
    assert cleaned.returncode == 0, cleaned.stdout + cleaned.stderr
    assert not syncfs_mounts.mounted(Path(mounted["n1"])), "the mount left after clean"
    assert not alive(fs_pid), "the filesystem's process left after clean"
    assert str(run_dir) not in mounts()



def test_clean_of_a_store_leaves_what_another_store_made(tmp_path: Path) -> None:
    """Two dead runs (their controller gone, a server each left running), in stores a and b:
    `harness clean --store a` ends a's and leaves b's, process and mark, to `--store b`."""
    gone = subprocess.Popen(["true"])
    gone.wait()
    tag = uuid.uuid4().hex[:8]
    servers, markers = {}, {}
    for store in ("a", "b"):
        run = RunDir(tmp_path / store / "t" / tag)
        run.path.mkdir(parents=True)
        servers[store] = ProcessTable(run.pids).spawn("n1", ["sleep", "120"], run.path / "n1.log")
        markers[store] = mark_active(run, f"t-{store}/{tag}")
        write_json(markers[store], {**json.loads(markers[store].read_text()),
                                    "controller": gone.pid, "controller_started": 1})
    try:
        a = harness("clean", "--store", str(tmp_path / "a"))
        assert a.returncode == 0, a.stderr
        assert "clean: 1 run(s) cleaned" in a.stdout, a.stdout
        assert f"killed n1 (pid {servers['a'].pid}) of t-a/{tag}" in a.stdout, a.stdout
        assert not alive(servers["a"].pid) and not markers["a"].exists()
        assert alive(servers["b"].pid) and markers["b"].exists()
        b = harness("clean", "--store", str(tmp_path / "b"))
        assert "clean: 1 run(s) cleaned" in b.stdout, b.stdout
        assert not alive(servers["b"].pid) and not markers["b"].exists()
    finally:
        for server in servers.values():
            server.kill()
            server.wait()
        for marker in markers.values():
            marker.unlink(missing_ok=True)
