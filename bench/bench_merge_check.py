"""A stored run's post-run merge and check, timed and its memory measured (a script, not a test;
issue 30's "a 600k-op run's merge and check in 3 s and 300 MB").

    .venv/bin/python bench/bench_merge_check.py RUN_DIR                  # 3 reps
    .venv/bin/python bench/bench_merge_check.py RUN_DIR --tree /path/to/other/checkout

RUN_DIR is a run's directory with its ``journals/`` (make one: ``harness run --workload lock
--hold 0 --think 0 --time-limit 14 --nemesis none``). Each rep is a fresh Python process in the
tree's directory that imports what the run's controller has imported by then (the checkers:
the controller preloads them during the load), then does what the run does between the end
of its load and its verdict: :meth:`RunDir.merged` of the journals and
:func:`harness.controller.checking.check_history` with the run's own spec (results.json is not
written: the run's stays as it is). Printed per rep and tree: ops, wall and CPU seconds of
merge + check, the process's resident memory after the imports (``VmRSS``) and its peak
(``VmHWM``, the figure the 300 MB is about: the whole process, imports included); then
medians and each tree's ratio to the first. Trees alternate (A B A B); their verdicts and
results must be equal, or the script says so and exits 1.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

CHILD = r"""
import json, sys, time
from pathlib import Path
import orjson

def status(key):
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith(key + ":"):
            return int(line.split()[1]) / 1024
    return float("nan")

from harness.controller import checking
from harness.controller.store import RunDir
from harness.core.heap import collector_paused
checking.preload()
run = RunDir(Path(sys.argv[1]))
spec = json.loads((run.path / "test.json").read_text())["spec"]
base = status("VmRSS")
t0, c0 = time.monotonic(), time.process_time()
with collector_paused():
    history = run.merged()
    results = checking.check_history(history, spec)
wall, cpu = time.monotonic() - t0, time.process_time() - c0
print(json.dumps({"ops": len(history), "wall": wall, "cpu": cpu, "base": base,
                  "peak": status("VmHWM"), "valid": results["valid"],
                  "results": orjson.dumps(results, option=orjson.OPT_SORT_KEYS).decode()}))
"""


def run_once(tree: Path, run_dir: Path) -> dict[str, object]:
    env = {**os.environ, "PYTHONPATH": str(tree)}
    proc = subprocess.run([sys.executable, "-c", CHILD, str(run_dir)], capture_output=True,
                          text=True, env=env, cwd=tree, check=False)
    if proc.returncode != 0:
        raise SystemExit(f"{tree}: exit {proc.returncode}\n{proc.stderr[-3000:]}")
    return json.loads(proc.stdout.strip().splitlines()[-1])  # type: ignore[no-any-return]


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("run_dir", type=Path)
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--tree", type=Path, action="append", default=[],
                    help="another checkout to measure beside this one (repeatable)")
    args = ap.parse_args(argv)
    run_dir = args.run_dir.resolve()
    if not (run_dir / "journals").is_dir():
        print(f"{run_dir} has no journals/: give a run's directory", file=sys.stderr)
        return 64
    trees = [ROOT, *(t.resolve() for t in args.tree)]
    runs: dict[Path, list[dict[str, object]]] = {t: [] for t in trees}
    print(f"{'tree':<40} {'ops':>8} {'wall s':>7} {'cpu s':>7} {'base MiB':>9} {'peak MiB':>9}")
    for _ in range(args.reps):
        for tree in trees:
            r = run_once(tree, run_dir)
            runs[tree].append(r)
            print(f"{str(tree)[-40:]:<40} {r['ops']:>8,} {r['wall']:>7.2f} {r['cpu']:>7.2f} "
                  f"{r['base']:>9.0f} {r['peak']:>9.0f}", flush=True)
    results = {str(r["results"]) for rs in runs.values() for r in rs}
    if len(results) != 1:
        print("the trees' results differ:", file=sys.stderr)
        for tree in trees:
            print(f"  {tree}: {str(runs[tree][0]['results'])[:2000]}", file=sys.stderr)
        return 1
    first: dict[str, float] | None = None
    print(f"\nmedians of {args.reps}  (verdict {runs[trees[0]][0]['valid']}, results equal)")
    for tree in trees:
        med = {k: statistics.median(float(r[k]) for r in runs[tree])  # type: ignore[arg-type]
               for k in ("wall", "cpu", "base", "peak")}
        first = first or med
        print(f"{str(tree)[-40:]:<40} wall {med['wall']:.2f} s  cpu {med['cpu']:.2f} s  "
              f"base {med['base']:.0f} MiB  peak {med['peak']:.0f} MiB  "
              f"(x{med['wall'] / first['wall']:.2f} wall, x{med['peak'] / first['peak']:.2f} "
              "peak)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
