"""``harness check`` of a big JSONL history as a whole process: wall time, CPU and peak memory
(a script, not a test; issue 30's "big histories" figure).

    .venv/bin/python bench/bench_check_file.py                       # 1M ops, valid and invalid
    .venv/bin/python bench/bench_check_file.py --ops 100000 --reps 5
    .venv/bin/python bench/bench_check_file.py --tree /path/to/other/checkout   # side by side
    .venv/bin/python bench/bench_check_file.py --format edn          # the same histories as EDN

The histories are ``bench/bench_linearizable.py``'s (a simulated lock service, 10 processes;
the invalid one has a grant inside another's critical section at 90 %), written once to
``--dir`` as that script's ``--write-jsonl`` writes them and reused. Each ``harness check`` runs
under ``/usr/bin/time -v`` (its wall clock, user and system seconds, maximum resident set
size), ``--reps`` times per tree, the trees in turn (A B A B ...: a drift of the machine's speed
moves both alike). Every run of a history must exit as expected (0 valid, 1 invalid) and print
the same lines, the witness included, in every tree: a faster reader that changes a verdict is
no faster reader. ``--format edn`` writes the same histories as Jepsen EDN (interop's writer,
one op map a line), ``--format log`` as a Jepsen log (``INFO  jepsen.util - 2\t:invoke\t
:acquire\tnil``: no times, no lock, so its verdict is its own). ``--plugin`` times, in one
process of this tree, docs/history.md's example checker (it reads ops as dicts) beside the
built-in ``mutex`` on the valid history read once into a ``ColumnHistory``. Printed: the
medians per tree and history, and each tree's ratio to the first. On a shared machine quote
the CPU figures beside the wall ones.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import statistics
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from bench.bench_linearizable import inject_violation, mutex_history  # noqa: E402

TIME = "/usr/bin/time"
EXPECTED = {"valid": 0, "invalid": 1}


def history_file(directory: Path, ops: int, procs: int, seed: int, variant: str,
                 fmt: str = "jsonl") -> Path:
    """The generated history, written on first use (as JSON lines, EDN or a Jepsen log)."""
    path = directory / f"check-file-{ops}-{procs}-{seed}-{variant}.{fmt}"
    if not path.exists():
        history = mutex_history(ops, procs, seed)
        if variant == "invalid":
            history = inject_violation(history)
        tmp = path.with_suffix(".tmp")
        if fmt == "edn":
            from harness.presentation.interop import write_edn_history

            write_edn_history(tmp, history)
        else:
            line = (log_line if fmt == "log" else json.dumps)
            with tmp.open("w") as fh:
                fh.writelines(line(op) + "\n" for op in history)
        tmp.replace(path)
    return path


def log_line(op: dict[str, object]) -> str:
    """An op as a line of a Jepsen log (its value nil: the generated ones are)."""
    return f"INFO  jepsen.util - {op['process']}\t:{op['type']}\t:{op['f']}\tnil"


def run_once(tree: Path, path: Path) -> dict[str, object]:
    """One ``harness check PATH`` from ``tree``: its exit code, output and figures."""
    env = {**os.environ, "PYTHONPATH": str(tree)}
    proc = subprocess.run([TIME, "-v", sys.executable, "-m", "harness.cli", "check", str(path)],
                          capture_output=True, text=True, env=env, cwd=tree, check=False)
    err = proc.stderr
    user = float(_field(err, r"User time \(seconds\): ([\d.]+)"))
    system = float(_field(err, r"System time \(seconds\): ([\d.]+)"))
    return {"code": proc.returncode, "out": proc.stdout,
            "wall": _wall(_field(err, r"Elapsed \(wall clock\) time \(h:mm:ss or m:ss\): (\S+)")),
            "cpu": user + system,
            "peak": int(_field(err, r"Maximum resident set size \(kbytes\): (\d+)")) / 1024}


def _field(text: str, pattern: str) -> str:
    m = re.search(pattern, text)
    if m is None:
        raise SystemExit(f"no {pattern!r} in the output of {TIME} -v:\n{text[-2000:]}")
    return m.group(1)


def _wall(text: str) -> float:
    seconds = 0.0
    for part in text.split(":"):
        seconds = seconds * 60 + float(part)
    return seconds


def plugin_figures(path: Path, reps: int) -> None:
    """CPU and wall seconds (medians) of docs/history.md's example checker and of ``mutex`` on
    the history at ``path``, read once into columns, each check on a fresh ``ColumnHistory``
    (no view kept from the one before), each run as a run runs it (the collector paused)."""
    import time

    from checker.mutex import MutexChecker
    from harness.core.checks import TIME_ORDERED, WELL_FORMED, check_safe
    from harness.core.history_file import read_columns
    from harness.core.run_history import ColumnHistory
    from tests.test_history_doc import example

    cols = read_columns(path)
    for name, check in (("docs/history.md example", example().check),
                        ("mutex (built-in)", MutexChecker.check)):
        figures = []
        for _ in range(reps):
            h = ColumnHistory(cols, [])
            h.derived.update({WELL_FORMED: True, TIME_ORDERED: True})
            c, w = time.process_time(), time.perf_counter()
            valid = check_safe(check, h, {})["valid"]  # as a run runs it
            figures.append((time.process_time() - c, time.perf_counter() - w))
        print(f"{name:<26} {len(cols)} ops  cpu {statistics.median(f[0] for f in figures):.2f} s"
              f"  wall {statistics.median(f[1] for f in figures):.2f} s  valid {valid}")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--ops", type=int, default=1_000_000)
    ap.add_argument("--procs", type=int, default=10)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--dir", type=Path, default=Path("/tmp"),
                    help="where the generated histories are kept (about 240 MB each at 1M ops)")
    ap.add_argument("--tree", type=Path, action="append", default=[],
                    help="another checkout to time beside this one (repeatable)")
    ap.add_argument("--only", choices=sorted(EXPECTED), help="one history, not both")
    ap.add_argument("--format", choices=("jsonl", "edn", "log"), default="jsonl",
                    help="how the histories are written (default: JSON lines)")
    ap.add_argument("--plugin", action="store_true",
                    help="docs/history.md's example checker beside mutex, in this process")
    args = ap.parse_args(argv)
    if args.plugin:
        plugin_figures(history_file(args.dir, args.ops, args.procs, args.seed, "valid"),
                       args.reps)
        return 0
    if not os.access(TIME, os.X_OK):
        print(f"{TIME} is needed (Debian: apt-get install time)", file=sys.stderr)
        return 3
    trees = [ROOT, *(t.resolve() for t in args.tree)]
    variants = [args.only] if args.only else sorted(EXPECTED, reverse=True)
    print(f"{'history':>8} {'tree':<40} {'wall s':>7} {'cpu s':>7} {'peak MiB':>9} "
          f"{'wall x':>7} {'cpu x':>6}")
    for variant in variants:
        path = history_file(args.dir, args.ops, args.procs, args.seed, variant, args.format)
        runs: dict[Path, list[dict[str, object]]] = {t: [] for t in trees}
        for _ in range(args.reps):
            for tree in trees:
                run = run_once(tree, path)
                if run["code"] != EXPECTED[variant]:
                    print(f"{tree}: exit {run['code']} on the {variant} history, expected "
                          f"{EXPECTED[variant]}:\n{run['out']}", file=sys.stderr)
                    return 1
                runs[tree].append(run)
        outs = {str(r["out"]) for rs in runs.values() for r in rs}
        if len(outs) != 1:
            print(f"the trees print different verdicts on the {variant} history:\n"
                  + "\n---\n".join(sorted(outs)), file=sys.stderr)
            return 1
        first = None
        for tree in trees:
            med = {k: statistics.median(float(r[k]) for r in runs[tree])  # type: ignore[arg-type]
                   for k in ("wall", "cpu", "peak")}
            first = first or med
            print(f"{variant:>8} {str(tree)[-40:]:<40} {med['wall']:>7.2f} {med['cpu']:>7.2f} "
                  f"{med['peak']:>9.0f} {med['wall'] / first['wall']:>7.2f} "
                  f"{med['cpu'] / first['cpu']:>6.2f}")
        print("  " + outs.pop().strip().replace("\n", "\n  "))
    return 0


if __name__ == "__main__":
    sys.exit(main())
