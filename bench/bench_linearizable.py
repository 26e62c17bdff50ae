"""Benchmark of ``checker.linearizable`` on generated mutex histories (a script, not a test).

    .venv/bin/python bench/bench_linearizable.py                 # 1k, 10k, 100k ops
    .venv/bin/python bench/bench_linearizable.py --ops 10000 --procs 10
    .venv/bin/python bench/bench_linearizable.py --write-jsonl /tmp/h   # also save the histories

A history is made by simulating a real lock service: processes invoke ``acquire``, wait in a
queue, are granted the lock one at a time (first come, first served), hold it, release it and
think. Some acquires time out (``fail``, or ``info`` when the client cannot tell); some clients
crash, Jepsen style, leaving an op that never completes: a crash while waiting (the acquire never
took effect) or while releasing (the release did take effect); a crashed process comes back under
a new process id. Every history is valid by construction. ``--invalid`` injects one violation
(a grant to a second process while the lock is held) at 90 % of the history, to time how long
finding it and its witness takes.

"ops" counts operations (an invocation and its completion, if any): 10k ops ≈ 20k history lines.
"""

from __future__ import annotations

import argparse
import heapq
import json
import random
import sys
import time
from collections import deque
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from checker.linearizable import check

MS = 1_000_000  # ns


class MutexSim:
    """A discrete-event simulation of clients sharing one lock. See the module docstring."""

    def __init__(self, procs: int, seed: int, *, crash_rate: float, timeout_rate: float,
                 info_rate: float) -> None:
        self.rnd = random.Random(seed)
        self.procs = procs
        self.crash_rate = crash_rate
        self.timeout_rate = timeout_rate
        self.info_rate = info_rate
        self.events: list[dict[str, Any]] = []
        self.queue: list[tuple[int, int, str, int, int]] = []  # (time, seq, action, pid, epoch)
        self.seq = 0
        self.holder: int | None = None
        self.waiting: deque[int] = deque()
        self.epoch: dict[int, int] = {}  # bumps when a wait ends, to void stale timeouts
        self.invokes = 0
        self.next_pid = procs

    def at(self, t: int, action: str, pid: int) -> None:
        self.seq += 1
        heapq.heappush(self.queue, (t, self.seq, action, pid, self.epoch.get(pid, 0)))

    def emit(self, t: int, pid: int, type_: str, f: str) -> None:
        self.events.append({"time": t, "process": pid, "type": type_, "f": f, "value": None,
                            "lock": "lock"})

    def run(self, ops: int) -> list[dict[str, Any]]:
        for p in range(self.procs):
            self.at(self.rnd.randint(0, 10) * MS, "start", p)
        while self.queue:
            t, _, action, pid, epoch = heapq.heappop(self.queue)
            if epoch != self.epoch.get(pid, 0):
                continue
            getattr(self, f"on_{action}")(t, pid)
        return [{"index": i, **e} for i, e in enumerate(self.events)]

    def on_start(self, t: int, pid: int) -> None:
        if self.invokes >= self.ops_limit:
            return
        self.invokes += 1
        self.emit(t, pid, "invoke", "acquire")
        if self.rnd.random() < self.crash_rate:  # dies before its request reaches the server
            self.respawn(t)
            return
        if self.holder is None and not self.waiting:
            self.grant(t, pid)
        else:
            self.waiting.append(pid)
            if self.rnd.random() < self.timeout_rate:
                self.at(t + self.rnd.randint(1, 50) * MS, "timeout", pid)

    def grant(self, t: int, pid: int) -> None:
        self.holder = pid
        self.epoch[pid] = self.epoch.get(pid, 0) + 1
        self.at(t + self.rnd.randint(1, 3) * MS, "granted", pid)

    def on_granted(self, t: int, pid: int) -> None:
        self.emit(t, pid, "ok", "acquire")
        self.at(t + self.rnd.randint(1, 20) * MS, "release", pid)

    def on_timeout(self, t: int, pid: int) -> None:
        self.waiting.remove(pid)
        self.epoch[pid] = self.epoch.get(pid, 0) + 1
        kind = "info" if self.rnd.random() < self.info_rate else "fail"
        self.emit(t, pid, kind, "acquire")
        self.at(t + self.rnd.randint(0, 5) * MS, "start", pid)

    def on_release(self, t: int, pid: int) -> None:
        self.invokes += 1
        self.emit(t, pid, "invoke", "release")
        self.at(t + self.rnd.randint(1, 3) * MS, "released", pid)

    def on_released(self, t: int, pid: int) -> None:
        self.holder = None
        if self.rnd.random() < self.crash_rate:  # took effect, but the client died before ok
            self.respawn(t)
        else:
            self.emit(t, pid, "ok", "release")
            self.at(t + self.rnd.randint(0, 5) * MS, "start", pid)
        if self.waiting:
            self.grant(t + 1, self.waiting.popleft())

    def respawn(self, t: int) -> None:
        pid = self.next_pid
        self.next_pid += 1
        self.at(t + self.rnd.randint(5, 20) * MS, "start", pid)

    ops_limit = 0


