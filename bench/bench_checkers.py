"""Speed of the overlap (mutex) and fencing checkers on large generated histories.

    .venv/bin/python bench/bench_checkers.py [--ops 100000 --ops 1000000] [--procs 10] [--reps 5]

The history is what a fenced run records: sessions one after another (acquire with a growing
token, write enter, write exit, release) while other processes' acquires fail or time out,
and the resource's log read back at the end; every 50th session, a stale holder's late write
is rejected by the resource. Prints, per size, each checker's median CPU and wall time (CPU
time is the steadier figure on a shared machine) and the peak memory it allocated (traced),
then how the time grew from the smallest size to the largest (linear: 10x for 10x).
"""

from __future__ import annotations

import argparse
import random
import statistics
import sys
import time
import tracemalloc
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from checker import fencing, mutex

MS = 1_000_000


def generate(n_ops: int, procs: int, seed: int = 1) -> list[dict[str, Any]]:
    rng = random.Random(seed)
    ops: list[dict[str, Any]] = []
    log: list[dict[str, Any]] = []
    t = 0
    seq = 0
    token = 0
    session = 0

    def op(p: int, type_: str, f: str, value: Any = None, **kw: Any) -> None:
        ops.append({"index": len(ops), "time": t, "process": p, "type": type_, "f": f,
                    "value": value, "lock": "lock", **kw})

    while len(ops) < n_ops:
        p = rng.randrange(procs)
        session += 1
        token += 1
        op(p, "invoke", "acquire")
        t += rng.randrange(1, 5) * MS
        op(p, "ok", "acquire", {"session": session, "validity": 2.0}, token=token)
        other = (p + 1) % procs
        op(other, "invoke", "acquire")
        t += MS
        op(other, rng.choice(["fail", "info"]), "acquire")
        for kind in ("enter", "exit"):
            seq += 1
            t += rng.randrange(1, 10) * MS
            value = {"kind": kind, "session": session}
            op(p, "invoke", "write", value, token=token)
            t += MS
            op(p, "ok", "write", {**value, "seq": seq}, token=token)
            log.append({"seq": seq, "process": p, "session": session, "kind": kind,
                        "token": token, "accepted": True})
        if session % 50 == 0:  # a stale write, rejected
            seq += 1
            log.append({"seq": seq, "process": other, "session": session, "kind": "exit",
                        "token": token - 1, "accepted": False})
        t += MS
        op(p, "invoke", "release", {"session": session}, token=token)
        t += MS
        op(p, "ok", "release", {"session": session}, token=token)
    op(procs, "invoke", "read")
    t += MS
    op(procs, "ok", "read", log)
    return ops


CHECKERS = (("mutex (overlaps)", mutex.MutexChecker.check, {}),
            ("fencing", fencing.FencingChecker.check, {}))


def cpu_and_wall(fn: Any) -> tuple[float, float]:
    c0, w0 = time.process_time(), time.perf_counter()
    fn()
    return time.process_time() - c0, time.perf_counter() - w0


def peak_mb(fn: Any) -> float:
    tracemalloc.start()
    fn()
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    return peak / 1e6


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--ops", type=int, action="append",
                    help="history lines (repeatable; default 100000 and 1000000)")
    ap.add_argument("--procs", type=int, default=10)
    ap.add_argument("--reps", type=int, default=5, help="timed runs per checker and size")
    a = ap.parse_args()
    sizes = sorted(a.ops or [100_000, 1_000_000])
    histories = {}
    for n in sizes:
        t0 = time.perf_counter()
        histories[n] = generate(n, a.procs)
        print(f"generated {len(histories[n]):,} ops ({a.procs} processes) in "
              f"{time.perf_counter() - t0:.1f} s", flush=True)
    # The sizes take turns, rep after rep, so that a busy spell on a shared machine falls on
    # all of them rather than on one.
    cpu: dict[tuple[str, int], list[float]] = {}
    wall: dict[tuple[str, int], list[float]] = {}
    for _ in range(a.reps):
        for name, check, params in CHECKERS:
            for n in sizes:
                c, w = cpu_and_wall(lambda: check(histories[n], **params))  # noqa: B023
                cpu.setdefault((name, n), []).append(c)
                wall.setdefault((name, n), []).append(w)
    for name, check, params in CHECKERS:
        for n in sizes:
            valid = check(histories[n], **params)["valid"]
            mb = peak_mb(lambda: check(histories[n], **params))  # noqa: B023
            print(f"{name:<17} {n:>9,} ops: median cpu {statistics.median(cpu[name, n]):6.2f} s, "
                  f"wall {statistics.median(wall[name, n]):6.2f} s, peak {mb:6.1f} MB  "
                  f"valid={valid}", flush=True)
        if len(sizes) > 1:
            lo, hi = sizes[0], sizes[-1]
            grow = statistics.median(cpu[name, hi]) / statistics.median(cpu[name, lo])
            print(f"{name:<17} {lo:,} -> {hi:,} ops ({hi / lo:.0f}x): {grow:.1f}x cpu time")
    return 0


if __name__ == "__main__":
    sys.exit(main())
