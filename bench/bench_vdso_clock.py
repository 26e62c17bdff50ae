"""What a clock step costs on etcd (its vDSO patched), and what the patch costs a clock read
(a script, not a test).

    .venv/bin/python bench/bench_vdso_clock.py [--steps 40] [--rounds 3] [--seconds 5]
        [--reads 1000000]

1. Step cost: one etcd member up through the local backend; each step asks the backend to move
   its wall clock (alternately +60 s and back to 0, as a strobe does) and then reads the
   member's clock back from its ``Date`` header until it shows the offset within the clock
   nemesis's tolerance (1 s), as the nemesis verifies a step. Prints the median and the 90th
   percentile (ms) of the whole step, of the patch alone (``set_clock``) and of the read-back.
   The first step writes the patch (jumps and code); the others rewrite its data only, and a
   step to 0 removes it (two stops: jumps, then code).
   Then the lock's cost: python-etcd3's ``lock()`` taken and released in a loop for
   ``--seconds`` against the member, unpatched and with both its clocks patched (offset 1 ms),
   alternately, ``--rounds`` times: pairs per second, medians.
2. Read cost: a Python process reading ``CLOCK_MONOTONIC`` ``--reads`` times (through glibc,
   which calls the vDSO), unpatched and patched (the patched call is a real ``syscall``):
   nanoseconds per call, medians of 5 runs. Run as root on x86_64.
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from dbs.etcd import EtcdDB  # noqa: E402
from harness.controller import vdso_clock  # noqa: E402
from harness.controller.backends.local import LocalBackend  # noqa: E402
from harness.controller.procs import ProcessTable  # noqa: E402
from harness.controller.store import RunDir  # noqa: E402
from harness.core.cluster import Node  # noqa: E402

TOLERANCE = 1.0  # nemesis/clock.py's
READER = ("import sys, time\nn = int(sys.argv[1])\nsys.stdin.readline()\nt = time.perf_counter()"
          "\nfor _ in range(n):\n    time.clock_gettime_ns(1)\n"
          "print((time.perf_counter() - t) / n * 1e9, flush=True)\nsys.stdin.readline()\n")


def pct(values: list[float], q: float) -> float:
    return sorted(values)[min(len(values) - 1, int(q * len(values)))]


def lock_pairs(node: Node, seconds: float) -> float:
    import etcd3

    client = etcd3.client(host=node.host, port=node.port)
    lock = client.lock("bench", ttl=2)
    n, end = 0, time.monotonic() + seconds
    while time.monotonic() < end:
        lock.acquire()
        lock.release()
        n += 1
    client.close()
    return n / seconds


def step_cost(steps: int, rounds: int, seconds: float) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        run = RunDir(Path(tmp) / "run")
        run.path.mkdir(parents=True)
        procs = ProcessTable(run.pids)
        backend = LocalBackend(run, procs, f"bench/{uuid.uuid4().hex[:8]}")
        db = EtcdDB()
        try:
            backend.prepare(db.port, 1, 0)
            node = Node("n1", backend.node_host(0), db.port)
            backend.preflight(db, [node], False)
            backend.provision(db, [node])
            backend.start(node)
            backend.wait_ready(node, 30)
            whole, patch, readback = [], [], []
            for i in range(steps):
                offset = 60.0 if i % 2 == 0 else 0.0
                t0 = time.perf_counter()
                backend.set_clock(node, offset, "wall")
                t1 = time.perf_counter()
                while True:
                    before = time.time()
                    seen = db.read_clock(node) - (before + time.time()) / 2
                    if abs(seen - offset) <= TOLERANCE:
                        break
                t2 = time.perf_counter()
                whole.append((t2 - t0) * 1e3)
                patch.append((t1 - t0) * 1e3)
                readback.append((t2 - t1) * 1e3)
            pairs = {False: [], True: []}
            for _ in range(rounds):
                for patched in (False, True):
                    backend.set_clock(node, 0.001 if patched else 0.0, "both")
                    pairs[patched].append(lock_pairs(node, seconds))
            backend.set_clock(node, 0.0, "both")
            for patched, xs in pairs.items():
                print(f"etcd lock() acquire+release, {'patched' if patched else 'unpatched':9} "
                      f"{statistics.median(xs):7.1f} pairs/s ({', '.join(f'{x:.0f}' for x in xs)})")
            for name, xs in (("step (request to verified read-back)", whole),
                             ("  patch (set_clock)", patch), ("  read-back (Date)", readback)):
                print(f"{name:38} median {statistics.median(xs):6.2f} ms   "
                      f"p90 {pct(xs, 0.9):6.2f} ms   ({len(xs)} steps)")
        finally:
            backend.teardown()
            procs.kill_all()


def read_cost(reads: int, patched: bool) -> float:
    proc = subprocess.Popen([sys.executable, "-c", READER, str(reads)], stdin=subprocess.PIPE,
                            stdout=subprocess.PIPE, text=True)
    assert proc.stdin is not None and proc.stdout is not None
    try:
        time.sleep(0.2)
        if patched:
            vdso_clock.shift(proc.pid, "monotonic", 1.0)
        proc.stdin.write("\n")
        proc.stdin.flush()
        return float(proc.stdout.readline())
    finally:
        proc.kill()
        proc.wait()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--steps", type=int, default=40)
    ap.add_argument("--reads", type=int, default=1_000_000)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--seconds", type=float, default=5.0)
    args = ap.parse_args()
    step_cost(args.steps, args.rounds, args.seconds)
    for patched in (False, True):
        ns = statistics.median(read_cost(args.reads, patched) for _ in range(5))
        print(f"clock_gettime(CLOCK_MONOTONIC) {'patched' if patched else 'unpatched':9} "
              f"{ns:7.1f} ns/call (Python loop included)")


if __name__ == "__main__":
    main()
