"""Real runs on the docker backend: nodes in containers on a labelled bridge network, clients on
the host. Skipped (saying why) only when no Docker engine answers or the image is missing."""

from __future__ import annotations

import json
import random
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from tests.harness_runs import assert_jumped, harness
from tests.harness_runs import run_docker as run

pytestmark = [pytest.mark.docker, pytest.mark.servers]


def labelled(c: Any, run_id: str | None = None) -> tuple[list[Any], list[Any]]:
    selector = f"lock-harness.run={run_id}" if run_id else "lock-harness.run"
    return (c.containers.list(all=True, filters={"label": selector}),
            c.networks.list(filters={"label": selector}))


def test_pause_breaks_redis_setnx_on_docker(docker_client: Any, store: Path) -> None:
    code, results, run_dir, out = run(store, "--nemesis", "pause", "--time-limit", "10",
                                      "--seed", "1")
    assert code == 1, out
    assert results["checks"]["mutex"]["lock-overlap-count"] > 0
    assert (run_dir / "logs" / "n1.log").read_text().strip(), "node log copied into the run"
    run_id = json.loads((run_dir / "test.json").read_text())["run_id"]
    assert labelled(docker_client, run_id) == ([], [])


def test_no_faults_is_valid_on_docker(docker_client: Any, store: Path) -> None:
    code, results, _, out = run(store, "--nemesis", "none", "--time-limit", "6", "--seed", "2")
    assert code == 0, out
    assert results["checks"]["stats"]["counts"]["acquire"]["ok"] >= 10


def test_clock_jump_expires_a_held_lock_with_a_verified_offset(
        docker_client: Any, store: Path) -> None:
    code, results, run_dir, out = run(store, "--nemesis", "clock", "--hold", "0.5-1.5",
                                      "--time-limit", "8", "--seed", "3")
    assert code == 1, out
    ops = [json.loads(x) for x in (run_dir / "history.jsonl").read_text().splitlines()]
    jumps = [op for op in ops if op["f"] == "clock" and op["type"] == "info"
             and op["value"] == "start"]
    assert jumps, "a clock jump is recorded"
    assert_jumped(jumps[0])
    overlap = results["checks"]["mutex"]["lock-overlaps"][0]
    # The lease held at the jump expired at once: the next holder got it right after the jump.
    assert overlap["second"]["acquired"] - jumps[0]["time"] / 1e9 < 1.0


def test_partition_cuts_one_client_off_inside_the_containers(
        docker_client: Any, store: Path) -> None:
    code, results, _, out = run(store, "--nemesis", "partition", "--time-limit", "8",
                                "--seed", "4")
    assert code == 0, out
    counts = results["checks"]["stats"]["counts"]
    # the cut-off client's next request to Redis (its release, or its next acquire if it had
    # already released when the cut landed) times out: indeterminate, never a failure
    assert counts["release"]["info"] + counts["acquire"]["info"] >= 1, counts


def test_interrupted_runs_leave_nothing_after_clean(docker_client: Any, tmp_path: Path) -> None:
    """10 short runs, 3 of them interrupted with SIGINT at a random point."""
    store = tmp_path / "results"
    rng = random.Random(7)
    interrupted = set(rng.sample(range(10), 3))
    for i in range(10):
        argv = [sys.executable, "-m", "harness.cli", "run", "--backend", "docker", "--store",
                str(store), "--quiet", "--nemesis", rng.choice(["none", "pause"]),
                "--time-limit", "2", "--clients", "2", "--seed", str(i)]
        before = set(store.glob("*/*"))
        proc = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        if i in interrupted:  # at a random point of the run, once it has begun: a SIGINT
            # while Python is still importing (under load, CI) kills it before it has made
            # anything, and tells nothing of clean-up
            deadline = time.monotonic() + 60
            while (set(store.glob("*/*")) == before and proc.poll() is None
                   and time.monotonic() < deadline):
                time.sleep(0.02)
            time.sleep(rng.uniform(0.0, 3.5))
            proc.send_signal(signal.SIGINT)
        code = proc.wait(120)
        assert code in (0, 1, 3), f"run {i} exited {code}"
    harness("clean", "--store", str(store))
    run_ids = [f"{d.parent.name}/{d.name}" for d in store.glob("*/*") if d.is_dir()]
    assert len(run_ids) >= 7, run_ids
    for run_id in run_ids:  # only this test's runs: other runs may be live on this machine
        assert labelled(docker_client, run_id) == ([], []), f"{run_id} left containers"
