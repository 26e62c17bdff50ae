"""How long ``harness check FILE`` takes as a process, and what it imports (a script, not a test).

    .venv/bin/python bench/bench_check_startup.py HISTORY [--reps 15] [--harness .venv/bin/harness]

Times (wall and CPU), as medians over ``--reps`` runs: the bare interpreter (``python -c
pass``), the interpreter importing ``harness.cli`` only, and the whole ``harness check HISTORY``
(parse, check, print). Then lists what the check imported (``-X importtime``): the modules that
``check`` must never pay for (the nemeses, networkx, the DB clients, docker) must be absent.
"""

from __future__ import annotations

import argparse
import resource
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
FORBIDDEN = ("nemesis", "workloads", "networkx", "redis", "grpc", "etcd3", "kazoo", "docker",
             "psycopg", "asyncio", "importlib.metadata", "harness.controller",
             "harness.presentation", "argparse", "pathlib", "typing")


def timed(cmd: list[str], reps: int) -> tuple[float, float, int]:
    """Median wall and CPU (user + sys) times (s) of ``cmd`` over ``reps`` runs, and its exit
    code. On a shared machine the CPU time is the steadier figure."""
    walls, cpus = [], []
    code = 0
    for _ in range(reps):
        before = resource.getrusage(resource.RUSAGE_CHILDREN)
        t0 = time.perf_counter()
        code = subprocess.run(cmd, cwd=ROOT, stdout=subprocess.DEVNULL,
                              stderr=subprocess.DEVNULL, check=False).returncode
        walls.append(time.perf_counter() - t0)
        after = resource.getrusage(resource.RUSAGE_CHILDREN)
        cpus.append(after.ru_utime - before.ru_utime + after.ru_stime - before.ru_stime)
    return statistics.median(walls), statistics.median(cpus), code


def imported(python: str, history: Path) -> list[tuple[str, int]]:
    """(module, cumulative µs) of every module ``harness check`` imported."""
    out = subprocess.run([python, "-X", "importtime", "-m", "harness.cli", "check",
                          str(history)], cwd=ROOT, capture_output=True, text=True, check=False)
    mods = []
    for row in out.stderr.splitlines():
        if not row.startswith("import time:") or "imported package" in row:
            continue
        _self, cumulative, name = (part.strip() for part in row.split("|"))
        if cumulative.isdigit():
            mods.append((name, int(cumulative)))
    return mods


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("history", type=Path)
    ap.add_argument("--reps", type=int, default=15)
    ap.add_argument("--harness", help="also time this `harness` executable (a console script)")
    a = ap.parse_args()
    py = sys.executable
    rows = [("python -c pass", [py, "-c", "pass"]),
            ("import harness.cli", [py, "-c", "import harness.cli"]),
            ("python -m harness.cli check", [py, "-m", "harness.cli", "check", str(a.history)])]
    if a.harness:
        rows.append((f"{a.harness} check", [a.harness, "check", str(a.history)]))
    for label, cmd in rows:
        wall, cpu, code = timed(cmd, a.reps)
        print(f"{label:<32} median wall {wall * 1000:6.1f} ms, cpu {cpu * 1000:6.1f} ms  "
              f"(exit {code}, {a.reps} runs)")
    mods = imported(py, a.history)
    bad = sorted({name for name, _ in mods
                  if any(name == f or name.startswith(f + ".") for f in FORBIDDEN)})
    print(f"modules imported: {len(mods)}; of those check must not need: "
          f"{', '.join(bad) if bad else 'none'}")
    top = sorted(mods, key=lambda m: -m[1])[:8]
    print("largest imports (cumulative): "
          + ", ".join(f"{name} {us / 1000:.1f} ms" for name, us in top))
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
