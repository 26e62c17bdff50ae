"""What libfaketime costs a server: lock sessions per second against redis-server run bare, under
libfaketime faking the wall clock (clock-id wall) and faking both clocks (clock-id both), with
the environment the harness gives it (offset file re-read at every clock call).

    .venv/bin/python bench/bench_faketime.py [--rounds 3] [--clients 5] [-n 20000]

Each round starts the libc-malloc redis-server (the build clock faults use) three times, one per
mode, and runs redis-benchmark's acquire (``SET NX PX``) and release (``EVAL``) against it, as
bench/bench_driver.py does; the modes are interleaved within a round, so a load from elsewhere
hits them alike. Prints the median pairs per second of each mode and its cost against bare.
"""

from __future__ import annotations

import argparse
import os
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

from bench_driver import benchmark_pairs  # noqa: E402

from dbs.faketime import faketime_env, libfaketime  # noqa: E402
from dbs.redis import LIBC_BUILD  # noqa: E402

MODES = ("bare", "wall", "both")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def pairs(mode: str, clients: int, n: int, tmp: Path) -> float:
    port = free_port()
    offset_file = tmp / "faketime"
    offset_file.write_text("+0s\n")
    env = dict(os.environ)
    if mode != "bare":
        lib = libfaketime()
        assert lib is not None, "libfaketime is not installed: bash setup.sh"
        env.update(faketime_env(lib, str(offset_file), mode))
    server = subprocess.Popen([str(LIBC_BUILD / "redis-server"), "--port", str(port), "--bind",
                               "127.0.0.1", "--save", "", "--appendonly", "no"], env=env,
                              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            with socket.socket() as s:
                if s.connect_ex(("127.0.0.1", port)) == 0:
                    break
            time.sleep(0.05)
        return benchmark_pairs("127.0.0.1", port, clients, n)
    finally:
        server.terminate()
        server.wait(10)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--clients", type=int, default=5)
    parser.add_argument("-n", type=int, default=20000)
    args = parser.parse_args()
    if not (LIBC_BUILD / "redis-server").exists():
        print("no libc-malloc redis-server: bash docker/build_redis_libc.sh", file=sys.stderr)
        return 3
    seen: dict[str, list[float]] = {m: [] for m in MODES}
    with tempfile.TemporaryDirectory() as tmp:
        for r in range(1, args.rounds + 1):
            for mode in MODES:
                seen[mode].append(pairs(mode, args.clients, args.n, Path(tmp)))
            print(f"round {r}: " + ", ".join(f"{m} {seen[m][-1]:,.0f}" for m in MODES)
                  + " pairs/s", flush=True)
    bare = statistics.median(seen["bare"])
    for mode in MODES:
        med = statistics.median(seen[mode])
        print(f"{mode:5} median {med:,.0f} pairs/s ({100 * (1 - med / bare):.1f}% fewer than "
              "bare)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
