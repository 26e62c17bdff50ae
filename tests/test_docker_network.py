"""The network faults on the docker backend: the link layer's proxy runs on the host with the
clients and dials the containers from each client's bridge address; loss and one-way cuts are
rules inside the containers. Skipped (saying why) when no Docker engine or image is there."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from tests.harness_runs import docker_engine, history
from tests.harness_runs import run as run_harness
from tests.test_docker_runs import labelled

pytestmark = [pytest.mark.docker, pytest.mark.servers, pytest.mark.slow]


def run(store: Path, *args: str) -> tuple[int, dict[str, Any], Path, str]:
    return run_harness(store, "--backend", "docker", *args)


@pytest.fixture
def docker_client() -> Any:
    return docker_engine()


def test_a_stalled_grant_breaks_redis_setnx_on_docker(docker_client: Any, store: Path) -> None:
    code, results, run_dir, out = run(store, "--lock", "redis-setnx", "--nemesis",
                                      "stall-grant", "--time-limit", "15", "--seed", "1")
    assert code == 1, out
    assert results["checks"]["faults"]["valid"] is True
    test = json.loads((run_dir / "test.json").read_text())
    assert all(r["bound"][0] == "127.0.0.1" for r in test["links"]["routes"])
    assert labelled(docker_client, test["run_id"]) == ([], [])


def test_loss_and_a_one_way_cut_on_docker(docker_client: Any, store: Path) -> None:
    code, results, run_dir, out = run(store, "--nemesis", "loss,partition-oneway",
                                      "--nemesis-opt", "loss=0.5", "--time-limit", "12",
                                      "--seed", "2")
    # redis-setnx stays safe: a reply delayed by lost packets is either in time (the grant keeps
    # most of its TTL) or past the client's 1-s timeout (indeterminate); a one-way cut of a
    # short critical section only delays the next grant to the TTL
    assert code == 0, out
    assert results["checks"]["mutex"]["lock-overlap-count"] == 0
    assert results["checks"]["faults"]["valid"] is True
    ops = [op for op in history(run_dir) if op["process"] == "nemesis" and op["type"] == "info"]
    losses = [op for op in ops if op["f"] == "loss" and op["value"] == "stop"]
    assert losses and losses[0]["background"] and losses[0]["detail"]["dropped-packets"] > 0
    assert any(op["f"] == "partition-oneway" and op["value"] == "start" for op in ops)
