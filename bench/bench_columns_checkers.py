"""The checkers h2 gave a columnar path (mutex, linearizable, stats, and the run-level rules of
``check_history``: well-formedness, "tested nothing") on a run's merged history, as dicts and
in columns (:class:`harness.core.run_history.ColumnHistory`): CPU and wall of the checks, the
RSS once the history is held and the peak (a script, not a test; issue 30).

    .venv/bin/python bench/bench_columns_checkers.py /tmp/big/latest/journals
    .venv/bin/python bench/bench_columns_checkers.py JOURNALS --what mutex --reps 2

Each measure is a fresh process (``ru_maxrss`` is the process's peak), the modes in turn
(dicts, columns, dicts, columns, ...). The dicts are ``merge_journals`` of the journals, the
columns ``merged_columns`` of them, built once and kept in a pickle beside the journals' copy
in a temporary directory, so the columns' process never held every op as a dict. The checkers
run as a run runs them (:func:`harness.core.checks.check_safe`: the collector paused).
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
from pathlib import Path

ONE = """
import gc, json, pickle, resource, sys, time
from pathlib import Path
from harness.core.checks import TIME_ORDERED, Shared, check_safe
import checker.linearizable, checker.mutex, checker.stats, numpy
import harness.controller.checking as checking
import harness.core.run_history

def rss():
    for line in open("/proc/self/status"):
        if line.startswith("VmRSS"):
            return int(line.split()[1]) // 1024

mode, what, source = sys.argv[1:4]
if mode == "dicts":
    from harness.core.journal import merge_journals
    h = Shared(merge_journals(Path(source).glob("*.jsonl")))
else:
    with open(source, "rb") as f:
        h = pickle.load(f)
h.derived[TIME_ORDERED] = True
gc.collect()
held = rss()
fns = {"run-rules": lambda: checking.check_history(h, {}, checks=[]),
       "mutex": lambda: check_safe(checker.mutex.MutexChecker.check, h, {}),
       "linearizable": lambda: check_safe(checker.linearizable.LinearizableChecker.check, h, {}),
       "stats": lambda: check_safe(checker.stats.StatsChecker.check, h, {})}
names = list(fns) if what == "all" else [what]
each = {}
c0, w0 = time.process_time(), time.perf_counter()
for n in names:
    c, w = time.process_time(), time.perf_counter()
    valid = fns[n]()["valid"]
    each[n] = [round(time.process_time() - c, 3), round(time.perf_counter() - w, 3), valid]
print(json.dumps({"mode": mode, "what": what, "ops": len(h),
                  "cpu": round(time.process_time() - c0, 3),
                  "wall": round(time.perf_counter() - w0, 3), "each": each,
                  "rss_held_MiB": held, "peak_MiB":
                  resource.getrusage(resource.RUSAGE_SELF).ru_maxrss // 1024}))
"""

PICKLE = """
import pickle, sys
from pathlib import Path
from harness.core.journal import merge_journals
from harness.core.run_history import merged_columns
h = merged_columns(merge_journals(Path(sys.argv[1]).glob("*.jsonl")))
assert h is not None, "no client op fits in columns"
with open(sys.argv[2], "wb") as f:
    pickle.dump(h, f, protocol=5)
"""


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("journals", type=Path, help="a run's journals directory")
    ap.add_argument("--what", default="all",
                    choices=["all", "run-rules", "mutex", "linearizable", "stats"])
    ap.add_argument("--reps", type=int, default=2)
    args = ap.parse_args()
    root = Path(__file__).resolve().parents[1]
    with tempfile.TemporaryDirectory() as tmp:
        pickled = Path(tmp) / "columns.pkl"
        subprocess.run([sys.executable, "-c", PICKLE, str(args.journals), str(pickled)],
                       check=True, cwd=root)
        for _ in range(args.reps):
            for mode, source in (("dicts", args.journals), ("columns", pickled)):
                out = subprocess.run([sys.executable, "-c", ONE, mode, args.what, str(source)],
                                     check=True, cwd=root, capture_output=True, text=True)
                got = json.loads(out.stdout)
                print(f"{got['what']:13s} {mode:8s} {got['ops']} ops: cpu {got['cpu']:.3f} s, "
                      f"wall {got['wall']:.3f} s; RSS held {got['rss_held_MiB']} MiB, peak "
                      f"{got['peak_MiB']} MiB  {got['each']}")


if __name__ == "__main__":
    main()
