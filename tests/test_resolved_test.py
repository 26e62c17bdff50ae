"""The test is one value, built once: a spec resolves into its roles (checked against each
other once), the run reads them there and never looks a role up by name again; a client's
config is one typed value, parsed in one place; every default is written once."""

from __future__ import annotations

import ast
import dataclasses
import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from harness.controller.progress import Progress
from harness.controller.registry import Registry
from harness.controller.resolved import ResolvedTest
from harness.controller.run import Run
from harness.controller.spec import TestSpec
from harness.controller.store import Store
from harness.core import defaults
from harness.core.client_config import ClientConfig
from harness.core.cluster import Node

ROOT = Path(__file__).resolve().parents[1]


def test_a_run_checks_its_roles_once_and_looks_no_role_up_by_name(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    reg = Registry(entry_points=False)
    calls: list[Any] = []
    check = ResolvedTest.check
    monkeypatch.setattr(ResolvedTest, "check",
                        lambda self, registry, environment: calls.append(self)
                        or check(self, registry, environment))
    spec = TestSpec.from_dict({"db": "zookeeper", "nemesis": "pause,partition",
                               "store": str(tmp_path)}).validate(reg)
    assert len(calls) == 1

    def no_lookup(*args: Any) -> Any:
        raise AssertionError(f"a role looked up by name after the spec resolved: {args}")

    monkeypatch.setattr(Registry, "load", no_lookup)
    monkeypatch.setattr(Registry, "entry", no_lookup)
    run = Run(spec, Progress(quiet=True), store=Store(tmp_path), registry=reg)
    assert run.test is calls[0]
    assert len(calls) == 1
    assert [(p["kind"], p["name"]) for p in run.test.plugins()] == [
        ("db", "zookeeper"), ("lock", "zookeeper"), ("workload", "mutex"),
        ("nemesis", "pause"), ("nemesis", "partition"), ("resource", "redis"),
        ("checker", "mutex"), ("checker", "linearizable"), ("checker", "stats"),
        ("checker", "liveness"), ("checker", "availability"), ("checker", "faults")]
    assert run.test.lock.target == "workloads.locks.zookeeper:KazooLock"
    assert run.test.resource_db is not None and run.test.resource_db.__name__ == "RedisDB"


def test_a_lock_that_keeps_the_resource_in_its_database_has_no_resource_db() -> None:
    test = TestSpec.from_dict({"db": "postgres", "nemesis": "none"}).validate().resolved()
    assert (test.spec.lock, test.spec.resource, test.resource_db) == ("pg-row", "postgres",
                                                                       None)


def test_a_spec_changed_after_validation_is_resolved_again() -> None:
    spec = TestSpec.from_dict({"nemesis": "none"}).validate()
    other = dataclasses.replace(spec, workload="fenced", lock="redis-fenced",
                                resource_mode=None)
    assert other.resolved().workload.cls.__name__ == "FencedWorkload"
    assert spec.resolved().workload.cls.__name__ == "MutexWorkload"


CONFIG = ClientConfig(
    process=3, t0_ns=10, end_ns=20, seed=7, source="127.0.1.4", networks=["127.0.0.0/8"],
    redirects={}, journal="/tmp/j", crash_file="/tmp/c", clock_file="/tmp/k",
    lock_target="m:Lock",
    lock_name="lock", lock_options={"lease": None}, harness_options={}, ttl=2.0,
    op_timeout=1.0, nodes=(Node("n1", "127.0.0.2", 6379),), workload_target="m:Workload",
    workload_options={"hold_min": 0.5}, resource=Node("resource", "127.0.2.1", 6379),
    resource_target="m:Resource", resource_mode="plain", faults=True)


def test_a_client_config_is_read_back_as_it_was_written() -> None:
    assert ClientConfig.from_json(CONFIG.to_json()) == CONFIG


@pytest.mark.parametrize(("change", "drop", "error"), [
    ({"colour": "red"}, None, "client config: unknown key 'colour'"),
    ({}, "ttl", "client config: missing key 'ttl'"),
    ({"process": "3"}, None, "client config: process must be int, got '3'"),
    ({"op_timeout": True}, None, "client config: op_timeout must be float, got True"),
])
def test_a_bad_client_config_is_one_line(change: dict[str, Any], drop: str | None,
                                         error: str) -> None:
    data = {**json.loads(CONFIG.to_json()), **change}
    data.pop(drop or "", None)
    with pytest.raises(ValueError) as err:
        ClientConfig.from_json(json.dumps(data))
    assert str(err.value) == error


def test_a_client_given_an_unknown_key_stops_in_one_line(tmp_path: Path) -> None:
    path = tmp_path / "c3.json"
    path.write_text(CONFIG.to_json().replace('"seed"', '"sead"'))
    proc = subprocess.run([sys.executable, "-m", "workloads.client", str(path)],
                          capture_output=True, text=True, timeout=60, cwd=ROOT)
    assert proc.returncode == 70
    [line] = proc.stderr.splitlines()
    assert line.startswith("client stopped: ValueError: client config: unknown key 'sead' "
                           "(at client_config.py:")


# every default written once -----------------------------------------------------------------
DEFAULTED = {"ttl", "op_timeout"}  # what harness/core/defaults.py holds


def literal_defaults(source: str) -> list[str]:
    """``name = <number>`` defaults of a parameter or a field named in DEFAULTED, and
    ``x.get("ttl") or <number>``: a default written again instead of read from defaults."""
    found = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name) and \
                node.target.id in DEFAULTED and isinstance(node.value, ast.Constant) and \
                node.value.value is not None:
            found.append(node.target.id)
        if isinstance(node, ast.arguments):
            named = [*node.posonlyargs, *node.args][-len(node.defaults):] if node.defaults \
                else []
            pairs = [*zip(named, node.defaults, strict=True),
                     *zip(node.kwonlyargs, node.kw_defaults, strict=True)]
            found += [a.arg for a, d in pairs if a.arg in DEFAULTED
                      and isinstance(d, ast.Constant) and d.value is not None]
        if isinstance(node, ast.BoolOp) and isinstance(node.op, ast.Or) and any(
                isinstance(v, ast.Call) and any(isinstance(a, ast.Constant) and a.value in
                                                DEFAULTED for a in v.args)
                for v in node.values) and isinstance(node.values[-1], ast.Constant):
            found.append("or-default")
    return found


def test_the_check_finds_a_default_written_again() -> None:
    assert literal_defaults("def check(h, *, ttl: float = 2.0): ...") == ["ttl"]
    assert literal_defaults("class C:\n    op_timeout: float = 1.0\n") == ["op_timeout"]
    assert literal_defaults("ttl = float(spec.get('ttl') or 2.0)") == ["or-default"]
    assert literal_defaults("def check(h, *, ttl: float = defaults.TTL): ...") == []
    assert literal_defaults("class C:\n    op_timeout: float | None = None\n") == []


def test_the_ttl_and_the_op_timeout_are_written_once() -> None:
    found = {str(path.relative_to(ROOT)): hits
             for package in ("harness", "workloads", "nemesis", "checker")
             for path in sorted((ROOT / package).rglob("*.py"))
             if (hits := literal_defaults(path.read_text()))}
    assert found == {}
    assert (defaults.TTL, defaults.OP_TIMEOUT) == (2.0, 1.0)
