"""Helpers for the real-server tests of ZooKeeper and etcd: run ``harness`` as a user would (the
shared :func:`tests.harness_runs.harness`), in a store of the test's own, and read back what the
run left: its exit code, results, history, test.json."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tests.harness_runs import harness


@dataclass
class RunResult:
    code: int
    output: str
    run_dir: Path
    results: dict[str, Any]

    @property
    def history(self) -> list[dict[str, Any]]:
        lines = (self.run_dir / "history.jsonl").read_text().splitlines()
        return [json.loads(line) for line in lines if line.strip()]

    @property
    def test(self) -> dict[str, Any]:
        return json.loads((self.run_dir / "test.json").read_text())

    def check(self, name: str) -> dict[str, Any]:
        return self.results["checks"][name]

    def grants(self) -> list[dict[str, Any]]:
        return [op for op in self.history if op["f"] == "acquire" and op["type"] == "ok"]


def run(store: Path, *args: str) -> RunResult:
    proc = harness("run", "--store", str(store), "--quiet", *args)
    run_dir = (store / "latest").resolve()
    path = run_dir / "results.json"
    results = json.loads(path.read_text()) if path.exists() else {}
    return RunResult(proc.returncode, proc.stdout + proc.stderr, run_dir, results)
