"""Throw thousands of malformed and adversarial inputs at ``harness check`` and count what
matters: tracebacks (must be 0), a verdict (exit 0 or 1) on an input the generator knows it
made malformed (must be 0: tests/malformed.py's semantic and syntactic damage, whose oracle
reads nothing through the harness), errors longer than one line, and each check's peak memory.
The random damage of the rest of the corpus has no such oracle: only its exit codes are shown.

    .venv/bin/python bench/fuzz_corpus.py [--inputs 2000] [--seed 1] [--jobs 2] [--keep DIR]

The corpus is made by tests/malformed.py into a temporary directory (or --keep DIR), never in
git. Each input is one real ``harness check`` process; its peak resident memory comes from
wait4(2). Exit 0 when every rule holds.
"""

from __future__ import annotations

import argparse
import collections
import os
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from tests.malformed import (  # noqa: E402
    FORMATS,
    SYNTACTIC,
    make_corpus,
    semantic_cases,
    syntactic,
)

MEMORY_LIMIT_MB = 500


def check_one_measured(path: Path) -> tuple[Path, int, str, str, float]:
    """As :func:`check_one`, reaping the child ourselves so wait4 reports its rusage."""
    proc = subprocess.Popen([sys.executable, "-m", "harness.cli", "check", str(path),
                             "--time-limit", "10"], cwd=REPO, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE)
    assert proc.stdout is not None and proc.stderr is not None
    out = proc.stdout.read()
    err = proc.stderr.read()
    _, status, usage = os.wait4(proc.pid, 0)
    proc.returncode = os.waitstatus_to_exitcode(status)
    return (path, proc.returncode, out.decode(errors="replace"), err.decode(errors="replace"),
            usage.ru_maxrss / 1024)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--inputs", type=int, default=2000)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--jobs", type=int, default=2)
    ap.add_argument("--keep", type=Path, help="make the corpus here and keep it")
    args = ap.parse_args()
    tmp = None if args.keep else tempfile.TemporaryDirectory(prefix="lh-fuzz-")
    out = args.keep or Path(tmp.name)  # type: ignore[union-attr]
    t0 = time.monotonic()
    inputs = make_corpus(out, args.inputs, args.seed)
    known = known_malformed(out, args.seed)
    inputs += known
    print(f"corpus: {len(inputs)} inputs in {out} ({time.monotonic() - t0:.1f} s)", flush=True)
    codes: collections.Counter[int] = collections.Counter()
    tracebacks, multiline, peak = [], [], (0.0, None)
    over_memory = []
    verdicts_on_malformed: list[tuple[Path, int]] = []
    known_set = set(known)
    done = 0
    t0 = time.monotonic()
    with ThreadPoolExecutor(args.jobs) as pool:
        for path, code, stdout, stderr, rss in pool.map(check_one_measured, inputs):
            done += 1
            codes[code] += 1
            if code in (0, 1) and path in known_set:
                verdicts_on_malformed.append((path, code))
            if "Traceback" in stderr or "Traceback" in stdout:
                tracebacks.append((path, stderr.strip().splitlines()[-1:]))
            if stderr.strip().count("\n") > 0:
                multiline.append((path, stderr.strip()[:300]))
            if rss > peak[0]:
                peak = (rss, path)
            if rss > MEMORY_LIMIT_MB:
                over_memory.append((path, rss))
            if done % 250 == 0:
                print(f"  {done}/{len(inputs)} checked ({time.monotonic() - t0:.0f} s)",
                      flush=True)
    print(f"exit codes: {dict(sorted(codes.items()))}")
    print(f"a verdict on known-malformed input: {len(verdicts_on_malformed)} of {len(known)}")
    for path, code in verdicts_on_malformed[:10]:
        print(f"  {path.name}: exit {code}")
    print(f"tracebacks: {len(tracebacks)}")
    for path, last in tracebacks[:10]:
        print(f"  {path.name}: {last}")
    print(f"errors longer than one line: {len(multiline)}")
    for path, text in multiline[:5]:
        print(f"  {path.name}: {text!r}")
    print(f"peak memory: {peak[0]:.0f} MB ({peak[1].name if peak[1] else '-'}); over "
          f"{MEMORY_LIMIT_MB} MB: {len(over_memory)}")
    print(f"time: {time.monotonic() - t0:.0f} s")
    return 0 if not (tracebacks or multiline or over_memory or verdicts_on_malformed) else 1


def known_malformed(out: Path, seed: int) -> list[Path]:
    """tests/malformed.py's semantic damage (every kind, every format) and syntactic damage,
    each known to be malformed, written under ``out``."""
    import random

    paths = []
    for case in semantic_cases(benign_seeds=0):
        p = out / f"known-{case.fmt}-{case.name}{case.suffix}"
        p.write_bytes(case.data)
        paths.append(p)
    rng = random.Random(seed)
    for i in range(200):
        kind, fmt = SYNTACTIC[i % len(SYNTACTIC)], list(FORMATS)[i % 3]
        p = out / f"known-syntax-{i:03d}-{kind}{FORMATS[fmt]}"
        p.write_bytes(syntactic(kind, fmt, rng.choice(["valid", "invalid"]), rng)[0])
        paths.append(p)
    return paths


if __name__ == "__main__":
    sys.exit(main())
