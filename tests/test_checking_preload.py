"""What the merge and the checks of a run's history import on first use is imported while the
load runs (harness.controller.checking.preload): after it, merging a lock run's journals (into
columns, as a run does), checking them and writing history.jsonl imports none of those modules
(before it, they do: the test can fail)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import orjson

from tests.test_linearizable import load_bench

ROOT = Path(__file__).resolve().parents[1]
CODE = """
import json, sys
from pathlib import Path
from harness.controller import checking
from harness.controller.store import RunDir
if sys.argv[2] == "preload":
    checking.preload()
checks = checking.plan({"workload": "lock"})  # a run resolves its checkers before the load
before = set(sys.modules)
run = RunDir(Path(sys.argv[1]).parent)
history = run.merged()  # (its client ops in columns)
results = checking.check_history(history, {"workload": "lock"}, checks=checks)
run.save_history(history)
print(json.dumps({"valid": results["valid"], "ops": len(history),
                  "columns": type(history).__name__, "new": sorted(set(sys.modules) - before)}))
"""


def journals(tmp_path: Path) -> Path:
    """A lock run's client journals (values, a lock name), big enough to be read in bulk and
    checked as arrays."""
    h = load_bench().mutex_history(12000, 4, 7, crash_rate=0.0)
    session: dict[int, int] = {}
    lines: dict[int, list[bytes]] = {}
    for op in h:
        p = op["process"]
        op = {k: v for k, v in op.items() if k != "index"}
        op["lock"] = "lock"
        if op["f"] == "acquire" and op["type"] == "invoke":
            session[p] = session.get(p, 0) + 1
            op["value"] = {"timeout": 5.0}
        elif op["type"] == "ok":
            op["value"] = {"session": session.get(p, 0), "validity": 2.0}
        lines.setdefault(p, []).append(orjson.dumps(op))
    out = tmp_path / "journals"
    out.mkdir()
    for p, ls in lines.items():
        (out / f"c{p}.jsonl").write_bytes(b"\n".join(ls) + b"\n")
    return out


def imported(where: Path, mode: str) -> dict[str, object]:
    proc = subprocess.run([sys.executable, "-c", CODE, str(where), mode], capture_output=True,
                          text=True, timeout=120, cwd=ROOT,
                          env={"PYTHONPATH": str(ROOT), "PATH": "/usr/bin:/bin"})
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout)  # type: ignore[no-any-return]


def test_after_preload_the_post_run_imports_none_of_them(tmp_path: Path) -> None:
    where = journals(tmp_path)
    cold = imported(where, "cold")
    warm = imported(where, "preload")
    assert cold["valid"] is True and warm["valid"] is True and cold["ops"] == warm["ops"]
    assert cold["columns"] == warm["columns"] == "ColumnHistory"
    tops = {name.split(".")[0] for name in cold["new"]}  # type: ignore[union-attr]
    assert {"numpy", "msgspec"} <= tops  # what preload is for
    assert not [m for m in warm["new"] if m.split(".")[0] in {"numpy", "msgspec"}  # type: ignore[union-attr]
                or m.startswith(("harness.", "checker."))], warm["new"]
