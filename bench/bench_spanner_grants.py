"""Spanner's "higher latency" row: grants per second of ``spanner-lease`` against a Redis lease
(``redis-setnx-expire``) and ``dynamodb-lease``, each a real `harness run` (no faults, the
local backend) at the same settings: clients, hold, think, ttl, acquire timeout and seeds.

    .venv/bin/python bench/bench_spanner_grants.py                 # 5 clients, 2 seeds, 15 s
    .venv/bin/python bench/bench_spanner_grants.py --clients 1 --seeds 1 --time-limit 10

Per lock it prints, over its seeds: grants per second (ok acquires over the run's duration, the
stats checker's ``acquires-per-second``), the median and 99th percentile of an ok acquire's
latency and of a release's, and the runs' verdicts (a run that is not VALID is named: its
figures measure something else than a working lock).
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

LOCKS = {"spanner-lease": "spanner", "redis-setnx-expire": "redis",
         "dynamodb-lease": "dynamodb"}
VERDICTS = {0: "valid", 1: "INVALID", 2: "unknown", 3: "could not run", 64: "bad usage"}


def one_run(store: Path, db: str, lock: str, seed: int, args: argparse.Namespace
            ) -> tuple[int, dict[str, object]]:
    """(exit code, the stats checker's figures) of one run."""
    cmd = [sys.executable, "-m", "harness.cli", "run", "--quiet", "--store", str(store),
           "--db", db, "--lock", lock, "--workload", "lock", "--nemesis", "none",
           "--clients", str(args.clients), "--time-limit", str(args.time_limit),
           "--seed", str(seed), "--hold", args.hold, "--think", args.think,
           "--ttl", str(args.ttl), "--acquire-timeout", str(args.acquire_timeout)]
    proc = subprocess.run(cmd, capture_output=True, text=True, check=False)
    found = sorted(store.glob(f"*{lock}*/*/results.json"), key=lambda p: p.stat().st_mtime)
    if proc.returncode not in (0, 1, 2) or not found:
        raise SystemExit(f"{lock} seed {seed}: exit {proc.returncode}: "
                         f"{(proc.stderr.strip().splitlines() or ['?'])[-1]}")
    return proc.returncode, dict(json.loads(found[-1].read_text())["checks"]["stats"])


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--locks", default=",".join(LOCKS))
    parser.add_argument("--seeds", default="1-2", help="N or N-M")
    parser.add_argument("--clients", type=int, default=5)
    parser.add_argument("--time-limit", type=float, default=15)
    parser.add_argument("--hold", default="0.05", help="S or MIN-MAX")
    parser.add_argument("--think", default="0")
    parser.add_argument("--ttl", type=float, default=2.0)
    parser.add_argument("--acquire-timeout", type=float, default=5.0)
    args = parser.parse_args()
    lo, _, hi = args.seeds.partition("-")
    seeds = range(int(lo), int(hi or lo) + 1)
    print(f"{args.clients} clients, hold {args.hold} s, think {args.think} s, ttl {args.ttl} s, "
          f"{args.time_limit:g} s a run, seeds {args.seeds}")
    print(f"{'lock':<20} {'grants/s':>9} {'acquire p50/p99 ms':>20} {'release p50/p99 ms':>20}"
          "  verdicts")
    with tempfile.TemporaryDirectory(prefix="bench-spanner-") as tmp:
        for lock in args.locks.split(","):
            runs = [one_run(Path(tmp), LOCKS[lock], lock, s, args) for s in seeds]
            rate = statistics.mean(float(st["acquires-per-second"]) for _, st in runs)  # type: ignore[arg-type]
            lat = {(f, q): statistics.median(float(st["latency-ms"][f][q])  # type: ignore[index]
                                             for _, st in runs)
                   for f in ("acquire", "release") for q in ("p50", "p99")}
            print(f"{lock:<20} {rate:>9.1f} {lat['acquire', 'p50']:>9.1f}/"
                  f"{lat['acquire', 'p99']:<10.1f} {lat['release', 'p50']:>9.1f}/"
                  f"{lat['release', 'p99']:<10.1f}  "
                  f"{', '.join(VERDICTS.get(c, str(c)) for c, _ in runs)}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
