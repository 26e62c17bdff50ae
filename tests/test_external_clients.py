"""Lock programs against real servers: the named clients (Curator, etcd's Go Mutex, npm's
redlock and redis-semaphore), the Node example of docs/clients.md, and programs that break.

A named client that is not built is skipped, saying how to build it (`python -m
workloads.external.builds NAME`; setup.sh does). Runs are 6 to 15 s of workload; the slowest
are marked slow."""

from __future__ import annotations

import os
import re
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from harness.controller import netfilter
from harness.core.journal import read_journal
from tests.consensus_runs import RunResult, run
from tests.external_programs import redis_lock, toy
from workloads.external import builds

REPO = Path(__file__).resolve().parents[1]

pytestmark = [
    pytest.mark.servers,
    pytest.mark.skipif(shutil.which("redis-server") is None, reason="redis-server missing"),
]
needs_root = pytest.mark.skipif(os.geteuid() != 0, reason="iptables needs root")


def built(folder: str) -> Path:
    out = builds.built(folder)
    if out is None:
        pytest.skip(f"client {folder} is not built: {builds.not_built_reason(folder)}")
    return out


def infos(r: RunResult) -> list[dict[str, Any]]:
    return [op for op in r.history if op.get("f") == "acquire" and op["type"] == "info"]


# programs that break ---------------------------------------------------------------------------
def test_a_program_that_exits_at_start_stops_the_run_in_one_line(
        store: Path, tmp_path: Path) -> None:
    r = run(store, "--lock", f"exec:{toy(tmp_path, 'exit-at-start')}", "--nemesis", "none",
            "--time-limit", "6", "--seed", "1")
    assert r.code == 3, r.output
    lines = [x for x in r.output.splitlines() if x.startswith("harness:")]
    assert len(lines) == 1, r.output
    assert "exited with code 3 before it answered hello" in lines[0]
    assert "its last words: toy: cannot reach the lock service" in lines[0]


@pytest.mark.parametrize(("brk", "words"), [
    ("exit", "exited with code 7 before it answered acquire (its last words: redis-toy: "
             "giving up)"),
    ("garbage", "broke the protocol (acquire): not JSON: Exception in thread main"),
])
def test_a_program_that_breaks_mid_run_gives_info_ops_and_the_run_completes(
        store: Path, tmp_path: Path, brk: str, words: str) -> None:
    r = run(store, "--lock", f"exec:{redis_lock(tmp_path, brk, after=3)}", "--nemesis", "none",
            "--time-limit", "8", "--seed", "1")
    assert r.code == 0, r.output  # no overlap: breaking is not a verdict
    broken = infos(r)
    assert broken and any(words in op["error"] for op in broken), broken[:3]
    assert not [op for op in r.history if op["type"] == "fail" and op["f"] == "release"]
    logs = "".join((r.run_dir / "logs" / f"client-{p}.log").read_text() for p in range(5))
    assert "(start #2)" in logs  # killed, then started again at the next acquire
    grants = [op for op in r.history if op["f"] == "acquire" and op["type"] == "ok"]
    assert len(grants) > 5 * 3  # more than each program's first life served


def test_a_programs_fail_keeps_its_error_text_in_the_history(
        store: Path, tmp_path: Path) -> None:
    """A `fail` answer's error is what the history says: an acquire's after "timeout: ", a
    release's after "not-held: " (which the checkers read as the lock lost)."""
    r = run(store, "--lock", f"exec:{toy(tmp_path, 'say-why')}", "--nemesis", "none",
            "--time-limit", "3", "--seed", "1")
    fails = {(op["f"], op["error"]) for op in r.history if op["type"] == "fail"}
    assert fails == {("acquire", "timeout: toy: held by another owner"),
                     ("release", "not-held: toy: the lease lapsed before release")}, r.output


