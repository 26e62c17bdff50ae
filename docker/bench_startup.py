#!/usr/bin/env python3
"""How long until N Redis nodes answer PING in containers (the docker backend's start-up cost).

    .venv/bin/python docker/bench_startup.py [--force] [--nodes 5] [--runs 3]

1. The image: build it if the current recipe's image is missing (prints the first-build time),
   or rebuild it from scratch with --force (docker/build_image.py --force).
2. Per run: create a fresh bridge network labelled lock-harness=1, start N redis-server
   containers on it (in parallel), each publishing 6379 on 127.0.0.1 only, and wait until every
   one answers PING from this host; then remove them and the network (by label).
The goal is <= 10 s per run with the image cached. Exit 0 met, 1 missed or failed.
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import time
import uuid
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

# The docker SDK, not this directory (it has no __init__.py, so it never shadows the SDK). Alone
# in its block: ruff's isort takes `docker` for first-party here because of this directory.
import docker

HERE = Path(__file__).resolve().parent
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


def wait_ping(port: int, deadline: float) -> float:
    """Block until 127.0.0.1:port answers PING; return the time it did."""
    import redis  # here, not at the top: see the note on `import docker`

    conn = redis.Redis(host="127.0.0.1", port=port, socket_timeout=1, socket_connect_timeout=1)
    try:
        while True:
            try:
                if conn.ping():
                    return time.monotonic()
            except redis.RedisError:
                pass  # docker-proxy accepts before redis-server listens: retry
            if time.monotonic() > deadline:
                raise TimeoutError(f"127.0.0.1:{port} did not answer PING in {PING_TIMEOUT_S:.0f}s")
            time.sleep(0.02)
    finally:
        conn.close()


def one_run(client: Any, tag: str, nodes: int, run: int) -> tuple[float, float]:
    """(seconds until all N answer PING, seconds to remove them); cleans up by label."""
    bench_id = uuid.uuid4().hex[:8]
    labels = {"lock-harness": "1", "lock-harness.bench": bench_id}
    selector = {"label": f"lock-harness.bench={bench_id}"}
    t0 = time.monotonic()
    try:
        net = client.networks.create(f"lh-bench-{bench_id}", driver="bridge", labels=labels)

        def start(i: int) -> tuple[str, float]:
            name = f"lh-bench-{bench_id}-n{i}"
            ctr = client.containers.run(
                tag,
                ["redis-server", "--port", "6379", "--protected-mode", "no", "--save", ""],
                name=name,
                hostname=f"n{i}",
                labels=labels,
                network=net.name,
                ports={"6379/tcp": ("127.0.0.1", None)},
                detach=True,
            )
            ctr.reload()
            port = int(ctr.attrs["NetworkSettings"]["Ports"]["6379/tcp"][0]["HostPort"])
            return name, wait_ping(port, time.monotonic() + PING_TIMEOUT_S)

        with ThreadPoolExecutor(max_workers=nodes) as pool:
            ready = list(pool.map(start, range(1, nodes + 1)))
        up = time.monotonic() - t0
        detail = " ".join(f"{name.rsplit('-', 1)[1]}={t - t0:.2f}" for name, t in ready)
        print(f"run {run}: {nodes} nodes answer PING after {up:.2f}s ({detail})")
    finally:
        t1 = time.monotonic()
        with ThreadPoolExecutor(max_workers=nodes) as pool:
            for ctr in client.containers.list(all=True, filters=selector):
                pool.submit(ctr.remove, force=True)
        for n in client.networks.list(filters=selector):
            n.remove()
        down = time.monotonic() - t1
    return up, down


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--force", action="store_true", help="rebuild the image from scratch")
    parser.add_argument("--nodes", type=int, default=5, help="containers per run (5)")
    parser.add_argument("--runs", type=int, default=3, help="runs with the cached image (3)")
    args = parser.parse_args(argv)
    try:
        tag = ensure_image(args.force)
        client = docker.from_env(timeout=60)
        client.ping()
        ups: list[float] = []
        for run in range(1, args.runs + 1):
            up, down = one_run(client, tag, args.nodes, run)
            print(f"run {run}: removed {args.nodes} containers + network in {down:.2f}s")
            ups.append(up)
        client.close()
    except (
        docker.errors.DockerException,
        RuntimeError,
        TimeoutError,
        subprocess.CalledProcessError,
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
