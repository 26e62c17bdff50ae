"""Benchmark of ``checker.linearizable`` on generated mutex histories (a script, not a test).

    .venv/bin/python bench/bench_linearizable.py                 # 1k, 10k, 100k ops
    .venv/bin/python bench/bench_linearizable.py --ops 10000 --procs 10
    .venv/bin/python bench/bench_linearizable.py --write-jsonl /tmp/h   # also save the histories
    .venv/bin/python bench/bench_linearizable.py --ops 1000000 --procs 10 --invalid --search
    .venv/bin/python bench/bench_linearizable.py --synth --ops 1000000

A history is made by simulating a real lock service: processes invoke ``acquire``, wait in a
queue, are granted the lock one at a time (first come, first served), hold it, release it and
think. Some acquires time out (``fail``, or ``info`` when the client cannot tell); some clients
crash, Jepsen style, leaving an op that never completes: a crash while waiting (the acquire never
took effect) or while releasing (the release did take effect); a crashed process comes back under
a new process id. Every history is valid by construction. ``--invalid`` injects one violation
(a grant to a second process while the lock is held) at 90 % of the history, to time how long
finding it and its witness takes.

"ops" counts operations (an invocation and its completion, if any): 10k ops ≈ 20k history lines.
Each row: the verdict, how it was reached (``sections``: checker.lockorder; ``search``: the
Wing & Gong search, which ``--search`` also times alone), the median CPU and wall time of
``--reps`` checks, and the peak memory one check allocated (traced: the history itself, already
in memory, is not counted).
"""

from __future__ import annotations

import argparse
import heapq
import json
import random
import statistics
import sys
import time
import tracemalloc
from collections import deque
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from checker.linearizable import check
from checker.models import Model, get_model

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


def search_only(model: str) -> Model:
    """The same model, unrecognisable to checker.lockorder: the search (WGL) decides."""
    m = get_model(model)
    step = m.step
    return m.replace(step=lambda *args: step(*args))


def bench(history: list[dict[str, Any]], model: str | Model, reps: int,
          time_limit: float | None) -> dict[str, Any]:
    """Median CPU and wall seconds of ``reps`` checks, and the peak memory of one more, traced
    (what the check allocates beyond the history itself)."""
    cpu, wall = [], []
    result: dict[str, Any] = {}
    for _ in range(reps):
        c0, w0 = time.process_time(), time.perf_counter()
        result = check(history, model, time_limit=time_limit)
        cpu.append(time.process_time() - c0)
        wall.append(time.perf_counter() - w0)
    tracemalloc.start()
    check(history, model, time_limit=time_limit)
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    row = {
        "ops": result["ops"], "lines": len(history),
        "indeterminate": result["indeterminate"], "valid": result["valid"],
        "states": result["states"], "how": "+".join(sorted(result.get("methods", {}))),
        "cpu_s": statistics.median(cpu), "wall_s": statistics.median(wall),
        "peak_mb": peak / 1e6,
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
    ap.add_argument("--search", action="store_true",
                    help="also time the search alone (WGL), without checker.lockorder")
    ap.add_argument("--synth", action="store_true",
                    help="histories of tests/synth_history.py (a redis-setnx run under pause: "
                    "lock ops among writes, overlaps by design) instead of the simulation")
    ap.add_argument("--reps", type=int, default=3, help="timed checks per history (median)")
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
    if args.synth:
        procs = procs[:1]
    print(f"{'ops':>8} {'lines':>8} {'procs':>5} {'info':>5} {'valid':>7} {'how':>8} "
          f"{'states':>8} {'cpu s':>7} {'wall s':>7} {'peak MB':>8}")
    rates = {"crash_rate": args.crash_rate, "timeout_rate": args.timeout_rate,
             "info_rate": args.info_rate}
    for n in sizes:
        for p in procs:
            for invalid in ([False, True] if args.invalid else [False]):
                history = make(n, p, args.seed, args.synth, invalid, rates)
                if args.write_jsonl is not None:
                    tag = f"{'synth-' if args.synth else ''}{n}-{p}{'-bad' if invalid else ''}"
                    path = args.write_jsonl.with_name(f"{args.write_jsonl.name}-{tag}.jsonl")
                    path.write_text("".join(json.dumps(op) + "\n" for op in history))
                models: list[str | Model] = ["mutex"]
                if args.search:
                    models.append(search_only("mutex"))
                for model in models:
                    row = bench(history, model, args.reps, args.time_limit)
                    print(f"{row['ops']:>8} {row['lines']:>8} {p:>5} {row['indeterminate']:>5} "
                          f"{row['valid']!s:>7} {row['how']:>8} {row['states']:>8} "
                          f"{row['cpu_s']:>7.2f} {row['wall_s']:>7.2f} {row['peak_mb']:>8.1f}",
                          flush=True)
                    if "explanation" in row:
                        print(f"        witness: {row['explanation']}...")
                del history
    return 0


def make(n: int, procs: int, seed: int, synth: bool, invalid: bool,
         rates: dict[str, float]) -> list[dict[str, Any]]:
    if synth:
        from tests.synth_history import generate

        return generate(n, clients=procs, seed=seed)
    history = mutex_history(n, procs, seed, **rates)
    return inject_violation(history) if invalid else history


if __name__ == "__main__":
    sys.exit(main())
