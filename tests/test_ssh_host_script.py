"""The ssh backend's host-side script (``ssh_host.sh``), run here the way a host runs it
(``sh -s -- COMMAND ...`` with the script on stdin), on real processes of this machine."""

from __future__ import annotations

import base64
import contextlib
import json
import os
import shutil
import signal
import subprocess
import time
from pathlib import Path

import pytest

from harness.controller.backends.ssh.backend import parse_runs
from harness.controller.backends.ssh.transport import HELPER
from harness.controller.procs import start_time

SH = shutil.which("sh") or "/bin/sh"

# Commands the run-state commands need, and no iptables: on this machine the local backend's
# chain must not be touched by a test of the hosts' script.
TOOLS = ("sh", "cat", "mkdir", "rm", "rmdir", "basename", "dirname", "tr", "chmod", "sleep", "cut",
         "mv", "base64", "tail", "awk", "grep", "sed", "setsid", "nohup", "env")


def helper(*args: str, path: str | None = None) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PATH": path} if path else None
    return subprocess.run([SH, "-s", "--", *args], input=HELPER.decode(), text=True,
                          capture_output=True, timeout=30, env=env)


def out(*args: str) -> str:
    proc = helper(*args)
    assert proc.returncode == 0, proc.stderr
    return proc.stdout.strip()


def state(pid: int) -> str:
    return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]


def stopped(pid: int, timeout: float = 2.0) -> bool:
    """A signal is delivered asynchronously: wait a moment for the process to stop."""
    deadline = time.monotonic() + timeout
    while state(pid) != "T" and time.monotonic() < deadline:
        time.sleep(0.01)
    return state(pid) == "T"


def test_a_server_is_started_in_its_own_session_and_signalled_by_its_recorded_pid(
        tmp_path: Path) -> None:
    pidfile, log = tmp_path / "n1" / "server.pid", tmp_path / "logs" / "n1.log"
    pid_text = out("start", str(pidfile), str(log), "sleep", "60")
    pid, started = map(int, pid_text.split())
    try:
        assert start_time(pid) == started
        assert os.getsid(pid) == pid, "a session of its own"
        assert out("running", str(pidfile)) == "yes"
        assert out("signal", str(pidfile), "STOP") == "sent"
        assert stopped(pid)
        assert out("signal", str(pidfile), "CONT") == "sent"
        assert not stopped(pid, timeout=0.2)
        assert out("stop", str(pidfile), "50") == "stopped"
        assert out("running", str(pidfile)) == "no"
        assert out("signal", str(pidfile), "STOP") == "gone"
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)


def test_a_recycled_pid_is_never_signalled(tmp_path: Path) -> None:
    """A pid file whose start time is not the process's own names some other process."""
    other = subprocess.Popen(["sleep", "60"])
    try:
        started = start_time(other.pid)
        assert started is not None
        pidfile = tmp_path / "server.pid"
        pidfile.write_text(f"{other.pid} {started - 1}\n")
        assert out("running", str(pidfile)) == "no"
        assert out("signal", str(pidfile), "KILL") == "gone"
        assert out("kill", str(pidfile)) == "gone"
        assert other.poll() is None, "the other process lives on"
    finally:
        other.kill()
        other.wait()


def test_stop_escalates_to_sigkill_and_kill_waits_until_gone(tmp_path: Path) -> None:
    pidfile, log = tmp_path / "server.pid", tmp_path / "server.log"
    out("start", str(pidfile), str(log), "sh", "-c", "trap '' TERM; sleep 60")
    t0 = time.monotonic()
    assert out("stop", str(pidfile), "5") == "killed"
    assert time.monotonic() - t0 > 0.4  # it gave SIGTERM its 0.5 s first (how long in all:
    assert out("running", str(pidfile)) == "no"  # bench/bench_test_timings.py stop)
    out("start", str(pidfile), str(log), "sleep", "60")
    assert out("kill", str(pidfile)) == "killed"
    assert out("running", str(pidfile)) == "no"


def test_a_program_that_is_not_there_fails_with_its_log(tmp_path: Path) -> None:
    pidfile, log = tmp_path / "server.pid", tmp_path / "server.log"
    helper("start", str(pidfile), str(log), "no-such-server-program")
    deadline = time.monotonic() + 5
    while out("running", str(pidfile)) == "yes" and time.monotonic() < deadline:
        time.sleep(0.05)
    assert out("running", str(pidfile)) == "no"
    assert "no-such-server-program" in log.read_text()


def test_files_missing_commands_and_clock_offsets(tmp_path: Path) -> None:
    files = {"a.conf": "bind 10.0.0.1\nport 1\n", "myid": "3\n"}
    args = [x for k, v in files.items() for x in (k, base64.b64encode(v.encode()).decode())]
    out("put", str(tmp_path / "n1"), *args)
    assert {p.name: p.read_text() for p in (tmp_path / "n1").iterdir()} == files
    assert out("missing", "sh", "/bin", "no-such-command", "/no/such/file").split() == [
        "no-such-command", "/no/such/file"]
    out("clock", str(tmp_path / "faketime"), "+60s")
    assert (tmp_path / "faketime").read_text() == "+60s\n"


@pytest.fixture
def no_iptables_path(tmp_path: Path) -> str:
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    for tool in TOOLS:
        found = shutil.which(tool)
        assert found, tool
        (bin_dir / tool).symlink_to(found)
    return str(bin_dir)


def test_one_run_claims_a_host_and_teardown_leaves_nothing(
        tmp_path: Path, no_iptables_path: str) -> None:
    base = tmp_path / "lock-harness"
    marker = json.dumps({"run_id": "t/1", "comment": "lock-harness:t:1"})

    def run(*args: str) -> str:
        proc = helper(*args, path=no_iptables_path)
        assert proc.returncode == 0, proc.stderr
        return proc.stdout.strip()

    assert run("claim", str(base), "t__1", marker) == "claimed"
    assert run("claim", str(base), "t__2", "{}") == "busy t__1"
    runs, claim = parse_runs(run("runs", str(base)))
    assert runs == {"t__1": {"run_id": "t/1", "comment": "lock-harness:t:1"}}
    assert claim == "t__1"
    node = base / "runs" / "t__1" / "nodes" / "n1"
    run("start", str(node / "server.pid"), str(base / "runs/t__1/logs/n1.log"), "sleep", "60")
    pid = int((node / "server.pid").read_text().split()[0])
    run("teardown", str(base), "t__1", "lock-harness:t:1")
    assert not base.exists(), list(base.rglob("*"))
    deadline = time.monotonic() + 5
    while start_time(pid) is not None and time.monotonic() < deadline:
        time.sleep(0.05)
    assert start_time(pid) is None, "the run's server was stopped"


def test_a_claim_whose_run_is_gone_is_removed_as_an_orphan(
        tmp_path: Path, no_iptables_path: str) -> None:
    base = tmp_path / "lock-harness"
    (base / "claim").mkdir(parents=True)
    (base / "claim" / "run").write_text("gone__1\n")
    proc = helper("orphans", str(base), path=no_iptables_path)
    assert proc.returncode == 0, proc.stderr
    assert not base.exists()
