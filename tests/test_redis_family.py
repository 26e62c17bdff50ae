"""The Redis family on real servers: Redisson's watchdog and redis-py's lock under pauses, a
Sentinel failover that loses the lock, a client crash between SETNX and EXPIRE that leaves a
stuck lock; and the one-line refusals (no libc Redis for clock faults, bad options)."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from tests.harness_runs import harness, history, ran, run
from workloads.crash import crashed_at

needs_redis = pytest.mark.skipif(shutil.which("redis-server") is None,
                                 reason="redis-server missing: run `bash setup.sh`")
needs_root = pytest.mark.skipif(os.geteuid() != 0, reason="iptables needs root")


def pause_the_holder(tmp_path: Path) -> str:
    """One pause of whoever holds the lock, for twice the TTL, early enough that the holder
    wakes well before the load ends (a drawn schedule can start its pause so late that the run
    ends first and the pause is healed before the others' grants: seen once in CI as VALID)."""
    path = tmp_path / "pause.toml"
    path.write_text('nemesis = ["pause"]\nttl = 2.0\ntime-limit = 10\n\n'
                    '[[step]]\nat = 1.0\nfault = "pause"\ntarget = "holder"\nduration = 4.0\n')
    return str(path)


@pytest.mark.servers
@needs_redis
@pytest.mark.parametrize(("lock", "broken"), [("redisson", "lock-overlap-count"),
                                              ("redis-py", "resource-interleaving-count")])
def test_a_pause_of_the_holder_breaks_the_lock(store: Path, tmp_path: Path, lock: str,
                                               broken: str) -> None:
    """Redisson's watchdog is paused with its holder; redis-py's lock simply expires."""
    results, run_dir = ran(store, 1, "--lock", lock, "--replay", pause_the_holder(tmp_path),
                           "--seed", "1")
    assert results["checks"]["mutex"][broken] >= 1
    if lock == "redisson":  # re-entry works while nobody interferes: the nested release
        ops = history(run_dir)  # leaves the lock held
        assert any(op["f"] == "reacquire" and op["type"] == "ok" for op in ops)
        assert any(op["f"] == "rerelease" and op["type"] == "ok" for op in ops)


@pytest.mark.servers
@needs_redis
@needs_root
def test_sentinel_failover_loses_the_lock(store: Path) -> None:
    code, results, run_dir, out = run(store, "--db", "redis-sentinel", "--lock", "redis-setnx",
                                      "--nemesis", "failover", "--time-limit", "12",
                                      "--seed", "1")
    assert code == 1, out
    test = json.loads((run_dir / "test.json").read_text())
    assert [n["name"] for n in test["companions"]] == ["s1", "s2", "s3"]
    stops = [op for op in history(run_dir) if op["f"] == "failover" and op["type"] == "info"
             and op["value"] == "stop"]
    assert stops, out
    detail = stops[0]["detail"]
    assert detail["promoted"] in ("n2", "n3") and detail["old-primary"] == "n1"
    assert results["checks"]["mutex"]["lock-overlap-count"] >= 1


@pytest.mark.servers
@needs_redis
def test_a_client_killed_between_setnx_and_expire_leaves_a_stuck_lock(store: Path) -> None:
    results, run_dir = ran(store, 1, "--lock", "redis-setnx-expire", "--nemesis", "crash-client",
                           "--time-limit", "15", "--seed", "1")
    assert results["checks"]["mutex"]["valid"] is True  # safe, and useless
    live = results["checks"]["liveness"]
    assert live["valid"] is False and live["stuck-lock-count"] == 1
    crashes = [op for op in history(run_dir) if op["f"] == "crash-client"
               and op["type"] == "info" and (op.get("detail") or {}).get("crashed")]
    assert crashes and crashes[0]["detail"]["crashed-at"] == "after-setnx"
    crashed = int(crashes[0]["targets"][0][1:])
    assert live["stuck-locks"][0]["crashed-in-acquire"] == [crashed]
    assert results["checks"]["availability"]["outage-count"] >= 1


@needs_redis
def test_clock_faults_without_a_libc_redis_are_refused_in_one_line(tmp_path: Path) -> None:
    env = {**os.environ, "LOCK_HARNESS_CACHE": str(tmp_path / "no-cache")}
    proc = harness("run", "--nemesis", "clock", "--time-limit", "2", "--quiet", "--store",
                   str(tmp_path / "results"), env=env)
    assert proc.returncode == 3
    assert proc.stderr.count("\n") == 1 and "`harness setup --nemesis clock`" in proc.stderr


@pytest.mark.parametrize(("args", "message"), [
    (["--persistence", "sometimes"], "--persistence 'sometimes'"),
    (["--db", "redis-sentinel", "--nodes", "2"], "needs --nodes 3 or more"),
    (["--nemesis", "failover"], "--nemesis failover needs"),
    (["--db", "redis-masters", "--lock", "redisson"], "lock 'redisson' runs on"),
    (["--nemesis-opt", "oops"], "expected KEY=VALUE"),
])
def test_bad_options_are_one_line_and_exit_64(args: list[str], message: str) -> None:
    proc = harness("run", *args)
    assert proc.returncode == 64, proc.stderr
    assert proc.stderr.count("\n") == 1 and message in proc.stderr, proc.stderr


def test_list_names_the_redis_family() -> None:
    out = harness("list").stdout
    for name in ("redis-masters", "redis-sentinel", "redlock", "redlock-fenced", "redisson",
                 "redis-py", "kill-majority-delayed", "failover", "crash-client",
                 "clock-strobe", "partition-minority"):
        assert name in out


def test_an_armed_client_kills_itself_at_its_crash_point(tmp_path: Path) -> None:
    armed = tmp_path / "c0.crash"
    armed.write_text("after-setnx\n")
    code = ("from workloads import crash\n"
            f"crash.configure({str(armed)!r}, ('after-setnx',))\n"
            "crash.point('holding')\n"
            "print('survived holding', flush=True)\n"
            "crash.point('after-setnx')\n"
            "print('survived after-setnx', flush=True)\n")
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          timeout=60)
    assert proc.returncode == -signal.SIGKILL
    assert proc.stdout == "survived holding\n"
    assert crashed_at(armed) == "after-setnx"
