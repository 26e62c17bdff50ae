"""What the link layer costs when it adds nothing: its proxy's median added latency at zero
delay, and the driver's throughput with and without it. Medians of several runs each.

    .venv/bin/python bench/bench_links.py                 # ~2 min
    .venv/bin/python bench/bench_links.py --runs 7 --harness-runs 0

Three measurements, each alternating direct and proxied so that a busy machine hurts both:

1. round trips: ``PING`` to a real redis-server on loopback, ``--pings`` of them per run, by
   one redis-py client: straight to the server, then through the proxy (one link, no shape);
   the added latency is the difference of the two medians, per run;
2. the lock driver: one client's tight loop of ``redis-setnx`` acquire + release (the lock
   classes the harness drives, no think or hold time) for ``--seconds``: pairs per second;
3. the harness itself: ``harness run --nemesis none`` with ``--links direct`` and ``--links
   proxy`` (5 client processes, the mutex workload's own pacing): acquires per second and the
   median acquire latency, from the run's ``stats`` checker.
"""

from __future__ import annotations

import argparse
import json
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import redis

from harness.controller.links import Links
from harness.controller.procs import ProcessTable
from harness.controller.store import RunDir
from harness.core.cluster import Node
from harness.core.locks import LockConfig
from workloads.locks.redis_single import SetNxLock


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def start_redis(tmp: Path) -> tuple[subprocess.Popen[bytes], Node]:
    binary = shutil.which("redis-server")
    if binary is None:
        sys.exit("redis-server not found: run `bash setup.sh`")
    node = Node("n1", "127.0.0.1", free_port())
    proc = subprocess.Popen([binary, "--bind", node.host, "--port", str(node.port), "--save",
                             "", "--appendonly", "no", "--dir", str(tmp)],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        try:
            if redis.Redis(node.host, node.port, socket_timeout=0.5).ping():
                return proc, node
        except redis.exceptions.RedisError:
            time.sleep(0.05)
    proc.kill()
    sys.exit("redis-server did not start")


def pings(host: str, port: int, n: int) -> float:
    """Median seconds of ``n`` PINGs on one connection."""
    client = redis.Redis(host, port, socket_timeout=5)
    client.ping()
    times = []
    for _ in range(n):
        began = time.perf_counter()
        client.ping()
        times.append(time.perf_counter() - began)
    client.close()
    return statistics.median(times)


def lock_pairs(node: Node, seconds: float) -> float:
    """acquire + release pairs per second of one redis-setnx client, no pauses."""
    lock = SetNxLock(LockConfig(nodes=(node,), ttl=2.0, op_timeout=2.0))
    done = 0
    deadline = time.monotonic() + seconds
    began = time.monotonic()
    while time.monotonic() < deadline:
        grant = lock.acquire(1.0)
        if grant is not None:
            lock.release(grant)
            done += 1
    lock.close()
    return done / (time.monotonic() - began)


def harness_run(links: str, seed: int, time_limit: float) -> dict[str, float]:
    with tempfile.TemporaryDirectory(prefix="bench-links-") as store:
        subprocess.run([sys.executable, "-m", "harness.cli", "run", "--quiet", "--nemesis",
                        "none", "--links", links, "--seed", str(seed), "--time-limit",
                        str(time_limit), "--store", store], capture_output=True, timeout=600)
        path = Path(store) / "latest" / "results.json"
        if not path.exists():
            raise SystemExit(f"harness run --links {links} produced no results")
        stats = json.loads(path.read_text())["checks"]["stats"]
    return {"acquires/s": stats["acquires-per-second"],
            "acquire p50 ms": stats["latency-ms"]["acquire"]["p50"],
            "release p50 ms": stats["latency-ms"]["release"]["p50"]}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--runs", type=int, default=5, help="runs of 1 and 2 (default 5)")
    ap.add_argument("--pings", type=int, default=3000, help="PINGs per run (default 3000)")
    ap.add_argument("--seconds", type=float, default=3.0, help="lock loop per run (default 3)")
    ap.add_argument("--harness-runs", type=int, default=3, help="runs of 3 (default 3; 0: skip)")
    ap.add_argument("--time-limit", type=float, default=10.0, help="of each harness run")
    a = ap.parse_args()
    out: dict[str, Any] = {}
    with tempfile.TemporaryDirectory(prefix="bench-links-") as tmp:
        server, node = start_redis(Path(tmp))
        run = RunDir(Path(tmp) / "run")
        run.path.mkdir()
        layer = Links(run, ProcessTable(run.pids), seed=1)
        layer.route_clients({0: "127.0.0.1"}, [node], lambda n: "127.0.0.1")
        try:
            layer.start()
            listener = layer.listener(0, "n1")
            assert listener is not None
            via = Node("n1", *listener)
            direct_rtt, proxy_rtt, added, direct_ops, proxy_ops = [], [], [], [], []
            for i in range(a.runs):
                d, p = pings(node.host, node.port, a.pings), pings(via.host, via.port, a.pings)
                direct_rtt.append(d)
                proxy_rtt.append(p)
                added.append(p - d)
                direct_ops.append(lock_pairs(node, a.seconds))
                proxy_ops.append(lock_pairs(via, a.seconds))
                print(f"run {i + 1}: PING median {d * 1e6:.0f} µs direct, {p * 1e6:.0f} µs "
                      f"proxied (+{(p - d) * 1e6:.0f} µs); lock pairs/s {direct_ops[-1]:.0f} "
                      f"direct, {proxy_ops[-1]:.0f} proxied", flush=True)
        finally:
            layer.stop()
            server.kill()
            server.wait()
    out["ping-median-us"] = {"direct": round(statistics.median(direct_rtt) * 1e6, 1),
                             "proxied": round(statistics.median(proxy_rtt) * 1e6, 1)}
    out["added-latency-median-us"] = round(statistics.median(added) * 1e6, 1)
    out["lock-pairs-per-s-median"] = {"direct": round(statistics.median(direct_ops), 1),
                                      "proxied": round(statistics.median(proxy_ops), 1)}
    if a.harness_runs:
        rows: dict[str, list[dict[str, float]]] = {"direct": [], "proxy": []}
        for i in range(a.harness_runs):
            for links in ("direct", "proxy"):
                rows[links].append(harness_run(links, i + 1, a.time_limit))
                print(f"harness run {i + 1} --links {links}: {rows[links][-1]}", flush=True)
        out["harness-run-median"] = {
            links: {k: round(statistics.median(r[k] for r in rs), 3) for k in rs[0]}
            for links, rs in rows.items()}
    print(json.dumps(out, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