@pytest.mark.slow
def test_a_program_that_hangs_on_acquire_is_given_up_on(store: Path, tmp_path: Path) -> None:
    """Acquire timeout 5 s + 10 s to answer: then info, killed, started again."""
    r = run(store, "--lock", f"exec:{redis_lock(tmp_path, 'hang', after=2)}", "--nemesis",
            "none", "--time-limit", "20", "--seed", "1")
    assert r.code == 0, r.output
    assert any("did not answer acquire within 15.0 s" in op["error"] for op in infos(r))


def docs_example() -> str:
    text = (REPO / "docs" / "clients.md").read_text()
    match = re.search(r"```javascript\n(.*?)```", text, re.S)
    assert match, "docs/clients.md shows a complete client"
    return match.group(1)


def test_the_node_client_of_the_docs_is_a_lock(store: Path, tmp_path: Path,
                                               monkeypatch: pytest.MonkeyPatch) -> None:
    out = built("node-redlock")  # for its ioredis
    program = tmp_path / "redis-lock.js"
    program.write_text(docs_example())
    program.chmod(0o755)
    monkeypatch.setenv("NODE_PATH", str(out / "app" / "node_modules"))
    r = run(store, "--db", "redis", "--lock", f"exec:{program}", "--nemesis", "none",
            "--time-limit", "6", "--seed", "1")
    assert r.code == 0, r.output
    tokens = [op["token"] for op in r.history if op["f"] == "acquire" and op["type"] == "ok"]
    assert len(tokens) >= 10 and tokens == sorted(tokens)


# the named clients -----------------------------------------------------------------------------
@pytest.mark.parametrize(("db", "lock", "validity"), [
    ("zookeeper", "curator", None),  # a session: no promise of a time
    ("etcd", "go-etcd-mutex", 2.0),  # the session's lease TTL
])
def test_a_holder_paused_past_its_session_breaks_the_consensus_clients(
        store: Path, db: str, lock: str, validity: float | None) -> None:
    """Jepsen's etcd 3.4.3 finding, with the libraries' own clients: a paused holder's session
    expires, the next in line gets the lock, the holder wakes up believing it holds it."""
    built(lock)
    r = run(store, "--db", db, "--lock", lock, "--nemesis", "pause", "--time-limit", "15",
            "--seed", "1")
    assert r.code == 1, r.output
    assert r.check("mutex")["lock-overlap-count"] >= 1
    tokens = [g["token"] for g in r.grants()]
    assert tokens and all(isinstance(t, int) for t in tokens) and tokens == sorted(tokens)
    assert all(g["value"]["validity"] == validity for g in r.grants())


def test_npm_redlock_is_a_mutex_without_faults(store: Path) -> None:
    built("node-redlock")
    r = run(store, "--db", "redis-masters", "--lock", "node-redlock", "--nemesis", "none",
            "--time-limit", "8", "--seed", "1")
    assert r.code == 0, r.output
    grants = r.grants()
    assert len(grants) >= 10
    assert all(0 < g["value"]["validity"] <= 2.0 for g in grants)  # ttl - elapsed - drift


def test_redis_semaphore_breaks_when_its_holder_pauses(store: Path) -> None:
    built("node-redlock")
    r = run(store, "--db", "redis", "--lock", "redis-semaphore", "--nemesis", "pause",
            "--time-limit", "12", "--seed", "1")
    assert r.code == 1, r.output
    assert r.check("mutex")["resource-interleaving-count"] >= 1


@pytest.mark.slow
@pytest.mark.parametrize(("db", "lock"), [("zookeeper", "curator"), ("etcd", "go-etcd-mutex")])
def test_their_tokens_fence_off_the_paused_holder(store: Path, db: str, lock: str) -> None:
    built(lock)
    r = run(store, "--db", db, "--lock", lock, "--workload", "fenced", "--nemesis", "pause",
            "--time-limit", "15", "--seed", "1")
    assert r.code == 0, r.output
    fencing = r.check("fencing")
    assert fencing["stale-accepted-count"] == 0 and fencing["token-order-violation-count"] == 0


