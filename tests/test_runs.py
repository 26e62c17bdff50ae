"""Real short runs on the local backend: real redis-server processes on loopback, real client
processes, real SIGSTOP / SIGKILL / iptables. Each run is at most ~12 s of workload."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from harness.controller.store import RunDir
from tests.harness_runs import alive, cleaned, harness, history, killed_mid_run, own_rules, run

pytestmark = pytest.mark.servers

needs_redis = pytest.mark.skipif(shutil.which("redis-server") is None,
                                 reason="redis-server missing: run `bash setup.sh`")
needs_root = pytest.mark.skipif(os.geteuid() != 0, reason="iptables needs root")


@needs_redis
def test_no_faults_is_valid(store: Path) -> None:
    code, results, _, out = run(store, "--nemesis", "none", "--time-limit", "6", "--seed", "1")
    assert code == 0, out
    assert results["valid"] is True
    assert results["checks"]["stats"]["counts"]["acquire"]["ok"] >= 10


@needs_redis
def test_pausing_the_holder_breaks_redis_setnx_and_check_reproduces_it(store: Path) -> None:
    code, results, run_dir, out = run(store, "--nemesis", "pause", "--time-limit", "10",
                                      "--seed", "1")
    assert code == 1, out
    m = results["checks"]["mutex"]
    assert m["valid"] is False
    first = m["lock-overlaps"][0]
    assert len(set(first["processes"])) == 2
    assert first["first"]["acquired"] < first["second"]["acquired"]
    assert "acquired at" in first["explanation"]
    assert m["resource-interleaving-count"] >= 1
    history = [json.loads(x) for x in (run_dir / "history.jsonl").read_text().splitlines()]
    assert any(op["process"] == "nemesis" and op["f"] == "pause" for op in history)
    saved = (run_dir / "results.json").read_text()
    again = harness("check", str(run_dir))
    assert again.returncode == 1
    assert (run_dir / "results.json").read_text() == saved


@needs_redis
def test_fencing_keeps_the_resource_safe(store: Path) -> None:
    code, results, _, out = run(store, "--workload", "fenced", "--lock", "redis-fenced",
                                "--nemesis", "pause", "--time-limit", "12", "--seed", "2")
    assert code == 0, out
    f = results["checks"]["fencing"]
    assert f["valid"] is True and f["stale-rejected"] > 0 and f["stale-accepted-count"] == 0
    m = results["checks"]["mutex"]
    assert m["lock-overlaps-informational"] is True and m["lock-overlap-count"] > 0


@needs_redis
def test_bare_del_release_is_caught(store: Path) -> None:
    code, results, _, out = run(store, "--lock", "redis-del", "--nemesis", "pause",
                                "--time-limit", "10", "--seed", "3")
    assert code == 1, out
    assert results["checks"]["mutex"]["valid"] is False


@needs_redis
@needs_root
def test_isolating_the_holder_times_out_its_release_and_heals(store: Path) -> None:
    """A holder cut off from Redis finishes its short critical section well inside the TTL, so
    redis-setnx stays safe; its release cannot reach Redis and is recorded as indeterminate."""
    code, results, run_dir, out = run(store, "--nemesis", "partition", "--time-limit", "10",
                                      "--seed", "4")
    assert code == 0, out
    counts = results["checks"]["stats"]["counts"]
    # the cut-off client's next request to Redis (its release, or its next acquire if it had
    # already released when the cut landed) times out: indeterminate, never a failure
    assert counts["release"]["info"] + counts["acquire"]["info"] >= 1, counts
    history = (run_dir / "history.jsonl").read_text()
    assert '"f":"partition"' in history
    assert not own_rules(run_dir)


@needs_redis
def test_killing_a_server_is_recorded_and_it_comes_back(store: Path) -> None:
    """SIGKILL of the one Redis loses every key (persistence none), but a holder's critical
    section (~0.25 s, against the resource's own server) ends long before the node is back
    (1-3 s later): no second holder can overlap it, so the verdict is VALID. Each kill bit (no
    grant while the node was down) and each restart brought it back (a new redis-server that
    logged it was ready, and grants again before the next kill)."""
    code, results, run_dir, out = run(store, "--nemesis", "kill", "--time-limit", "8",
                                      "--seed", "5")
    assert code == 0, out
    assert results["valid"] is True and results["checks"]["mutex"]["lock-overlap-count"] == 0
    faults = json.loads((run_dir / "test.json").read_text())["faults"]
    assert len(faults) >= 1, faults
    assert all(f["f"] == "kill" and f["targets"] == ["n1"] and f["error"] is None
               for f in faults), faults
    grants = [op["time"] / 1e9 for op in history(run_dir)
              if op["process"] != "nemesis" and op["f"] == "acquire" and op["type"] == "ok"]
    stop_invokes = [op["time"] / 1e9 for op in history(run_dir) if op["process"] == "nemesis"
                    and op["f"] == "kill" and op["value"] == "stop" and op["type"] == "invoke"]
    assert len(stop_invokes) == len(faults)
    next_starts = [f["began"] for f in faults[1:]] + [float("inf")]
    for fault, down_until, next_start in zip(faults, stop_invokes, next_starts, strict=True):
        assert not [t for t in grants if fault["start"] < t < down_until], fault  # it bit
        assert [t for t in grants if down_until < t < next_start], fault  # it came back
    # one redis-server process per start: the first, then one per restart, each ready
    ready = [line.split(":", 1)[0] for line in (run_dir / "logs" / "n1.log").read_text()
             .splitlines() if "Ready to accept connections" in line]
    assert len(ready) == len(set(ready)) == 1 + len(faults), ready
    pids = json.loads((run_dir / "pids.json").read_text())["processes"]
    assert str(pids["n1"][0]) == ready[-1]


@needs_redis
@needs_root
def test_kill_9_of_the_controller_keeps_the_history_and_clean_removes_everything(
        store: Path) -> None:
    run_dir = killed_mid_run(store, "--nemesis", "partition", "--seed", "6", within=30,
                             until='"info","f":"partition","value":"start"')
    assert own_rules(run_dir), "the cut should still be there"

    checked = harness("check", str(run_dir))
    assert checked.returncode == 2, checked.stdout + checked.stderr  # never VALID: cut short
    (recheck,) = RunDir(run_dir).rechecks()  # beside the run, which is left as it was
    assert recheck.load_results()["valid"] == "unknown"
    assert not (run_dir / "history.jsonl").exists() and not (run_dir / "results.json").exists()
    assert "acquire" in recheck.report.read_text()

    cleaned(store, run_dir)


@pytest.mark.parametrize(
    ("args", "code", "message"),
    [
        (["run", "--lock", "no-such-lock"], 64, "unknown lock 'no-such-lock'"),
        (["run", "--time-limit", "-5"], 64, "--time-limit must be a positive number"),
        (["run", "--nemesis", "gremlins"], 64, "unknown nemesis 'gremlins'"),
        (["run", "--workload", "fenced"], 64, "has no fencing tokens"),
        (["run", "--clients", "x"], 64, "invalid int value"),
        (["frobnicate"], 64, "invalid choice"),
    ],
)
def test_bad_usage_is_one_line_and_exit_64(args: list[str], code: int, message: str) -> None:
    proc = harness(*args)
    assert proc.returncode == code
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and message in lines[0], proc.stderr


def test_unreadable_history_is_one_line_and_exit_3(tmp_path: Path) -> None:
    run_dir = tmp_path / "run"
    run_dir.mkdir()
    (run_dir / "test.json").write_text(json.dumps({"spec": {"workload": "mutex"}}))
    (run_dir / "history.jsonl").write_text('{"time": 1, "process": 0, "type": "ok"\n')
    proc = harness("check", str(run_dir))
    assert proc.returncode == 3
    assert proc.stderr.count("\n") == 1 and "line 1" in proc.stderr
    proc = harness("check", str(tmp_path / "nowhere"))
    assert proc.returncode == 64 and "no such file or run directory" in proc.stderr


def test_list_names_everything() -> None:
    proc = harness("list")
    assert proc.returncode == 0
    for name in ("redis-setnx", "redis-fenced", "pause", "partition", "fenced"):
        assert name in proc.stdout


@needs_redis
def test_ctrl_c_heals_stops_everything_and_keeps_the_history(store: Path) -> None:
    proc = subprocess.Popen([sys.executable, "-m", "harness.cli", "run", "--store", str(store),
                             "--quiet", "--nemesis", "pause", "--time-limit", "60",
                             "--seed", "7"], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True)
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:  # wait until a client is paused
        nem = store / "latest" / "journals" / "nemesis.jsonl"
        if nem.exists() and '"info","f":"pause","value":"start"' in nem.read_text():
            break
        time.sleep(0.2)
    run_dir = (store / "latest").resolve()
    pids = json.loads((run_dir / "pids.json").read_text())["processes"]
    proc.send_signal(signal.SIGINT)
    _out, err = proc.communicate(timeout=60)
    assert proc.returncode == 3, err
    assert "interrupted" in err
    status = json.loads((run_dir / "test.json").read_text())["status"]
    assert status == "interrupted"
    assert (run_dir / "history.jsonl").exists() and (run_dir / "results.json").exists()
    history = (run_dir / "history.jsonl").read_text()
    assert '"f":"pause","value":"heal"' in history, "the final heal is recorded"
    left = [f"{name}:{pid}" for name, (pid, _) in pids.items() if alive(pid)]
    assert not left, f"still running after Ctrl-C: {left}"


@needs_redis
def test_counter_workload_loses_updates_under_pauses(store: Path) -> None:
    code, results, _, out = run(store, "--workload", "counter", "--nemesis", "pause",
                                "--time-limit", "10", "--seed", "2")
    assert code == 1, out
    lost = results["checks"]["lost-updates"]
    assert lost["valid"] is False and lost["lost-update-count"] >= 1
    assert "instead of going up by 1" in lost["lost-updates"][0]["explanation"]
