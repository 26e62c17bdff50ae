"""Speed of the overlap (mutex) and fencing checkers on large generated histories.

    .venv/bin/python bench/bench_checkers.py [--ops 1000000] [--procs 10]

The history is what a fenced run records: sessions one after another (acquire with a growing
token, write enter, write exit, release) while other processes' acquires fail or time out,
and the resource's log read back at the end; every 50th session, a stale holder's late write
is rejected by the resource. Prints the time to generate it, and to check it.
"""

from __future__ import annotations

import argparse
import random
import sys
import time
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


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--ops", type=int, default=1_000_000)
    ap.add_argument("--procs", type=int, default=10)
    a = ap.parse_args()
    t0 = time.perf_counter()
    history = generate(a.ops, a.procs)
    print(f"generated {len(history):,} ops ({a.procs} processes) in "
          f"{time.perf_counter() - t0:.1f} s")
    for name, check, spec in (("mutex (overlaps)", mutex.check, {"workload": "mutex"}),
                              ("fencing", fencing.check, {"workload": "fenced"})):
        t0 = time.perf_counter()
        result = check(history, spec)
        print(f"{name:<17} {time.perf_counter() - t0:6.2f} s  valid={result['valid']}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
