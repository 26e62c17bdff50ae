"""Real runs on the ssh backend, against `harness hosts up` hosts: containers of the node image
that the harness reaches only through SSH, as it would reach VMs. Skipped (saying why) only when
no Docker engine answers or the node image is missing."""

from __future__ import annotations

import hashlib
import json
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from harness.controller import procs
from harness.controller.backends.ssh.hosts import HostsFile, load
from harness.controller.backends.ssh.transport import Remote
from harness.controller.cleanup import active_dir
from tests.harness_runs import assert_jumped, docker_engine, harness, history
from tests.harness_runs import run as run_harness

pytestmark = [pytest.mark.docker, pytest.mark.servers]
SERVERS = ("redis-server", "java", "etcd")


@pytest.fixture(scope="module")
def hosts(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """Three SSH hosts for the whole module (`harness hosts up 3`), removed at the end."""
    docker_engine()
    path = tmp_path_factory.mktemp("hosts") / "HOSTS.toml"
    proc = harness("hosts", "up", "3", "--file", str(path), timeout=300)
    assert proc.returncode == 0, proc.stderr
    yield path
    harness("hosts", "down", "--file", str(path))


def on_host(hosts: HostsFile, i: int, command: str) -> str:
    """A look at host ``i`` over SSH (the test's own connection)."""
    proc = Remote(hosts.hosts[i]).run(command, check=False, timeout=30)
    return proc.stdout.decode()


def assert_nothing_left(hosts_path: Path, run_dir: Path | None = None) -> None:
    """No run files, claim, rules or servers on any host; no master connection or client
    address of the run on this machine."""
    hosts = load(hosts_path)
    for i, host in enumerate(hosts.hosts):
        state = on_host(hosts, i, "ls -A /var/lib/lock-harness 2>/dev/null; "
                                  "iptables -w -S 2>/dev/null | grep LOCK-HARNESS; "
                                  "ps -eo comm= | grep -E '^(redis-server|java|etcd)$'")
        assert state.strip() == "", f"{host.name} keeps: {state}"
    assert hosts.clients is not None and hosts.clients.interface is not None
    addrs = subprocess.run(["ip", "-o", "-4", "addr", "show", "dev", hosts.clients.interface],
                           capture_output=True, text=True).stdout
    assert len(addrs.strip().splitlines()) == 1, f"client addresses left: {addrs}"
    if run_dir is not None:
        recorded = json.loads((run_dir / "pids.json").read_text())["processes"]
        masters = {n: e for n, e in recorded.items() if n.startswith("ssh-")}
        assert masters, "the ssh master connections are recorded processes of the run"
        assert not [n for n, (pid, started) in masters.items() if procs.owned(pid, started)]


def run(store: Path, hosts: Path, *args: str) -> tuple[int, dict[str, Any], Path, str]:
    return run_harness(store, "--backend", "ssh", "--hosts", str(hosts), *args)


def test_pause_breaks_redis_setnx_over_ssh(hosts: Path, store: Path) -> None:
    code, results, run_dir, out = run(store, hosts, "--nemesis", "pause", "--time-limit",
                                      "10", "--seed", "1")
    assert code == 1, out
    assert "found no ssh master" not in out, "every command rode the run's master connection"
    assert results["checks"]["mutex"]["lock-overlap-count"] > 0
    assert "Redis is starting" in (run_dir / "logs" / "n1.log").read_text(), "log fetched"
    test = json.loads((run_dir / "test.json").read_text())
    assert test["nodes"][0]["host"] == load(hosts).hosts[0].address
    configs = [json.loads(p.read_text()) for p in (run_dir / "clients").glob("c*.json")]
    sources = {c["source"] for c in configs}
    assert len(sources) == len(configs), "each client has an address of its own"
    assert_nothing_left(hosts, run_dir)


def test_no_faults_is_valid_over_ssh(hosts: Path, store: Path) -> None:
    code, results, _, out = run(store, hosts, "--nemesis", "none", "--time-limit", "6",
                                "--seed", "2")
    assert code == 0, out
    assert results["checks"]["stats"]["counts"]["acquire"]["ok"] >= 10


def test_fencing_tokens_keep_the_data_safe_over_ssh(hosts: Path, store: Path) -> None:
    code, results, _, out = run(store, hosts, "--workload", "fenced", "--lock", "redis-fenced",
                                "--nemesis", "pause", "--time-limit", "10", "--seed", "3")
    assert code == 0, out
    assert results["checks"]["fencing"]["stale-accepted-count"] == 0


def test_clock_jump_on_the_host_is_verified_by_redis_time(hosts: Path, store: Path) -> None:
    # Holds of 0.5-1.5 s: the jump takes ~20 ms over ssh, and a 50-300 ms section can end in
    # between (seen in CI: the holder at the jump's start released 13 ms before it landed).
    code, _, run_dir, out = run(store, hosts, "--nemesis", "clock", "--hold", "0.5-1.5",
                                "--time-limit", "8", "--seed", "3")
    assert code == 1, out
    jumps = [op for op in history(run_dir) if op["f"] == "clock" and op["type"] == "info"
             and op["value"] == "start"]
    assert jumps, "a clock jump is recorded"
    assert_jumped(jumps[0])
    heals = [op for op in history(run_dir) if op["f"] == "clock" and op["type"] == "info"
             and op["value"] == "stop"]
    assert heals and abs(heals[0]["detail"]["observed"]["n1"]) < 1.0


def test_the_resource_on_a_host_of_its_own(hosts: Path, store: Path, tmp_path: Path) -> None:
    h = load(hosts)
    text = hosts.read_text()
    last = text.rindex("[[hosts]]")
    split = tmp_path / "RESOURCE.toml"
    split.write_text(text[:last].replace('"HOSTS.keys/', f'"{hosts.parent}/HOSTS.keys/')
                     + text[last:].replace("[[hosts]]", "[resource]").replace('"h3"', '"res"'))
    code, _, run_dir, out = run(store, split, "--nemesis", "partition", "--time-limit", "6",
                                "--seed", "7")
    assert code == 0, out
    test = json.loads((run_dir / "test.json").read_text())
    assert test["resource"]["host"] == h.hosts[2].address
    assert "Redis is starting" in (run_dir / "logs" / "resource.log").read_text()
    assert_nothing_left(hosts, run_dir)


@pytest.mark.slow
def test_zookeeper_partition_over_ssh(hosts: Path, store: Path) -> None:
    """A cut only overlaps two holders when the holder it catches still has more than its 2 s
    session left to hold (critical sections are 1-6 s): about one cut in three here (5 of 14
    in five 15 s runs; the others' holders finished, and only their release timed out). So
    45 s, about 8 cuts: a miss of all of them is then ~3 %, where 15 s missed 2 runs in 7."""
    code, results, run_dir, out = run(store, hosts, "--db", "zookeeper", "--lock", "zookeeper",
                                      "--nemesis", "partition", "--time-limit", "45",
                                      "--seed", "4")
    assert code == 1, out
    assert results["checks"]["mutex"]["lock-overlap-count"] >= 1
    cuts = [op for op in history(run_dir) if op["f"] == "partition" and op["type"] == "info"
            and op["value"] == "start"]
    assert cuts and not any("error" in op for op in cuts), cuts
    for i in range(3):
        assert "QuorumPeer" in (run_dir / "logs" / f"n{i + 1}.log").read_text()
    assert_nothing_left(hosts, run_dir)


@pytest.mark.slow
def test_kill_restarts_the_server_on_its_host(hosts: Path, store: Path) -> None:
    code, _, run_dir, out = run(store, hosts, "--nemesis", "kill", "--persistence",
                                "appendonly", "--time-limit", "8", "--seed", "5")
    assert code == 0, out
    kills = [op for op in history(run_dir) if op["f"] == "kill" and op["type"] == "info"]
    assert kills and not any("error" in op for op in kills), kills
    starts = (run_dir / "logs" / "n1.log").read_text().count("Redis is starting")
    assert starts >= 2, "started, killed, started again: one log"


def test_hosts_reached_through_a_jump_host(hosts: Path, store: Path, tmp_path: Path) -> None:
    """h2 and h3 through h1 (ssh -W), with no client addresses: faults that do not cut one
    client run; one that does is refused before anything starts."""
    h = load(hosts)
    assert h.hosts[0].key is not None and h.hosts[0].known_hosts is not None
    jumped = tmp_path / "JUMP.toml"
    jumped.write_text(f"""
[defaults]
key = "{h.hosts[0].key}"
known-hosts = "{h.hosts[0].known_hosts}"
jump = "root@{h.hosts[0].address}"
[[hosts]]
address = "{h.hosts[1].address}"
[[hosts]]
address = "{h.hosts[2].address}"
""")
    code, _, run_dir, out = run(store, jumped, "--nemesis", "pause", "--time-limit", "6",
                                "--seed", "6")
    assert code == 1, out
    test = json.loads((run_dir / "test.json").read_text())
    assert test["nodes"][0]["host"] == h.hosts[1].address
    code, _, _, out = run(store, jumped, "--nemesis", "partition", "--time-limit", "6")
    assert code == 64 and "[clients]" in out, out


def start_and_wait_ready(hosts: Path, store: Path, *args: str) -> subprocess.Popen[str]:
    """`harness run` in the background, returned once its nodes are ready."""
    argv = [sys.executable, "-m", "harness.cli", "run", "--backend", "ssh", "--hosts",
            str(hosts), "--store", str(store), "--time-limit", "60", *args]
    proc = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    assert proc.stderr is not None
    for line in proc.stderr:
        if "ready on ssh" in line:
            return proc
    raise AssertionError(f"the run ended before it was ready (exit {proc.wait()})")


@pytest.mark.slow
def test_a_busy_host_is_refused_and_a_killed_run_is_cleaned(hosts: Path, store: Path) -> None:
    first = start_and_wait_ready(hosts, store, "--nemesis", "pause")
    try:
        code, _, _, out = run(store, hosts, "--nemesis", "none", "--time-limit", "5")
        assert code == 3 and "is in use by run" in out, out
        down = harness("hosts", "down", "--file", str(hosts))
        assert down.returncode == 3 and "is using the hosts" in down.stderr, down.stderr
        first.send_signal(signal.SIGKILL)
        first.wait(10)
        h = load(hosts)
        assert "redis-server" in on_host(h, 0, "ps -eo comm="), "the dead run left its server"
        proc = harness("clean", "--store", str(store), "--hosts", str(hosts))
        assert proc.returncode == 0, proc.stderr
        assert f"clean --hosts {hosts}: 1 run(s) removed" in proc.stdout, proc.stdout
        assert_nothing_left(hosts)
    finally:
        if first.poll() is None:
            first.kill()
            first.wait()


@pytest.mark.slow
def test_plain_clean_finds_the_hosts_of_a_killed_run(hosts: Path, store: Path) -> None:
    proc = start_and_wait_ready(hosts, store, "--nemesis", "pause")
    proc.send_signal(signal.SIGKILL)
    proc.wait(10)
    out = harness("clean", "--store", str(store))
    assert out.returncode == 0, out.stderr
    assert f"clean --hosts {hosts}: 1 run(s) removed" in out.stdout, out.stdout
    assert_nothing_left(hosts)
    [test_json] = store.glob("*/*/test.json")  # the killed run's (`latest` may not be set)
    run_id = json.loads(test_json.read_text())["run_id"]
    tag = hashlib.sha1(run_id.encode()).hexdigest()[:10]
    assert not list((active_dir() / "ssh").glob(f"{tag}-*")), "the dead master's socket"


@pytest.mark.slow
def test_ctrl_c_stops_and_removes_everything(hosts: Path, store: Path) -> None:
    proc = start_and_wait_ready(hosts, store, "--nemesis", "partition")
    time.sleep(3)
    proc.send_signal(signal.SIGINT)
    assert proc.wait(60) == 3
    assert_nothing_left(hosts, (store / "latest").resolve())


@pytest.mark.slow
def test_a_missing_server_is_installed_with_apt(hosts: Path, store: Path,
                                                tmp_path: Path) -> None:
    """h3 without a redis-server: the run installs Debian's with apt, says so, and runs."""
    h = load(hosts)
    last = h.hosts[2]
    single = tmp_path / "ONE.toml"
    single.write_text(f'[[hosts]]\naddress = "{last.address}"\nkey = "{last.key}"\n'
                      f'known-hosts = "{last.known_hosts}"\n')
    hide = "mv /usr/local/bin/redis-server /usr/local/bin/redis-server.hidden"
    on_host(h, 2, hide)
    try:
        proc = harness("run", "--backend", "ssh", "--hosts", str(single), "--store", str(store),
                       "--nemesis", "none", "--time-limit", "5", timeout=900)
        assert proc.returncode == 0, proc.stderr
        assert "h1: installing redis-server with apt" in proc.stderr, proc.stderr
        assert on_host(h, 2, "command -v redis-server").strip() == "/usr/bin/redis-server"
    finally:
        on_host(h, 2, "test -e /usr/local/bin/redis-server.hidden && mv "
                      "/usr/local/bin/redis-server.hidden /usr/local/bin/redis-server")


def test_hosts_up_and_down_leave_nothing(tmp_path: Path) -> None:
    c = docker_engine()
    path = tmp_path / "TWO.toml"
    proc = harness("hosts", "up", "2", "--file", str(path), timeout=300)
    assert proc.returncode == 0, proc.stderr
    label = load(path).made_by
    assert label is not None
    h = load(path)
    assert [on_host(h, i, "hostname").strip() for i in range(2)] == ["h1", "h2"]
    again = harness("hosts", "up", "2", "--file", str(path))
    assert again.returncode == 64 and "hosts down" in again.stderr, again.stderr
    proc = harness("hosts", "down", "--file", str(path))
    assert proc.returncode == 0, proc.stderr
    assert c.containers.list(all=True, filters={"label": label}) == []
    assert c.networks.list(filters={"label": label}) == []
    assert not path.exists() and not path.with_suffix(".keys").exists()
