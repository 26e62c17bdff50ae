"""The linearizability checker on other tools' test data (a script, not a test; the data is not
in this repository: give its place).

    # Porcupine's etcd logs (test_data/jepsen/etcd_NNN.log) and a file of "N true|false" lines
    .venv/bin/python bench/bench_jepsen_data.py porcupine DIR EXPECTED [--reps 5] [--cli]
    # Knossos' data/ (cas-register/good|bad, mutex/bad, ...): good must pass, bad must fail
    .venv/bin/python bench/bench_jepsen_data.py knossos DIR [--reps 3]

Checks every history in one process (reading included) and prints how many verdicts agree, the
median total over ``--reps``, and the slowest files. ``--cli`` also times one ``harness check``
process per file (the venv's ``harness check FILE``), as a user scripting it would.
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from checker.linearizable import check
from checker.models import infer
from harness.presentation.interop import load_any

ROOT = Path(__file__).resolve().parents[1]


def porcupine_cases(data: Path, expected: Path) -> list[tuple[Path, bool]]:
    cases = []
    for row in expected.read_text().split("\n"):
        if row.strip():
            n, want = row.split()
            cases.append((data / f"etcd_{int(n):03d}.log", want == "true"))
    return cases


def knossos_cases(data: Path) -> list[tuple[Path, bool]]:
    return [(path, path.parent.name == "good")
            for path in sorted(data.glob("*/*/*.edn")) if path.parent.name in ("good", "bad")]


def model_for(ops: list[dict[str, object]]) -> str:
    client = [op for op in ops if op.get("process") != "nemesis"]
    tokens = any(op.get("token") is not None for op in client if op.get("f") == "acquire")
    return infer({str(op["f"]) for op in client}, tokens) or "register"


def one_pass(cases: list[tuple[Path, bool]]) -> tuple[float, int, list[tuple[float, str, object]]]:
    t0 = time.perf_counter()
    agree = 0
    per = []
    for path, want in cases:
        t1 = time.perf_counter()
        ops = load_any(path)
        result = check(ops, model_for(ops))
        per.append((time.perf_counter() - t1, path.name, result["valid"]))
        agree += result["valid"] is want
    return time.perf_counter() - t0, agree, per


def harness_command() -> list[str]:
    """The `harness` command a user runs (the venv's console script), else ``python -m``."""
    script = Path(sys.executable).parent / "harness"
    return [str(script)] if script.exists() else [sys.executable, "-m", "harness.cli"]


def cli_pass(cases: list[tuple[Path, bool]]) -> tuple[float, int]:
    command = harness_command()
    t0 = time.perf_counter()
    agree = 0
    for path, want in cases:
        code = subprocess.run([*command, "check", str(path)],
                              cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                              check=False).returncode
        agree += code == (0 if want else 1)
    return time.perf_counter() - t0, agree


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("kind", choices=["porcupine", "knossos"])
    ap.add_argument("data", type=Path)
    ap.add_argument("expected", type=Path, nargs="?")
    ap.add_argument("--reps", type=int, default=5)
    ap.add_argument("--cli", action="store_true", help="also time one process per file")
    a = ap.parse_args()
    if a.kind == "porcupine":
        if a.expected is None:
            ap.error("porcupine needs the file of expected verdicts")
        cases = porcupine_cases(a.data, a.expected)
    else:
        cases = knossos_cases(a.data)
    totals = []
    per: list[tuple[float, str, object]] = []
    agree = 0
    for _ in range(a.reps):
        took, agree, per = one_pass(cases)
        totals.append(took)
    print(f"{len(cases)} histories, {agree} verdicts as expected; one process: median "
          f"{statistics.median(totals):.3f} s over {a.reps} (min {min(totals):.3f}, "
          f"max {max(totals):.3f})")
    print("slowest: " + ", ".join(f"{name} {t * 1000:.0f} ms ({valid})"
                                  for t, name, valid in sorted(per, reverse=True)[:5]))
    unknown = [name for _, name, valid in per if valid == "unknown"]
    wrong = [name for (_, want), (_, name, valid) in zip(cases, per, strict=True)
             if valid is (not want)]
    if unknown:
        print(f"unknown ({len(unknown)}): " + ", ".join(unknown))
    print(f"the opposite verdict ({len(wrong)}): " + (", ".join(wrong) or "none"))
    if a.cli:
        took, cli_agree = cli_pass(cases)
        print(f"{len(cases)} `harness check` processes: {took:.2f} s, {cli_agree} exit codes as "
              "expected")
    return 1 if wrong else 0


if __name__ == "__main__":
    sys.exit(main())
