"""From the end of the load to the verdict printed, for a real ``harness run`` (a script, not a
test; issue 30's "post-run in seconds" figure).

    .venv/bin/python bench/bench_postrun.py                              # 5 runs of 10 s
    .venv/bin/python bench/bench_postrun.py --tree /path/to/other/checkout   # side by side
    .venv/bin/python bench/bench_postrun.py --reps 3 --time-limit 5 -- --nemesis none

Each run is ``harness run --workload lock --hold 0 --think 0 --time-limit T`` (its store a
temporary directory, removed after), its two output streams read line by line as they come and
stamped with this script's monotonic clock (``PYTHONUNBUFFERED``: a line is seen when it is
printed, not when a pipe's buffer fills). The load ends at the controller's "healing, quiescing,
stopping clients" line; the verdict is the first line of the summary on stdout; then the
"report:" line and the exit. Runs take the trees in turn (A B A B ...: a drift of the machine's
speed moves both alike), each pair with the same seed. Printed per run: the ops, each phase line
the run printed, end of load -> verdict, -> report line, -> exit, the report's size and the exit
code (a run that did not exit 0 keeps its store, named); then per tree the medians and each
tree's ratio to the first (paired). The verdict may differ between two runs with one seed
(timing decides what the clients do): it is printed, not compared.
"""

from __future__ import annotations

import argparse
import os
import queue
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
LOAD_END = "healing, quiescing, stopping clients"
VERDICTS = ("VALID", "INVALID", "UNKNOWN")
PHASES = re.compile(r"(healed and quiesced|clients stopped|resource read back|servers stopped|"
                    r"merged and checked|report written) in ([\d.]+) s")


@dataclass
class Timed:
    """One run: seconds from the end of the load to each mark, and what it printed."""

    tree: Path
    code: int = -1
    ops: int = 0
    verdict: str = "?"
    marks: dict[str, float] = field(default_factory=dict)  # mark -> seconds since load end
    phases: dict[str, float] = field(default_factory=dict)  # the run's own figures
    report_bytes: int = 0
    lines: list[str] = field(default_factory=list)
    kept: Path | None = None  # the store of a run that did not exit 0, kept to be read


def _pump(stream: object, name: str, out: queue.Queue[tuple[float, str, str | None]]) -> None:
    for line in stream:  # type: ignore[attr-defined]
        out.put((time.monotonic(), name, line.rstrip("\n")))
    out.put((time.monotonic(), name, None))


def run_once(tree: Path, seed: int, time_limit: float, extra: list[str], python: str
             ) -> Timed:
    """One ``harness run`` from ``tree``, timed from outside."""
    store = Path(tempfile.mkdtemp(prefix="bench-postrun-"))
    env = {**os.environ, "PYTHONPATH": str(tree), "PYTHONUNBUFFERED": "1"}
    argv = [python, "-m", "harness.cli", "run", "--workload", "lock", "--hold", "0",
            "--think", "0", "--time-limit", f"{time_limit:g}", "--seed", str(seed),
            "--store", str(store), *extra]
    timed = Timed(tree)
    lines: queue.Queue[tuple[float, str, str | None]] = queue.Queue()
    try:
        proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                text=True, env=env, cwd=store)  # cwd: no tree shadows PYTHONPATH
        pumps = [threading.Thread(target=_pump, args=(s, n, lines), daemon=True)
                 for s, n in ((proc.stdout, "out"), (proc.stderr, "err"))]
        for t in pumps:
            t.start()
        load_end: float | None = None
        stamps: dict[str, float] = {}
        open_streams = 2
        deadline = time.monotonic() + time_limit * 3 + 180
        while open_streams and time.monotonic() < deadline:
            try:
                at, name, text = lines.get(timeout=1.0)
            except queue.Empty:
                continue
            if text is None:
                open_streams -= 1
                continue
            timed.lines.append(f"{name}: {text}")
            if name == "err" and text == LOAD_END and load_end is None:
                load_end = at
            elif name == "out" and "verdict" not in stamps and text.split(" ")[0] in VERDICTS:
                stamps["verdict"] = at
                timed.verdict = text.split(" ")[0]
            elif name == "out" and text.startswith("report: "):
                stamps["report"] = at
            if (m := PHASES.search(text)) is not None:
                timed.phases[m.group(1)] = float(m.group(2))
            if (m := re.match(r"([\d,]+) ops merged", text)) is not None:
                timed.ops = int(m.group(1).replace(",", ""))
        if open_streams:
            proc.kill()
        timed.code = proc.wait()
        stamps["exit"] = time.monotonic()
        if load_end is not None:
            timed.marks = {k: v - load_end for k, v in stamps.items()}
        reports = list(store.glob("*/*/report.html"))
        timed.report_bytes = reports[0].stat().st_size if reports else 0
        timed.kept = store if timed.code != 0 else None
    finally:
        if timed.kept is None:
            shutil.rmtree(store, ignore_errors=True)
    return timed


def median(values: list[float]) -> float:
    return statistics.median(values) if values else float("nan")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--tree", action="append", type=Path, default=[],
                    help="a checkout to run (repeatable; default: this one)")
    ap.add_argument("--reps", type=int, default=5)
    ap.add_argument("--time-limit", type=float, default=10.0)
    ap.add_argument("--seed", type=int, default=1, help="the first pair's seed (then +1)")
    ap.add_argument("--python", default=sys.executable)
    ap.add_argument("extra", nargs="*", help="more arguments for harness run (after --)")
    args = ap.parse_args()
    trees = [t.resolve() for t in args.tree] or [ROOT]
    runs: dict[Path, list[Timed]] = {t: [] for t in trees}
    for rep in range(args.reps):
        for tree in trees:
            t = run_once(tree, args.seed + rep, args.time_limit, args.extra, args.python)
            runs[tree].append(t)
            marks = "  ".join(f"{k} {v:5.2f} s" for k, v in t.marks.items())
            phases = ", ".join(f"{k} {v:g}" for k, v in t.phases.items())
            print(f"{tree.name:>10} #{rep + 1}: exit {t.code} {t.verdict:<8} {t.ops:>8,} ops  "
                  f"load end -> {marks}  report {t.report_bytes / 2**20:.2f} MiB  ({phases})",
                  flush=True)
            if not t.marks:
                print("\n".join(t.lines[-20:]), file=sys.stderr)
            if t.kept is not None:
                print(f"{'':>10}     kept: {t.kept}", flush=True)
    first = runs[trees[0]]
    for tree in trees:
        own = runs[tree]
        at = {k: median([t.marks[k] for t in own if k in t.marks])
              for k in ("verdict", "report", "exit")}
        line = (f"{tree}: median of {len(own)}: load end -> verdict {at['verdict']:.2f} s, "
                f"-> report line {at['report']:.2f} s, -> exit {at['exit']:.2f} s, "
                f"{median([float(t.ops) for t in own]):,.0f} ops, report "
                f"{median([t.report_bytes / 2**20 for t in own]):.2f} MiB")
        if tree != trees[0]:
            ratios = [a.marks["verdict"] / b.marks["verdict"] for a, b in zip(own, first,
                                                                              strict=True)
                      if "verdict" in a.marks and "verdict" in b.marks and b.marks["verdict"]]
            line += f"; verdict time / {trees[0].name}'s, paired: {median(ratios):.2f}x"
        print(line)
    return 0


if __name__ == "__main__":
    sys.exit(main())
