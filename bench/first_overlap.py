"""Time to first overlap: run `harness run` for several seeds and print when the mutex checker
first saw two holders at once (seconds since the test started), and the median.

    .venv/bin/python bench/first_overlap.py --seeds 1-5 -- --nemesis pause --time-limit 20
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path


def seeds(text: str) -> list[int]:
    lo, _, hi = text.partition("-")
    return list(range(int(lo), int(hi or lo) + 1))


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--seeds", type=seeds, default=seeds("1-5"))
    ap.add_argument("--store", default=None)
    ap.add_argument("args", nargs="*", help="extra `harness run` arguments (after --)")
    a = ap.parse_args()
    store = a.store or tempfile.mkdtemp(prefix="first-overlap-")
    firsts: list[float] = []
    for seed in a.seeds:
        seed_store = Path(store) / f"seed-{seed}"
        cmd = [sys.executable, "-m", "harness.cli", "run", "--quiet", "--store", str(seed_store),
               "--seed", str(seed), *a.args]
        proc = subprocess.run(cmd, capture_output=True, text=True)
        path = seed_store / "latest" / "results.json"
        if not path.exists():
            print(f"seed {seed}: exit {proc.returncode}, no results: "
                  f"{proc.stderr.strip().splitlines()[-1:]}", flush=True)
            continue
        results = json.loads(path.read_text())
        m = results["checks"]["mutex"]
        first = m.get("first-violation-at")
        print(f"seed {seed}: exit {proc.returncode}, verdict {results['valid']}, "
              f"lock overlaps {m['lock-overlap-count']}, resource interleavings "
              f"{m['resource-interleaving-count']}, first overlap at {first} s", flush=True)
        if first is not None:
            firsts.append(first)
    if firsts:
        print(f"median time to first overlap: {statistics.median(firsts):.2f} s "
              f"({len(firsts)}/{len(a.seeds)} seeds found one)")
    else:
        print("no overlap found")
    return 0


if __name__ == "__main__":
    sys.exit(main())
