#!/usr/bin/env python3
"""How long until N Redis nodes answer PING in containers (the docker backend's start-up cost).

    .venv/bin/python docker/bench_startup.py [--force] [--nodes 5] [--runs 3]

1. The image: build it if the current recipe's image is missing (prints the first-build time),
   or rebuild it from scratch with --force (docker/build_image.py --force).
2. Per run: the harness's docker backend creates a fresh labelled bridge network, one container
   per node plus the protected resource, starts redis-server in each and waits until every one
   answers PING from this host (on the run's own network); then tears it all down (by label).
The goal is <= 10 s per run with the image cached. Exit 0 met, 1 missed or failed.
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Sequence
from pathlib import Path

# The docker SDK, not this directory (it has no __init__.py, so it never shadows the SDK). Alone
# in its block: ruff's isort takes `docker` for first-party here because of this directory.
import docker

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))
from harness.core.errors import HarnessError as HarnessErrorBase  # noqa: E402

GOAL_S = 10.0
PING_TIMEOUT_S = 60.0


def ensure_image(force: bool) -> str:
    tag = subprocess.run(
        [sys.executable, str(HERE / "build_image.py"), "--print-tag"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.strip()
    client = docker.from_env(timeout=60)
    try:
        client.images.get(tag)
        present = True
    except docker.errors.NotFound:
        present = False
    finally:
        client.close()
    if present and not force:
        print(f"image: {tag} cached (no build)")
        return tag
    t0 = time.monotonic()
    cmd = [sys.executable, str(HERE / "build_image.py"), *(["--force"] if force else [])]
    proc = subprocess.run(cmd, stdout=subprocess.PIPE, text=True, check=False)  # progress: stderr
    if proc.returncode != 0:
        raise RuntimeError("build_image.py failed (see above)")
    kind = "forced rebuild" if force else "first build"
    print(f"image: {tag} {kind}: {time.monotonic() - t0:.1f}s")
    return proc.stdout.strip().splitlines()[-1]


def one_run(nodes: int, run: int) -> tuple[float, float]:
    """Bring up N Redis nodes (+ the protected resource) through the harness's own docker
    backend, until every one answers PING; then tear down. Returns (up, down) seconds."""
    sys.path.insert(0, str(HERE.parent))
    from dbs.redis import RedisDB
    from harness.controller.backends.docker import DockerBackend
    from harness.controller.procs import ProcessTable
    from harness.controller.store import RunDir
    from harness.core.cluster import Node

    with tempfile.TemporaryDirectory(prefix="lh-bench-") as tmp:
        run_dir = RunDir(Path(tmp))
        backend = DockerBackend(run_dir, ProcessTable(run_dir.pids),
                                f"bench/{uuid.uuid4().hex[:8]}")
        db = RedisDB()
        t0 = time.monotonic()
        try:
            backend.prepare(db.port, nodes, clients=1)
            all_nodes = [Node(f"n{i + 1}", backend.node_host(i), db.port) for i in range(nodes)]
            all_nodes.append(Node("resource", backend.resource_host(), db.port))
            backend.provision(db, all_nodes)
            for node in all_nodes:
                backend.start(node)
            for node in all_nodes:
                backend.wait_ready(node, PING_TIMEOUT_S)
            up = time.monotonic() - t0
            print(f"run {run}: {nodes} nodes + resource answer PING after {up:.2f}s")
        finally:
            t1 = time.monotonic()
            backend.teardown()
            down = time.monotonic() - t1
    return up, down


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--force", action="store_true", help="rebuild the image from scratch")
    parser.add_argument("--nodes", type=int, default=5, help="containers per run (5)")
    parser.add_argument("--runs", type=int, default=3, help="runs with the cached image (3)")
    args = parser.parse_args(argv)
    try:
        ensure_image(args.force)
        ups: list[float] = []
        for run in range(1, args.runs + 1):
            up, down = one_run(args.nodes, run)
            print(f"run {run}: removed the containers + network in {down:.2f}s")
            ups.append(up)
    except (
        docker.errors.DockerException,
        RuntimeError,
        TimeoutError,
        subprocess.CalledProcessError,
        HarnessErrorBase,
    ) as e:
        print(f"bench_startup.py: {e}", file=sys.stderr)
        return 1
    best, median = min(ups), statistics.median(ups)
    verdict = "meets" if median <= GOAL_S else "MISSES"
    print(
        f"cached start of {args.nodes} Redis nodes: best {best:.2f}s, median {median:.2f}s "
        f"over {len(ups)} runs ({verdict} the {GOAL_S:.0f}s goal)"
    )
    return 0 if median <= GOAL_S else 1


if __name__ == "__main__":
    sys.exit(main())
