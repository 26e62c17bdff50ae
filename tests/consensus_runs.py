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

    def assert_fenced_off(self) -> None:
        """The fencing check: a stale holder's writes refused (one at least), none accepted,
        the tokens in grant order."""
        fencing = self.check("fencing")
        assert fencing["stale-rejected"] >= 1 and fencing["stale-accepted-count"] == 0, fencing
        assert fencing["token-order-violation-count"] == 0, fencing

    def grants(self) -> list[dict[str, Any]]:
        return [op for op in self.history if op["f"] == "acquire" and op["type"] == "ok"]

    def story(self) -> str:
        """The output, then what a failed assertion needs once the CI machine (and the run's
        directory) is gone: every grant with its token, every release's end and the faults,
        in order, and each node's role changes from its log, with the truncations of its
        log (ZooKeeper 3.8.0 can truncate committed transactions: docs/detection.md)."""
        lines = [self.output, "grants (process:token), releases and faults, in order:"]
        for op in self.history:
            t = f"{op['time'] / 1e9:7.3f} s"
            if op["process"] == "nemesis" and op["type"] == "info":
                lines.append(f"  {t} {op['f']} {op['value']} {op.get('targets') or ''}")
            elif op["f"] == "acquire" and op["type"] == "ok":
                lines.append(f"  {t} p{op['process']} granted token {op.get('token')}")
            elif op["f"] == "release" and op["type"] != "invoke":
                lines.append(f"  {t} p{op['process']} release {op['type']} "
                             f"{op.get('error') or ''}".rstrip())
        for log in sorted((self.run_dir / "logs").glob("n*")):
            roles = [x for x in log.read_text(errors="replace").splitlines()
                     if any(w in x for w in ("- LEADING", "- FOLLOWING", "- LOOKING",
                                             "Truncating log", "different epoch"))]
            lines += [f"{log.name}:", *(f"  {x[:160]}" for x in roles[-12:])]
        return "\n".join(lines)


def run(store: Path, *args: str, env: dict[str, str] | None = None) -> RunResult:
    proc = harness("run", "--store", str(store), "--quiet", *args, env=env)
    run_dir = (store / "latest").resolve()
    path = run_dir / "results.json"
    results = json.loads(path.read_text()) if path.exists() else {}
    return RunResult(proc.returncode, proc.stdout + proc.stderr, run_dir, results)
