"""What is derived from a history once (harness.core.checks.Shared, derive): the client op pairs,
the clients' lives, the resource log, the report's grounds. Built once per shared history and
read by every checker, the summary and the report; the verdict, results.json and report.html
are the same as when each is built again from a plain list."""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from checker.lives import Lives
from checker.sessions import client_pairs, resource_log
from harness.controller.checking import _tested, _untested, check_history, untested
from harness.controller.store import RunDir
from harness.core.checks import WELL_FORMED, Shared, derive, well_formed
from harness.core.column_lines import write_history
from harness.core.history import HistoryError, Op
from harness.core.run_history import ColumnHistory
from harness.presentation.report import model as report_model
from harness.presentation.report.html import render
from harness.presentation.report.incidents import incidents
from tests import synth_history


def test_derive_builds_once_per_shared_history_and_every_time_on_a_list() -> None:
    calls: list[int] = []

    def build() -> list[int]:
        calls.append(1)
        return [len(calls)]

    shared = Shared([{"time": 0}])
    first = derive(shared, "k", build)
    assert derive(shared, "k", build) is first and len(calls) == 1
    assert derive(Shared(shared), "k", build) == [2]  # a copy is another history
    plain: list[Op] = [{"time": 0}]
    assert derive(plain, "k", build) == [3] and derive(plain, "k", build) == [4]
    assert Shared.of(shared) is shared and type(Shared.of(plain)) is Shared


def test_a_build_that_raises_keeps_nothing() -> None:
    shared = Shared([])

    def broken() -> int:
        raise ValueError("no")

    with pytest.raises(ValueError):
        derive(shared, "k", broken)
    assert "k" not in shared.derived
    assert derive(shared, "k", lambda: 7) == 7


def _invalid_history() -> list[Op]:
    return synth_history.generate(6_000, fault_every=3.0)  # pauses past the TTL: overlaps


def test_shared_and_plain_histories_give_the_same_results_and_report() -> None:
    history = _invalid_history()
    spec = synth_history.spec_for(history)
    plain = check_history(copy.deepcopy(history), spec)
    shared = Shared(history)
    results = check_history(shared, spec)
    assert results["valid"] is False and results["checks"]["mutex"]["lock-overlap-count"] > 0
    strip = {"linearizable"}  # its search time is a measurement
    same = {k: v for k, v in results["checks"].items() if k not in strip}
    assert json.dumps(same) == json.dumps(
        {k: v for k, v in plain["checks"].items() if k not in strip})
    found = incidents(shared, results, None)
    assert [i.title() for i in found] == [
        i.title() for i in incidents(copy.deepcopy(history), results, None)]
    page = render(spec, shared, results, [], {}, [])
    assert page == render(spec, copy.deepcopy(history), results, [], {}, [])


def test_the_checkers_the_summary_and_the_report_read_one_derivation() -> None:
    history = Shared(_invalid_history())
    spec = synth_history.spec_for(history)
    check_history(history, spec)
    lives = Lives.of(history)
    assert client_pairs(history) is lives.paired
    grounds = report_model.grounds(history)
    assert grounds is report_model.grounds(history)
    assert grounds.client_pairs.cols is lives.paired.cols and grounds.grants is lives.grants
    assert resource_log(history) is resource_log(history)
    assert history.derived[WELL_FORMED] is True


def test_a_malformed_history_is_refused_unless_its_reader_found_it_well_formed() -> None:
    ops: list[Op] = [{"index": 0, "time": 1, "process": 0, "type": "invoke", "f": "acquire",
                      "value": None, "lock": "lock"},
                     {"index": 1, "time": 2, "process": 0, "type": "invoke", "f": "acquire",
                      "value": None, "lock": "lock"}]  # a second invoke before a completion
    spec = {"workload": "lock", "clients": 1}
    with pytest.raises(HistoryError, match="invoke before the last completed"):
        check_history(list(ops), spec)
    with pytest.raises(HistoryError, match="invoke before the last completed"):
        check_history(Shared(ops), spec)


def test_a_stored_history_read_back_is_shared_and_not_walked_twice(tmp_path: Path,
                                                                   monkeypatch: pytest.MonkeyPatch
                                                                   ) -> None:
    history = _invalid_history()
    run = RunDir(tmp_path)
    write_history(run.history, [{"index": i, **op} for i, op in enumerate(history)])
    loaded = run.load_history()  # in columns, as the run's own checks had it
    assert type(loaded) is ColumnHistory and loaded.derived[WELL_FORMED] is True
    import harness.controller.checking as checking

    def walked(_: object) -> None:
        raise AssertionError("well-formedness checked again")

    monkeypatch.setattr(checking, "require_checked", walked)
    assert check_history(loaded, synth_history.spec_for(history))["valid"] is False
    assert type(well_formed(list(loaded))) is Shared


@st.composite
def client_histories(draw: st.DrawFn) -> list[Op]:
    """Clients whose requests end ok, fail, or info with an error (a timeout or not), some of
    them acquires, in any order; a completion may have no invoke, the last one none."""
    ops: list[Op] = []
    for t in range(draw(st.integers(0, 30))):
        p = draw(st.integers(0, 3))
        f = draw(st.sampled_from(["acquire", "release"]))
        kind = draw(st.sampled_from(["ok", "fail", "info", "info-timeout", "none"]))
        if draw(st.booleans()) or kind == "none":
            ops.append({"time": 2 * t, "process": p, "type": "invoke", "f": f})
        if kind != "none":
            done: Op = {"time": 2 * t + 1, "process": p, "type": kind[:4], "f": f}
            if kind.startswith("info"):
                done["error"] = "TimeoutError: timed out" if kind == "info-timeout" else "refused"
            ops.append(done)
    return ops


@given(client_histories())
@settings(max_examples=300, deadline=None)
def test_the_usual_run_is_told_tested_from_the_pairs_as_op_by_op(history: list[Op]) -> None:
    """untested's quick pass (over the client pairs) says "tested" exactly when the op by op
    pass finds some acquire ok and no client whose every request failed (and ``errored``)."""
    reason, nothing, errored = _untested(history)
    assert _tested(Shared(history)) == (reason is None)
    assert untested(Shared(history)) == (reason, nothing, errored)
    errors = any("error" in op for op in history if op["type"] != "invoke")
    assert errored == (errors if nothing else reason is not None)  # a fact, not the words


@pytest.mark.parametrize("change", [
    lambda h: h.append(dict(h[0])), lambda h: h.extend([dict(h[0])]),
    lambda h: h.insert(0, dict(h[0])), lambda h: h.pop(), lambda h: h.remove(h[0]),
    lambda h: h.clear(), lambda h: h.sort(key=lambda op: -op["time"]), lambda h: h.reverse(),
    lambda h: h.__setitem__(0, dict(h[1])), lambda h: h.__delitem__(0),
    lambda h: h.__iadd__([dict(h[0])]), lambda h: h.__imul__(2)])
def test_a_shared_history_changed_forgets_what_was_derived(change: Any) -> None:
    history = well_formed(synth_history.generate(200))
    pairs_before = client_pairs(history)
    change(history)
    assert history.derived == {}
    assert client_pairs(history) is not pairs_before
    assert list(client_pairs(history)) == list(client_pairs(list(history)))
