"""The lock driver on a Redis node whose data directory is on the power-loss filesystem
(:mod:`harness.controller.syncfs`) against the same node without it (issue 27 asks within 2x).

    .venv/bin/python bench/bench_syncfs.py [--rounds 3] [--time-limit 10] [--clients 5]
                                           [--persistence everysec|appendonly|nofsync]

Each round runs ``bench_driver``'s driver measurement (``harness run --workload lock --hold 0
--think 0``, a key per client: acquire+release pairs per second from the history) twice, one
after the other: once with ``--nemesis none`` (no filesystem), once with ``--nemesis
power-loss`` and a schedule whose only step comes at the end of the run, so that the node's
data directory is mounted over the filesystem for the whole run; pairs are counted until that
step. Every write of the node's append-only file goes through the filesystem (and, with
``appendonly``, every fsync: the worst case). The ratio of the two is printed per round and as
the median.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_driver import driver_pairs


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--time-limit", type=float, default=10.0)
    ap.add_argument("--clients", type=int, default=5)
    ap.add_argument("--persistence", default="everysec")
    args = ap.parse_args()
    ratios = []
    with tempfile.TemporaryDirectory() as tmp:
        late = Path(tmp) / "late.toml"
        late.write_text(f'[[step]]\nat = {args.time_limit - 0.5}\nfault = "power-loss"\n')
        common = ("--persistence", args.persistence)
        for r in range(1, args.rounds + 1):
            bare = driver_pairs(Path(tmp) / f"bare{r}", args.clients, args.time_limit,
                                extra=(*common, "--nemesis", "none"))
            over = driver_pairs(Path(tmp) / f"fs{r}", args.clients, args.time_limit,
                                extra=(*common, "--nemesis", "power-loss", "--config",
                                       str(late)))
            ratios.append(over / bare)
            print(f"round {r}: without the filesystem {bare:,.0f} pairs/s, over it "
                  f"{over:,.0f} pairs/s: {100 * over / bare:.1f}%", flush=True)
    print(f"median ({args.persistence}): the driver over the filesystem at "
          f"{100 * statistics.median(ratios):.1f}% of without it")
    return 0


if __name__ == "__main__":
    sys.exit(main())
