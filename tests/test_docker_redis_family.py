"""The Redis family on the docker backend: Sentinels as second processes in the containers of
n1..n3, a failover that really happens, and Redlock broken by a majority clock jump. Skipped
(saying why) when no Docker engine answers or the node image is missing."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from tests.harness_runs import assert_jumped
from tests.harness_runs import run_docker as run

pytestmark = [pytest.mark.docker, pytest.mark.servers]


def ops(run_dir: Path, f: str) -> list[dict[str, Any]]:
    return [op for op in map(json.loads, (run_dir / "history.jsonl").read_text().splitlines())
            if op["f"] == f and op["type"] == "info"]


def test_sentinel_failover_in_containers(docker_client: Any, store: Path) -> None:
    code, results, run_dir, out = run(store, "--db", "redis-sentinel", "--nemesis", "failover",
                                      "--time-limit", "12", "--seed", "1")
    assert code == 1, out
    assert (run_dir / "nodes" / "n1" / "s1" / "sentinel.conf").exists()  # in n1's container
    stops = [op for op in ops(run_dir, "failover") if op["value"] == "stop"]
    assert stops and stops[0]["detail"]["promoted"] in ("n2", "n3"), out
    assert results["checks"]["mutex"]["lock-overlap-count"] >= 1


def test_redlock_majority_clock_jump_in_containers(docker_client: Any, store: Path) -> None:
    code, results, run_dir, out = run(store, "--db", "redis-masters", "--lock", "redlock",
                                      "--nemesis", "clock", "--hold", "0.5-1.5",
                                      "--time-limit", "10", "--seed", "1")
    assert code == 1, out
    assert results["checks"]["mutex"]["lock-overlap-count"] >= 1
    jumps = [op for op in ops(run_dir, "clock") if op["value"] == "start"]
    assert jumps and len(jumps[0]["targets"]) == 3
    assert_jumped(jumps[0])
