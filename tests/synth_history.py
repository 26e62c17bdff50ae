"""A synthetic mutex history of any length, for sizing and timing report.html.

Real runs give a few hundred ops in ten seconds; the report must stay small and quick at
100,000 ops, and nobody wants to wait an hour of real load to find out. This generates what a
long ``redis-setnx`` run under ``pause`` looks like: clients taking turns on the lock while the
others' acquires time out, every ``fault_every`` seconds the holder paused past its TTL (so
another client takes the lock: overlaps, interleaved writes), a few unknown outcomes, and the
resource log read back at the end. The real checkers then judge it.

    python -m tests.synth_history --ops 100000 /tmp/synth-run   # writes a run directory
"""

from __future__ import annotations

import argparse
import json
import random
from pathlib import Path
from typing import Any

from harness.core.history import Op

MS = 1_000_000  # ns


class Synth:
    def __init__(self, clients: int, seed: int, ttl: float, fault_every: float,
                 hold_ms: tuple[int, int] = (50, 300)) -> None:
        self.rng = random.Random(seed)
        self.hold_ns = (hold_ms[0] * MS, hold_ms[1] * MS)
        self.clients = clients
        self.ttl_ns = int(ttl * 1e9)
        self.fault_every_ns = int(fault_every * 1e9)
        self.ops: list[Op] = []
        self.cursor = [self.rng.randrange(MS) for _ in range(clients)]
        self.session = [0] * clients
        self.free_at = 5 * MS  # when the lock is next free
        self.next_fault = self.fault_every_ns
        self.paused: dict[str, Any] | None = None

    def op(self, t: int, process: int | str, type_: str, f: str, value: Any = None,
           **extra: Any) -> Op:
        o: Op = {"time": t, "process": process, "type": type_, "f": f, "value": value,
                 **extra}
        if process != "nemesis":
            o["lock"] = "lock"
        self.ops.append(o)
        return o

    def busy_until(self, p: int, until: int) -> None:
        """Process p tries to acquire and times out, again and again, until ``until``."""
        rng = self.rng
        while self.cursor[p] < until:
            t = self.cursor[p]
            done = t + rng.randrange(20 * MS, 80 * MS)
            self.op(t, p, "invoke", "acquire")
            if rng.random() < 0.002:
                self.op(done, p, "info", "acquire", error="TimeoutError: Timeout reading")
            else:
                self.op(done, p, "fail", "acquire", error="timeout: lock busy")
            self.cursor[p] = done + rng.randrange(MS // 10, MS)

    def write(self, t: int, p: int, kind: str) -> int:
        value = {"kind": kind, "session": self.session[p]}
        self.op(t, p, "invoke", "write", dict(value))
        done = t + self.rng.randrange(MS // 5, 2 * MS)
        self.op(done, p, "ok", "write", dict(value))  # seq assigned in time order at the end
        return done + MS // 20

    def cycle(self, h: int) -> None:
        rng = self.rng
        self.busy_until(h, self.free_at - rng.randrange(0, 3 * MS))
        t = self.cursor[h]
        self.op(t, h, "invoke", "acquire")
        ok = max(self.free_at, t) + rng.randrange(MS // 5, 2 * MS)
        self.session[h] += 1
        self.op(ok, h, "ok", "acquire", {"session": self.session[h], "validity": 2.0})
        t = self.write(ok + MS // 20, h, "enter")
        if self.paused is None and t > self.next_fault:
            self.pause(h, ok, t)
            return
        t = self.write(t + rng.randrange(*self.hold_ns), h, "exit")
        self.op(t, h, "invoke", "release", {"session": self.session[h]})
        t += rng.randrange(MS // 5, MS)
        self.op(t, h, "ok", "release", {"session": self.session[h]})
        self.cursor[h] = t + rng.randrange(0, 50 * MS)
        self.free_at = t

    def pause(self, h: int, acquired: int, t: int) -> None:
        start = t + 5 * MS
        until = start + self.ttl_ns + 2_000 * MS
        self.op(start, "nemesis", "invoke", "pause", "start", targets=[f"c{h}"])
        self.op(start + MS // 3, "nemesis", "info", "pause", "start", targets=[f"c{h}"])
        self.paused = {"h": h, "until": until}
        self.cursor[h] = until
        self.free_at = acquired + self.ttl_ns  # the lease runs out while h is frozen
        self.next_fault = until + self.fault_every_ns

    def resume(self) -> None:
        assert self.paused is not None
        h, until = self.paused["h"], self.paused["until"]
        self.op(until, "nemesis", "invoke", "pause", "stop", targets=[f"c{h}"])
        self.op(until + MS // 3, "nemesis", "info", "pause", "stop", targets=[f"c{h}"])
        t = self.write(until + MS, h, "exit")  # the holder wakes up and carries on
        self.op(t, h, "invoke", "release", {"session": self.session[h]})
        t += MS // 2
        self.op(t, h, "fail", "release", {"session": self.session[h]},
                error="not the holder (the lock had expired or was taken)")
        self.cursor[h] = t + MS
        self.paused = None

    def run(self, n_ops: int) -> list[Op]:
        rng = self.rng
        while len(self.ops) < n_ops:
            if self.paused is not None and self.free_at >= self.paused["until"]:
                self.resume()
            frozen = self.paused["h"] if self.paused else None
            h = rng.choice([p for p in range(self.clients) if p != frozen])
            self.cycle(h)
            for p in range(self.clients):
                if p != h and p != frozen:
                    self.busy_until(p, self.free_at)
        if self.paused is not None:
            self.resume()
        return self.finish()

    def finish(self) -> list[Op]:
        writes = sorted((o for o in self.ops if o["f"] == "write" and o["type"] == "ok"),
                        key=lambda o: o["time"])
        log = []
        for seq, o in enumerate(writes, 1):
            o["value"]["seq"] = seq
            log.append({"process": o["process"], "session": o["value"]["session"],
                        "kind": o["value"]["kind"], "seq": seq, "accepted": True})
        end = max(o["time"] for o in self.ops) + 1_000 * MS
        self.op(end, "nemesis", "invoke", "pause", "heal")
        self.op(end + MS, "nemesis", "info", "pause", "heal")
        self.op(end + 2 * MS, self.clients, "invoke", "read", None)
        self.op(end + 3 * MS, self.clients, "ok", "read", log)
        order = {p: i for i, p in enumerate([*range(self.clients + 1), "nemesis"])}
        self.ops.sort(key=lambda o: (o["time"], order[o["process"]]))
        return [{"index": i, **o} for i, o in enumerate(self.ops)]


def generate(n_ops: int, *, clients: int = 5, seed: int = 1, ttl: float = 2.0,
             fault_every: float = 30.0, hold_ms: tuple[int, int] = (50, 300)) -> list[Op]:
    """About ``n_ops`` ops (a few more: the last cycle is finished, the log read back); the
    holder works ``hold_ms`` between its two writes (short holds: many grants, so many
    overlaps of each paused holder)."""
    return Synth(clients, seed, ttl, fault_every, hold_ms).run(n_ops)


def spec_for(history: list[Op], clients: int = 5, seed: int = 1) -> dict[str, Any]:
    return {"db": "redis", "lock": "redis-setnx", "workload": "mutex", "nemesis": ["pause"],
            "backend": "local", "nodes": 1, "clients": clients,
            "time_limit": round(history[-1]["time"] / 1e9), "seed": seed, "store": "results",
            "ttl": 2.0, "quiesce": 1.0, "name": "synthetic"}


def write_run(run_dir: Path, n_ops: int, seed: int = 1, **shape: Any
              ) -> tuple[Path, dict[str, Any]]:
    """A run directory as `harness run` leaves it (test.json, history, results, report);
    ``shape``: :func:`generate`'s keywords."""
    from harness.controller.checking import check_history as check_all
    from harness.controller.store import RunDir
    from harness.core.column_lines import write_history
    from harness.presentation.report import write_report

    run_dir.mkdir(parents=True, exist_ok=True)
    history = generate(n_ops, seed=seed, **shape)
    spec = spec_for(history, seed=seed)
    (run_dir / "test.json").write_text(json.dumps(
        {"spec": spec, "run_id": f"synthetic/{n_ops}", "status": "complete",
         "note": "synthetic history from tests/synth_history.py"}, indent=1))
    write_history(run_dir / "history.jsonl", history)
    results = check_all(history, spec)
    (run_dir / "results.json").write_text(json.dumps(results, indent=1))
    return write_report(RunDir(run_dir), spec, history, results), results


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("run_dir", type=Path)
    ap.add_argument("--ops", type=int, default=100_000)
    ap.add_argument("--seed", type=int, default=1)
    args = ap.parse_args()
    report, results = write_run(args.run_dir, args.ops, args.seed)
    lines = sum(1 for _ in (args.run_dir / "history.jsonl").open())
    print(f"{lines} ops, verdict {results['valid']}, {report} "
          f"{report.stat().st_size / 1e6:.2f} MB")


if __name__ == "__main__":
    main()
