"""Run overhead: how much longer than its time limit a whole ``harness run`` takes, per DB.

    .venv/bin/python bench/bench_overhead.py [--dbs redis,redis-masters,...] [--runs 3]
                                             [--time-limit 5]

Each run is ``harness run --db DB --nemesis none --time-limit T`` as one process, timed from
its start to its exit (start-up, cluster ready, load, stop, final read, checks, report,
teardown); the overhead is that minus T. Prints each DB's runs and median.
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
DBS = ("redis", "redis-masters", "redis-sentinel", "zookeeper", "etcd", "postgres")


def one(db: str, time_limit: float, store: Path) -> float:
    started = time.monotonic()
    proc = subprocess.run([sys.executable, "-m", "harness.cli", "run", "--db", db,
                           "--nemesis", "none", "--time-limit", str(time_limit),
                           "--store", str(store), "--quiet"], cwd=REPO,
                          capture_output=True, text=True, timeout=time_limit * 5 + 120)
    took = time.monotonic() - started
    if proc.returncode != 0:
        raise RuntimeError(f"{db}: exit {proc.returncode}: {proc.stderr.strip()[-300:]}")
    return took - time_limit


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--dbs", default=",".join(DBS))
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--time-limit", type=float, default=5.0)
    args = ap.parse_args()
    worst = 0.0
    with tempfile.TemporaryDirectory(prefix="lh-overhead-") as tmp:
        for db in args.dbs.split(","):
            figures = [one(db, args.time_limit, Path(tmp)) for _ in range(args.runs)]
            med = statistics.median(figures)
            worst = max(worst, med)
            print(f"{db:<15} overhead {', '.join(f'{x:.2f}' for x in figures)} s; median "
                  f"{med:.2f} s", flush=True)
    print(f"largest median overhead: {worst:.2f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
