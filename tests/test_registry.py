"""The registry: every built-in role declares itself; requirements are checked in one place;
a checker that raises costs only its own verdict."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import pytest
from hypothesis import given, settings

from harness.controller.checking import check_history
from harness.controller.registry import BUILTINS, Registry
from harness.controller.spec import TestSpec
from harness.core import capabilities
from harness.core.checks import compose
from harness.core.errors import UsageError
from harness.core.options import Option
from tests.histories import Built, valid_histories

REG = Registry(entry_points=False)


@pytest.mark.parametrize(("kind", "name"), [(k, n) for k, t in BUILTINS.items() for n in t])
def test_every_builtin_declares_itself(kind: str, name: str) -> None:
    cls = REG.load(kind, name)
    assert cls.name == name
    assert isinstance(cls.summary, str) and cls.summary
    if kind == "locks":
        assert isinstance(cls.dbs, tuple) and isinstance(cls.tokens, bool)
        assert all(db in BUILTINS["dbs"] for db in cls.dbs)
    if kind == "nemeses":
        assert all(isinstance(c, type) and c in capabilities.NEEDS for c in cls.requires)


def test_a_lock_on_the_wrong_db_is_one_line() -> None:
    with pytest.raises(UsageError, match="runs on --db zookeeper, not 'redis'"):
        TestSpec.from_dict({"db": "redis", "lock": "zookeeper"}).validate(REG)


def test_a_fault_the_db_cannot_take_names_the_dbs_that_can() -> None:
    with pytest.raises(UsageError, match=r"needs a db with a leader \((.*zookeeper.*)\)"):
        TestSpec.from_dict({"db": "redis", "nemesis": "partition-leader"}).validate(REG)
    with pytest.raises(UsageError, match="failover needs a db whose primary is failed over"):
        TestSpec.from_dict({"db": "redis-masters", "nemesis": "failover"}).validate(REG)


def test_fencing_needs_a_lock_that_declares_tokens() -> None:
    with pytest.raises(UsageError, match="has no fencing tokens"):
        TestSpec.from_dict({"lock": "redis-setnx", "workload": "fenced"}).validate(REG)
    TestSpec.from_dict({"lock": "redis-fenced", "workload": "fenced"}).validate(REG)


def test_an_unknown_name_lists_the_known_ones() -> None:
    with pytest.raises(UsageError, match="unknown nemesis 'nope': use one of pause"):
        REG.entry("nemeses", "nope")


# a checker that raises -----------------------------------------------------------------------
class BoomChecker:
    name = "boom"
    summary = "raises"

    @staticmethod
    def check(history: Sequence[Any], **params: Any) -> dict[str, Any]:
        raise ZeroDivisionError("checker bug")


class BoomWorkload:
    name = "boom-workload"
    summary = "the mutex checks plus one that raises"
    needs_tokens = False
    fenced = False

    @classmethod
    def checkers(cls, spec: Mapping[str, Any]) -> list[tuple[str, dict[str, Any]]]:
        return [("mutex", {}), ("tests.test_registry:BoomChecker", {}), ("stats", {})]

    def run(self) -> None:
        raise NotImplementedError


@settings(max_examples=20, deadline=None)
@given(valid_histories())
def test_a_checker_that_raises_is_unknown_and_the_others_stand(built: Built) -> None:
    results = check_history(built.history, {"workload": "tests.test_registry:BoomWorkload"},
                            REG)
    boom = results["checks"]["tests.test_registry:BoomChecker"]
    assert boom["valid"] == "unknown" and "ZeroDivisionError: checker bug" in boom["error"]
    assert results["checks"]["mutex"]["valid"] is True
    assert results["checks"]["stats"]["valid"] is True
    assert results["valid"] == "unknown" and results["crashed-checkers"]


def test_false_beats_a_crash_and_a_crash_beats_true() -> None:
    def invalid(history: Any) -> dict[str, Any]:
        return {"valid": False}

    def raises(history: Any) -> dict[str, Any]:
        raise RuntimeError("x")

    def no_verdict(history: Any) -> dict[str, Any]:
        return {"valid": "maybe"}

    out = compose([], [("a", invalid, {}), ("b", raises, {}), ("c", no_verdict, {})])
    assert out["valid"] is False
    assert out["checks"]["b"]["valid"] == "unknown"
    assert out["checks"]["c"]["valid"] == "unknown" and "no verdict" in out["checks"]["c"]["error"]


def test_the_extension_guide_example_is_a_working_nemesis(tmp_path: Any, monkeypatch: Any
                                                          ) -> None:
    """docs/extending.md's new nemesis is one file: loaded by path it declares itself and
    picks a majority of the nodes."""
    import random
    import re
    import threading
    from pathlib import Path

    from harness.core.cluster import NemesisContext, Node

    doc = (Path(__file__).resolve().parents[1] / "docs" / "extending.md").read_text()
    code = re.search(r"`nemesis/pause_majority.py`:\n\n```python\n(.*?)```", doc, re.S)
    assert code is not None
    (tmp_path / "pause_majority_doc.py").write_text(code.group(1))
    monkeypatch.syspath_prepend(str(tmp_path))
    cls = REG.load("nemeses", "pause_majority_doc:PauseMajority")
    assert cls.name == "pause-majority" and cls.summary
    nodes = [Node(f"n{i}", f"127.9.0.{i}", 1) for i in range(1, 6)]
    ctx = NemesisContext(None, nodes, None, None, random.Random(1), 2.0,  # type: ignore[arg-type]
                         finishing=threading.Event())
    assert len(cls().select(ctx, None) or []) == 3


def test_the_workload_keys_a_lock_may_set_are_the_workloads_own() -> None:
    """registry checks workload_defaults against WORKLOAD_KEYS; the client hands them to
    MutexParams: the two lists must not drift apart."""
    from dataclasses import fields

    from harness.core.locks import WORKLOAD_KEYS
    from workloads.mutex import MutexParams

    run_given = {"process", "lock_name", "seed", "end_ns", "holds_seen"}
    assert set(WORKLOAD_KEYS) == {f.name for f in fields(MutexParams)} - run_given


@pytest.mark.parametrize(("option", "problem"), [
    (Option(int, 3), None),
    (Option(float, 2), None),  # an int is a float, as in code
    (Option(str, None, "no default"), None),
    (Option(bool, False), None),
    (Option(str, "a", choices=("a", "b")), None),
    (Option(int, "3"), "default '3' is not a int"),
    (Option(float, True), "default True is not a float"),
    (Option(float, float("inf")), "default inf is not a float"),
    (Option(dict, {}), "type 'dict' is not one of bool, int, float, str"),
    (Option(int, 0, minimum=1), "default 0: must be at least 1, got 0"),
    (Option(str, "a", choices="ab"), "choices must be a tuple, got 'ab'"),
    (Option(float, 1.0, maximum="2"), "minimum and maximum must be numbers, got '2'"),
])
def test_an_option_declaration_is_checked(option: Option, problem: str | None) -> None:
    assert option.problem() == problem
