"""External lock programs against the Python lock of the same family: start-up and acquire
latency, from real `harness run`s (no faults) on the local backend.

    .venv/bin/python bench/bench_external.py                     # every pair, 3 seeds, 20 s
    .venv/bin/python bench/bench_external.py --pairs curator --seeds 1-2 --time-limit 10

Each run has ONE client, so an acquire never waits for another holder: its latency (from the
acquire's invoke to its ok in the history) is the lock's own cost, relays and pipes included.
Per lock it prints:

- program start: the external program's start, spawn to its hello answer (the client's log:
  "ready in X s"); Python locks have none;
- first acquire: when the client invoked its first acquire, seconds after the run's t0 (the
  client process's own start-up: Python imports, building the lock, starting its program);
- acquire latency: median and 90th percentile over every ok acquire of every seed, and how many.

The consensus locks hold for 1-6 s (long critical sections), so they give few acquires a run.
"""

from __future__ import annotations

import argparse
import json
import re
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

PAIRS = {  # external client: (db, the Python lock of its family)
    "curator": ("zookeeper", "zookeeper"),
    "go-etcd-mutex": ("etcd", "etcd-keepalive"),
    "node-redlock": ("redis-masters", "redlock"),
    "redis-semaphore": ("redis", "redis-setnx"),
}
READY = re.compile(r"external lock: .* ready in ([0-9.]+) s")


def seeds(text: str) -> list[int]:
    lo, _, hi = text.partition("-")
    return list(range(int(lo), int(hi or lo) + 1))


def one_run(store: Path, db: str, lock: str, seed: int, time_limit: float
            ) -> tuple[list[float], float | None, float | None, int]:
    """(acquire latencies in ms, program start s, first acquire s, exit code)."""
    cmd = [sys.executable, "-m", "harness.cli", "run", "--quiet", "--store", str(store),
           "--db", db, "--lock", lock, "--nemesis", "none", "--clients", "1",
           "--time-limit", str(time_limit), "--seed", str(seed)]
    proc = subprocess.run(cmd, capture_output=True, text=True)
    run_dir = (store / "latest").resolve()
    history = [json.loads(x) for x in (run_dir / "history.jsonl").read_text().splitlines()
               if x.strip()] if (run_dir / "history.jsonl").exists() else []
    invoked: float | None = None
    first: float | None = None
    latencies = []
    for op in history:
        if op.get("process") != 0 or op.get("f") != "acquire":
            continue
        if op["type"] == "invoke":
            invoked = op["time"]
            first = op["time"] / 1e9 if first is None else first
        elif op["type"] == "ok" and invoked is not None:
            latencies.append((op["time"] - invoked) / 1e6)
    log = run_dir / "logs" / "client-0.log"
    ready = READY.findall(log.read_text()) if log.exists() else []
    return latencies, float(ready[0]) if ready else None, first, proc.returncode


def describe(lock: str, latencies: list[float], starts: list[float], firsts: list[float],
             codes: list[int]) -> str:
    start = f"{statistics.median(starts):.2f} s" if starts else "-"
    first = f"{statistics.median(firsts):.2f} s" if firsts else "-"
    if latencies:
        p90 = statistics.quantiles(latencies, n=10)[-1] if len(latencies) > 1 else latencies[0]
        lat = (f"median {statistics.median(latencies):7.2f} ms, p90 {p90:7.2f} ms, "
               f"n {len(latencies)}")
    else:
        lat = "no acquires"
    return (f"  {lock:<16} program start {start:>7}  first acquire {first:>7}  acquire {lat}"
            f"  (exit codes {sorted(set(codes))})")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--pairs", nargs="*", default=list(PAIRS), choices=list(PAIRS))
    ap.add_argument("--seeds", type=seeds, default=seeds("1-3"))
    ap.add_argument("--time-limit", type=float, default=20.0)
    ap.add_argument("--store", default=None)
    a = ap.parse_args()
    root = Path(a.store or tempfile.mkdtemp(prefix="bench-external-"))
    for external in a.pairs:
        db, python = PAIRS[external]
        print(f"{external} vs {python} (--db {db}, 1 client, {a.time_limit:g} s, seeds "
              f"{a.seeds[0]}-{a.seeds[-1]})", flush=True)
        for lock in (external, python):
            latencies: list[float] = []
            starts: list[float] = []
            firsts: list[float] = []
            codes: list[int] = []
            for seed in a.seeds:
                lat, start, first, code = one_run(root / lock / f"seed-{seed}", db, lock, seed,
                                                  a.time_limit)
                latencies += lat
                starts += [start] if start is not None else []
                firsts += [first] if first is not None else []
                codes.append(code)
            print(describe(lock, latencies, starts, firsts, codes), flush=True)
    print(f"runs: {root}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