@pytest.mark.slow
def test_npm_redlock_breaks_when_the_masters_clocks_jump(store: Path) -> None:
    built("node-redlock")
    r = run(store, "--db", "redis-masters", "--lock", "node-redlock", "--nemesis", "clock",
            "--time-limit", "15", "--seed", "1")
    assert r.code == 1, r.output


# faults reach the program ---------------------------------------------------------------------
def background(store: Path, *args: str) -> subprocess.Popen[bytes]:
    return subprocess.Popen([sys.executable, "-m", "harness.cli", "run", "--store", str(store),
                             "--quiet", *args], cwd=REPO, stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL)


def wait_for_fault(store: Path, f: str, value: str, timeout: float = 40.0
                   ) -> tuple[Path, dict[str, Any]]:
    """The run directory and the nemesis's completion line of the first ``f`` ``value``."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        journal = store / "latest" / "journals" / "nemesis.jsonl"
        if journal.exists():  # being written: read_journal stops at its reserved zeros
            for op in read_journal(journal):
                if op["f"] == f and op["value"] == value and op["type"] != "invoke":
                    return (store / "latest").resolve(), op
        time.sleep(0.1)
    raise AssertionError(f"no {f} {value} within {timeout} s")


def program_pid(run_dir: Path, process: int, timeout: float = 15.0) -> int:
    """The pid of client ``process``'s program, once it said it is ready."""
    deadline = time.monotonic() + timeout
    while True:
        log = (run_dir / "logs" / f"client-{process}.log").read_text()
        found = re.findall(r"external lock: .* \(pid (\d+)\) ready", log)
        if found or time.monotonic() > deadline:
            assert found, f"client {process}'s program never said it was ready"
            return int(found[-1])
        time.sleep(0.1)


def thread_states(pid: int) -> set[str]:
    states = set()
    for task in Path(f"/proc/{pid}/task").iterdir():
        try:
            states.add((task / "stat").read_text().rsplit(")", 1)[1].split()[0])
        except OSError:  # a thread that just ended
            continue
    return states


def settle(pid: int, want: set[str], timeout: float = 2.0) -> set[str]:
    """The states of ``pid``'s threads once they are ``want`` (signals take a moment)."""
    deadline = time.monotonic() + timeout
    while (states := thread_states(pid)) != want and time.monotonic() < deadline:
        time.sleep(0.05)
    return states


def test_a_pause_freezes_the_program_with_every_thread(store: Path) -> None:
    """The JVM of the paused client, and each of its threads, is stopped: Curator's heartbeats
    too (the process group is stopped, not the client's pid alone)."""
    built("curator")
    proc = background(store, "--db", "zookeeper", "--lock", "curator", "--nemesis", "pause",
                      "--time-limit", "15", "--seed", "1")
    try:
        run_dir, op = wait_for_fault(store, "pause", "start")
        process = int(op["targets"][0].removeprefix("c"))
        jvm = program_pid(run_dir, process)
        assert settle(jvm, {"T"}) == {"T"}
        assert len(list(Path(f"/proc/{jvm}/task").iterdir())) > 10  # a JVM's threads
        others = [program_pid(run_dir, p) for p in range(5) if p != process]
        assert all("T" not in thread_states(pid) for pid in others)
    finally:  # the paused holder's session expires, the next in line is granted: INVALID
        assert proc.wait(90) == 1  # (suites/nightly.toml; 2 of 2 runs here: 2 overlaps each)


