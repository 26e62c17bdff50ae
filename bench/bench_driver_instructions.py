"""The user-space instructions a lock-workload client spends a pair, by layer, counted by
valgrind: the same count on a busy machine as on an idle one (on a shared machine the CPU
seconds a pair follow the load; the instructions do not).

    .venv/bin/python bench/bench_driver_instructions.py [--pairs 2000]

Against one redis-server (as bench_driver's), each layer runs in a process of its own under
valgrind (cachegrind, no cache simulation), for N and then 3N pairs; the difference over 2N is
what a pair costs, start-up left out:

- ``lock``: the redis-setnx lock's acquire and release (its two requests on a real socket);
- ``journal``: the four journal lines of a pair (invoke and ok of acquire and of release), as
  the lock workload's loop of empty sessions writes them (prepared formats, what every
  session has the same put in once; two lines a copy into the mapping, at one clock read);
- ``record``: the same four lines through ``JournalWriter.record`` (an op built, then encoded);
- ``all``: the lock workload's loop with hold 0 and think 0: workload, journal and lock;
- ``bare``: bench_driver's bare Python loop (``--floor``): the same two requests on a socket,
  nothing else (what any Python client spends).

The kernel's instructions (the socket's system calls) are not counted: valgrind sees none.
With ``--cpu`` the same layers run without valgrind and what is printed is their CPU a pair,
user and system (getrusage of each process, the same difference over 2N): noisy on a shared
machine, where only a ratio of two trees taken in turns in one window says much.
"""

from __future__ import annotations

import argparse
import os
import re
import resource
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

from bench_driver import BARE_PYTHON, CAD, REPO, redis_node

LOOP = """
import os, sys, threading, time
layer, host, port, pairs = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
from harness.core.cluster import Node
from harness.core.journal import JournalWriter
from harness.core.locks import LockConfig
from workloads.lock_only import LockWorkload
from workloads.locks.redis_single import SetNxLock
from workloads.mutex import MutexParams, Stop
lock = SetNxLock(LockConfig(nodes=(Node("n1", host, port),), name="k", ttl=2.0, op_timeout=1.0))
journal = JournalWriter(sys.argv[5], 0, time.monotonic_ns())
if layer == "lock":
    for _ in range(pairs):
        lock.release(lock.acquire(5.0))
elif layer == "journal":  # as the lock workload writes them: two lines a copy, at one time
    from time import monotonic_ns
    from harness.core.journal import encode, literal
    acquiring = journal.line_format("invoke", "acquire", "k", literal(encode({"timeout": 5.0})),
                                    b"")
    acquired = journal.line_format("ok", "acquire", "k",
                                   b'{"session":%d,"validity":' + literal(encode(2.0)) + b"}",
                                   b"")
    releasing, released = (journal.line_format(t, "release", "k", b'{"session":%d}', b"")
                           for t in ("invoke", "ok"))
    both, next_one = acquired + releasing, released + acquiring
    write, copy, t0 = journal.mapped_write(), journal.copy, journal.t0_ns
    for i in range(pairs):
        t = monotonic_ns() - t0
        line = next_one % (t, i, t)
        try:
            write(line)
        except ValueError:  # the mapping is full: the file grows
            copy(line)
        t = monotonic_ns() - t0
        line = both % (t, i, t, i)
        try:
            write(line)
        except ValueError:
            copy(line)
elif layer == "record":
    for i in range(pairs):
        journal.record("invoke", "acquire", {"timeout": 4.988}, lock="k")
        journal.record("ok", "acquire", {"session": i, "validity": 2.0}, lock="k")
        journal.record("invoke", "release", {"session": i}, lock="k")
        journal.record("ok", "release", {"session": i}, lock="k")
else:
    stop = Stop()  # as the client process's
    params = MutexParams(process=0, lock_name="k", hold_min=0, hold_max=0, think_min=0,
                         think_max=0, end_ns=time.monotonic_ns() + 10**12,
                         holds_seen=False)  # a run without faults, as bench_driver's
    workload = LockWorkload(params, lock, None, journal, stop)
    release = lock.release
    def counted(grant):
        released = release(grant)
        if workload.session >= pairs:
            stop.set()
        return released
    lock.release = counted
    workload.run()
journal.close()
"""


def loop_argv(layer: str, host: str, port: int, pairs: int, tmp: Path) -> list[str]:
    return ([BARE_PYTHON, host, str(port), "lock:bare", "3600", CAD, str(pairs)]
            if layer == "bare" else
            [LOOP, layer, host, str(port), str(pairs), str(tmp / f"{layer}-{pairs}.jsonl")])


def cpu_seconds(layer: str, host: str, port: int, pairs: int, tmp: Path) -> tuple[float, float]:
    """User and system CPU seconds of one process running ``layer`` for ``pairs`` pairs."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    subprocess.run([sys.executable, "-c", *loop_argv(layer, host, port, pairs, tmp)],
                   cwd=REPO, capture_output=True, timeout=900, check=True,
                   env={**os.environ, "PYTHONPATH": str(REPO)})
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    (tmp / f"{layer}-{pairs}.jsonl").unlink(missing_ok=True)
    return after.ru_utime - before.ru_utime, after.ru_stime - before.ru_stime


def instructions(layer: str, host: str, port: int, pairs: int, tmp: Path) -> int:
    argv = loop_argv(layer, host, port, pairs, tmp)
    out = subprocess.run(["valgrind", "--tool=cachegrind", "--cache-sim=no",
                          "--cachegrind-out-file=/dev/null", sys.executable, "-c", *argv],
                         cwd=REPO, capture_output=True, text=True, timeout=900, check=True,
                         env={**os.environ, "PYTHONPATH": str(REPO)}).stderr
    m = re.search(r"I\s+refs:\s+([\d,]+)", out)
    if m is None:
        raise RuntimeError(f"no instruction count from valgrind: {out[-300:]}")
    return int(m.group(1).replace(",", ""))


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--pairs", type=int, default=2000)
    ap.add_argument("--layers", default="bare,lock,journal,all",
                    help="comma-separated, of: bare, lock, journal, record, all")
    ap.add_argument("--cpu", action="store_true",
                    help="CPU a pair (user, system), run without valgrind, not instructions")
    args = ap.parse_args()
    for tool in ("redis-server",) if args.cpu else ("valgrind", "redis-server"):
        if shutil.which(tool) is None:
            print(f"{tool} not found", file=sys.stderr)
            return 3
    n = args.pairs
    with (tempfile.TemporaryDirectory(prefix="lh-instructions-") as tmp,
          redis_node(Path(tmp) / "node") as (host, port)):
        for layer in args.layers.split(","):
            if args.cpu:
                (ua, sa), (ub, sb) = (cpu_seconds(layer, host, port, k, Path(tmp))
                                      for k in (n, 3 * n))
                print(f"{layer}: {(ub - ua) / (2 * n) * 1e6:.1f} us user, "
                      f"{(sb - sa) / (2 * n) * 1e6:.1f} us system a pair", flush=True)
                continue
            a = instructions(layer, host, port, n, Path(tmp))
            b = instructions(layer, host, port, 3 * n, Path(tmp))
            print(f"{layer}: {(b - a) / (2 * n):,.0f} instructions a pair", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
