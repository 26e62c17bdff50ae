"""The client driver against redis-benchmark, side by side in one window.

    .venv/bin/python bench/bench_driver.py [--rounds 3] [--time-limit 10] [--clients 5]

Each round runs, one after the other on this machine:

A. redis-benchmark against a real redis-server with the commands of a lock session: ``SET key
   v NX PX 2000`` (acquire) and the compare-and-delete ``EVAL`` (release), ``--clients``
   connections, a key per connection (``-r``), no pipelining: acquire+release pairs per second
   = 1 / (1/set_rps + 1/eval_rps).
B. ``harness run --nemesis none --hold 0 --think 0 --keys N --clients N`` (the mutex workload:
   acquire, write enter, write exit, release; each client its own key, so nobody waits for a
   lock), acquire+release pairs per second from its history.

The ratio B/A is printed per round and as the median; B also does two writes to the protected
resource per session, so the ratio of requests per second (4 a session against 2 a pair) is
printed too.
"""

from __future__ import annotations

import argparse
import contextlib
import csv
import json
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

CAD = ("if redis.call('get', KEYS[1]) == ARGV[1] then return redis.call('del', KEYS[1]) "
       "end return 0")


@contextlib.contextmanager
def redis_node(tmp: Path) -> Iterator[tuple[str, int]]:
    from harness.controller.dbs.redis import RedisDB
    from tests.one_node import one_node

    with one_node(RedisDB(), tmp) as (node,):
        yield node.host, node.port


def benchmark_rps(host: str, port: int, clients: int, n: int, *command: str) -> float:
    out = subprocess.run(["redis-benchmark", "-h", host, "-p", str(port), "-c", str(clients),
                          "-n", str(n), "-r", str(clients), "--csv", *command],
                         capture_output=True, text=True, timeout=300, check=True).stdout
    rows = [row for row in csv.reader(out.splitlines()) if row]
    return float(rows[-1][1])


def benchmark_pairs(host: str, port: int, clients: int, n: int) -> float:
    set_rps = benchmark_rps(host, port, clients, n, "SET", "lock:__rand_int__", "v", "NX",
                            "PX", "2000")
    eval_rps = benchmark_rps(host, port, clients, n, "EVAL", CAD, "1", "lock:__rand_int__",
                             "v")
    return 1 / (1 / set_rps + 1 / eval_rps)


def driver_pairs(store: Path, clients: int, time_limit: float) -> float:
    proc = subprocess.run(
        [sys.executable, "-m", "harness.cli", "run", "--nemesis", "none", "--hold", "0",
         "--think", "0", "--clients", str(clients), "--keys", str(clients), "--time-limit",
         str(time_limit), "--store", str(store), "--quiet"],
        cwd=REPO, capture_output=True, text=True, timeout=time_limit * 4 + 120)
    if proc.returncode != 0:
        raise RuntimeError(f"harness run exited {proc.returncode}: {proc.stderr.strip()}")
    run = (store / "latest").resolve()
    ops = [json.loads(x) for x in (run / "history.jsonl").read_text().splitlines()]
    releases = [op for op in ops if op["f"] == "release" and op["type"] == "ok"]
    acquires = [op for op in ops if op["f"] == "acquire" and op["type"] == "invoke"]
    span = (releases[-1]["time"] - acquires[0]["time"]) / 1e9
    return len(releases) / span


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--time-limit", type=float, default=10.0)
    ap.add_argument("--clients", type=int, default=5)
    ap.add_argument("--requests", type=int, default=100_000)
    args = ap.parse_args()
    if shutil.which("redis-benchmark") is None:
        print("redis-benchmark not found (Debian package redis-tools)", file=sys.stderr)
        return 3
    ratios, a_all, b_all = [], [], []
    with tempfile.TemporaryDirectory(prefix="lh-driver-") as tmp:
        for r in range(1, args.rounds + 1):
            with redis_node(Path(tmp) / f"node{r}") as (host, port):
                a = benchmark_pairs(host, port, args.clients, args.requests)
            b = driver_pairs(Path(tmp) / f"store{r}", args.clients, args.time_limit)
            ratios.append(b / a)
            a_all.append(a)
            b_all.append(b)
            print(f"round {r}: redis-benchmark {a:,.0f} pairs/s, driver {b:,.0f} pairs/s: "
                  f"{100 * b / a:.1f}% (requests: {100 * 2 * b / a:.1f}%)", flush=True)
            time.sleep(1)
    med = statistics.median(ratios)
    print(f"median: redis-benchmark {statistics.median(a_all):,.0f} pairs/s, driver "
          f"{statistics.median(b_all):,.0f} pairs/s, ratio {100 * med:.1f}% of "
          f"redis-benchmark (requests per second: {200 * med:.1f}%)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