@needs_root
def test_a_partition_cuts_the_programs_traffic(store: Path) -> None:
    """The cut client's program connects through relays leaving from the client's address:
    while it is cut off, none of its lock ops completes (they wait, or end info); the others'
    go on."""
    built("curator")
    r = run(store, "--db", "zookeeper", "--lock", "curator", "--workload", "fenced",
            "--nemesis", "partition", "--time-limit", "12", "--seed", "1")
    assert r.code == 0, r.output
    assert r.test["faults"], "a partition should have run"
    for fault in r.test["faults"]:
        victim = int(fault["targets"][0].removeprefix("c"))
        start, stop = (fault["start"] + 0.5) * 1e9, fault["stop"] * 1e9
        done = [op for op in r.history if op["process"] == victim and start < op["time"] < stop
                and op["f"] in ("acquire", "release") and op["type"] in ("ok", "fail")]
        assert not done, f"client {victim} completed lock ops while cut off: {done}"
    grants = [g for g in r.grants() if g["process"] not in
              {int(f["targets"][0].removeprefix("c")) for f in r.test["faults"]}]
    assert grants, "the other clients should go on getting the lock"
    assert not [x for x in netfilter.rules() if r.test["run_id"].replace("/", ":") in x]


@pytest.mark.slow
def test_crash_client_kills_the_program_with_its_client(store: Path) -> None:
    built("node-redlock")
    proc = background(store, "--db", "redis-masters", "--lock", "node-redlock", "--nemesis",
                      "crash-client", "--nemesis-opt", "crash-step=holding", "--time-limit",
                      "15", "--seed", "1")
    try:
        run_dir, op = wait_for_fault(store, "crash-client", "start")
        process = int(op["targets"][0].removeprefix("c"))
        node = program_pid(run_dir, process)
        time.sleep(0.5)
        gone = not Path(f"/proc/{node}").exists() or Path(
            f"/proc/{node}/stat").read_text().rsplit(")", 1)[1].split()[0] == "Z"
        assert gone, f"node (pid {node}) outlived its crashed client {process}"
    finally:
        if proc.poll() is None:
            proc.send_signal(signal.SIGTERM)
        proc.wait(90)


@pytest.mark.docker
@pytest.mark.slow
@pytest.mark.parametrize(("db", "lock"), [("zookeeper", "curator"), ("etcd", "go-etcd-mutex")])
@pytest.mark.usefixtures("docker_client")
def test_the_consensus_clients_break_the_same_way_on_docker(store: Path, db: str,
                                                            lock: str) -> None:
    """Nodes in containers, clients (and their programs, and relays) on the host."""
    built(lock)
    r = run(store, "--backend", "docker", "--db", db, "--lock", lock, "--nemesis", "pause",
            "--time-limit", "15", "--seed", "1")
    assert r.code == 1, r.output
    assert r.check("mutex")["lock-overlap-count"] >= 1


# no quiet skips where the clients must be built -----------------------------------------------
SKIPPING = '''
import pytest

def test_client():
    pytest.skip("client curator is not built: run python -m workloads.external.builds curator")

@pytest.mark.skipif(True, reason="etcd missing: run `bash setup.sh`")
def test_server():
    pass

@pytest.mark.skipif(True, reason="iptables needs root")
def test_root():
    pass
'''


def test_a_client_or_server_that_is_missing_fails_where_it_is_required(tmp_path: Path) -> None:
    """tests/conftest.py: a skip for an unbuilt client fails under --harness-require-clients,
    any other under --harness-require-servers (CI passes both), but a skip of a test that
    needs root: CI runs as root (setup.sh)."""
    (tmp_path / "test_skipping.py").write_text(SKIPPING)

    def pytest_(*options: str) -> tuple[int, str]:
        proc = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider",
                               "-p", "tests.conftest", "--rootdir", str(tmp_path),
                               str(tmp_path / "test_skipping.py"), *options],
                              cwd=REPO, capture_output=True, text=True, timeout=120)
        summary = re.sub(r" in [\d.]+s.*", "", proc.stdout.splitlines()[-1])
        return proc.returncode, summary

    assert pytest_() == (0, "3 skipped")
    # the client's skip fails in the test, the server's in its setup (an error), root's stays
    assert pytest_("--harness-require-clients", "--harness-require-servers") == (
        1, "1 failed, 1 skipped, 1 error")
