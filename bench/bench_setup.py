"""What building the lock clients at once saves: the offline builds (``curator``: javac,
``go-etcd-mutex``: go build with a cold cache) into a scratch cache, one after another, then
at once as ``harness setup`` runs them (:func:`harness.controller.setup_cmd.run_jobs`).
The shared cache (/var/cache/lock-harness) is never read or written.

    .venv/bin/python bench/bench_setup.py                       # ~3 min on 2 cores
    .venv/bin/python bench/bench_setup.py --clients curator,go-etcd-mutex --rounds 2
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time

from harness.controller.setup_cmd import Step, run_jobs


def build(name: str) -> Step:
    return (f"lock client {name}", [sys.executable, "-m", "workloads.external.builds", name],
            False)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--clients", default="curator,go-etcd-mutex")
    ap.add_argument("--rounds", type=int, default=1)
    args = ap.parse_args()
    names = args.clients.split(",")
    for r in range(args.rounds):
        for mode in ("one after another", "at once"):
            cache = tempfile.mkdtemp(prefix="bench-setup-")
            env = {**os.environ, "LOCK_HARNESS_CLIENT_CACHE": cache}
            start = time.monotonic()
            if mode == "at once":
                failed = run_jobs({n: [build(n)] for n in names}, env)
            else:
                failed = {}
                for n in names:
                    failed |= run_jobs({n: [build(n)]}, env)
            took = time.monotonic() - start
            print(f"round {r + 1}, {mode}: {took:.1f} s{' FAILED ' + str(failed) if failed else ''}"
                  f" (load average {os.getloadavg()[0]:.1f}; cache {cache})", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