def mutex_history(ops: int, procs: int, seed: int = 0, *, crash_rate: float = 0.005,
                  timeout_rate: float = 0.05, info_rate: float = 0.5) -> list[dict[str, Any]]:
    """A valid mutex history of about ``ops`` operations (see the module docstring)."""
    sim = MutexSim(procs, seed, crash_rate=crash_rate, timeout_rate=timeout_rate,
                   info_rate=info_rate)
    sim.ops_limit = ops
    return sim.run(ops)


def inject_violation(history: list[dict[str, Any]], at: float = 0.9) -> list[dict[str, Any]]:
    """Turn a failed or indeterminate acquire, late in the history, into a grant while the lock
    is held: the acquire completes ok inside another process's critical section."""
    holder: Any = None
    start = int(len(history) * at)
    for i, op in enumerate(history):
        if op["f"] == "acquire" and op["type"] == "ok":
            holder = op["process"]
        elif op["f"] == "release" and op["type"] in ("ok", "invoke"):
            holder = None
        if i >= start and holder is not None and op["type"] == "invoke" \
                and op["f"] == "acquire" and op["process"] != holder:
            victim = op["process"]
            out = [dict(o) for o in history]
            for later in out[i + 1:]:
                if later["process"] == victim:  # its completion becomes an immediate ok
                    later["type"] = "ok"
                    later["f"] = "acquire"
                    break
            else:
                continue
            moved = next(o for o in out[i + 1:] if o["process"] == victim)
            out.remove(moved)
            moved["time"] = op["time"] + 1
            out.insert(i + 1, moved)
            return [{**o, "index": k} for k, o in enumerate(out)]
    raise ValueError("no place to inject a violation")


def bench(ops: int, procs: int, seed: int, invalid: bool, time_limit: float | None,
          write: Path | None, rates: dict[str, float]) -> dict[str, Any]:
    t0 = time.perf_counter()
    history = mutex_history(ops, procs, seed, **rates)
    if invalid:
        history = inject_violation(history)
    gen = time.perf_counter() - t0
    if write is not None:
        path = write.with_name(f"{write.name}-{ops}-{procs}{'-bad' if invalid else ''}.jsonl")
        path.write_text("".join(json.dumps(op) + "\n" for op in history))
    t0 = time.perf_counter()
    result = check(history, "mutex", time_limit=time_limit)
    took = time.perf_counter() - t0
    row = {
        "ops": result["ops"], "lines": len(history), "procs": procs,
        "indeterminate": result["indeterminate"], "valid": result["valid"],
        "states": result["states"], "check_s": round(took, 3), "generate_s": round(gen, 3),
    }
    if result["valid"] is False:
        row["explanation"] = result["witness"]["explanation"][:160]
    return row


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--ops", type=int, action="append",
                    help="operations per history (repeatable; default 1000, 10000, 100000)")
    ap.add_argument("--procs", type=int, action="append",
                    help="client processes (repeatable; default 5, 10, 50)")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--invalid", action="store_true", help="also time an invalid variant")
    ap.add_argument("--time-limit", type=float, default=None)
    ap.add_argument("--crash-rate", type=float, default=0.005,
                    help="chance that a client dies in an op (default 0.005)")
    ap.add_argument("--timeout-rate", type=float, default=0.05,
                    help="chance that a waiting acquire times out (default 0.05)")
    ap.add_argument("--info-rate", type=float, default=0.5,
                    help="share of timeouts recorded as info rather than fail (default 0.5)")
    ap.add_argument("--write-jsonl", type=Path, default=None,
                    help="save each history as PREFIX-OPS-PROCS.jsonl")
    args = ap.parse_args(argv)
    sizes = args.ops or [1000, 10000, 100000]
    procs = args.procs or [5, 10, 50]
    print(f"{'ops':>7} {'lines':>7} {'procs':>5} {'info':>5} {'valid':>7} {'states':>8} "
          f"{'check s':>8}")
    for n in sizes:
        for p in procs:
            for invalid in ([False, True] if args.invalid else [False]):
                rates = {"crash_rate": args.crash_rate, "timeout_rate": args.timeout_rate,
                         "info_rate": args.info_rate}
                row = bench(n, p, args.seed, invalid, args.time_limit, args.write_jsonl, rates)
                print(f"{row['ops']:>7} {row['lines']:>7} {row['procs']:>5} "
                      f"{row['indeterminate']:>5} {row['valid']!s:>7} {row['states']:>8} "
                      f"{row['check_s']:>8.3f}", flush=True)
                if "explanation" in row:
                    print(f"        witness: {row['explanation']}...")
    return 0


if __name__ == "__main__":
    sys.exit(main())
