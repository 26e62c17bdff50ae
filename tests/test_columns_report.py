"""report.html and the summary of a ColumnHistory are those of its dicts, byte for byte: a real
stored run, a long synthetic one whose page embeds a sample (density, latency grid, thinned
spans), and hypothesis histories under faults; and the columnar path makes no dict of each
op."""

from __future__ import annotations

import io
import json
import shutil
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from harness.controller.checking import check_history
from harness.controller.store import RunDir
from harness.core.checks import Shared
from harness.core.columns import Columns
from harness.core.history import HistoryError
from harness.core.history_file import read_history
from harness.core.run_history import ColumnHistory, merged_columns
from harness.presentation.report import model as report_model
from harness.presentation.report import pair_arrays, sampling
from harness.presentation.report.html import render
from harness.presentation.report.incidents import frees_of, incidents
from harness.presentation.runs import print_summary
from tests import synth_history
from tests.fault_histories import fault_histories

DATA = Path(__file__).parent / "data" / "runs" / "redis-setnx-pause"


def both(ops: list[dict[str, Any]]) -> tuple[Shared, ColumnHistory]:
    h = merged_columns(ops)
    assert h is not None
    return Shared(ops), h


def page(history: Any, spec: dict[str, Any], results: dict[str, Any],
         test: dict[str, Any] | None = None) -> str:
    return render(spec, history, results, ["logs/n1.log"], test or {}, ["history.jsonl"])


def summary(history: Any, results: dict[str, Any], run: RunDir) -> str:
    out = io.StringIO()
    print_summary(results, run, out, history=history, steps=True)
    return out.getvalue()


def stored(tmp_path: Path) -> tuple[RunDir, dict[str, Any], list[dict[str, Any]],
                                    dict[str, Any]]:
    run_dir = tmp_path / "run"
    shutil.copytree(DATA, run_dir)
    test = json.loads((run_dir / "test.json").read_text())
    return (RunDir(run_dir), test, read_history(run_dir / "history.jsonl"),
            json.loads((run_dir / "results.json").read_text()))


def test_a_real_runs_report_and_summary_are_the_same_bytes(tmp_path: Path) -> None:
    run, test, ops, results = stored(tmp_path)
    assert results["valid"] is False  # violations to place, incidents to fold
    dicts, cols = both(ops)
    assert isinstance(report_model.grounds(cols).client_pairs, pair_arrays.PairArrays)
    want = page(dicts, test["spec"], results, test)
    assert page(cols, test["spec"], results, test) == want
    assert summary(cols, results, run) == summary(dicts, results, run)
    assert "incidents:" in summary(cols, results, run)
    assert [i.to_dict() for i in incidents(cols, results)] == \
        [i.to_dict() for i in incidents(dicts, results)]


@pytest.mark.parametrize("max_pairs", [0, 7, 100, 100_000])
def test_a_sampled_page_is_the_same_on_columns(tmp_path: Path, max_pairs: int) -> None:
    _run, test, ops, results = stored(tmp_path)
    dicts, cols = both(ops)
    want = report_model.build(test["spec"], dicts, results, max_pairs=max_pairs)
    got = report_model.build(test["spec"], cols, results, max_pairs=max_pairs)
    assert json.dumps(got) == json.dumps(want)
    if max_pairs < 100:
        assert got["density"] is not None and got["sampling"]["decimated"]


def test_a_long_synthetic_runs_report_is_the_same_and_made_of_few_dicts(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """30,000 ops: the page embeds a sample (2,000 pairs) around the violations; the
    columnar path makes a dict only of the ops it embeds or places."""
    ops = synth_history.generate(30_000, seed=3)
    spec = synth_history.spec_for(ops, seed=3)
    results = check_history(ops, spec)
    assert results["valid"] is False
    monkeypatch.setattr(sampling, "MAX_PAIRS", 2000)
    dicts, cols = both(ops)
    want = page(dicts, spec, results)
    report_model.grounds(cols)  # (the checkers' own views: not the report's to count)
    made = []
    real = Columns.op

    def counted(self: Columns, i: int) -> dict[str, Any]:
        made.append(i)
        return real(self, i)

    monkeypatch.setattr(Columns, "op", counted)
    got = page(cols, spec, results)
    assert got == want
    model = report_model.build(spec, cols, results)
    assert model["sampling"]["decimated"] and model["latencyGrid"] is not None
    assert len(made) < 3 * 2 * 2000 + 100  # the embedded pairs' ops, a build or two


@settings(max_examples=150, deadline=None)
@given(fault_histories(), st.sampled_from([2, 5, 32_000]))
def test_hypothesis_histories_give_the_same_report_and_summary(
        ops: list[dict[str, Any]], max_pairs: int) -> None:
    if merged_columns(ops) is None:
        return
    spec = synth_history.spec_for(ops) if ops else {}
    try:
        results = check_history(ops, spec)
    except HistoryError:
        return
    dicts, cols = both(ops)
    want = report_model.build(spec, dicts, results, max_pairs=max_pairs)
    got = report_model.build(spec, cols, results, max_pairs=max_pairs)
    assert json.dumps(got) == json.dumps(want)
    assert [i.to_dict() for i in incidents(cols, results)] == \
        [i.to_dict() for i in incidents(dicts, results)]
    dicts, cols = both(ops)
    assert page(cols, spec, results) == page(dicts, spec, results)


def test_pairs_numpy_and_lists_read_apart_are_read_as_the_rules_say() -> None:
    """A process that is a bool (an int to numpy, no client to the well-formedness rules): no
    lane of its own; a time below zero (a list of a test: no reader takes one) counts from
    the first column of the density, as a lock span does: the same page from the list and
    from the columns."""
    ops = [{"time": 5_000_000, "process": 0, "type": "invoke", "f": "acquire", "value": None},
           {"time": 6_000_000, "process": 0, "type": "ok", "f": "acquire", "value": None},
           {"time": 7_000_000, "process": True, "type": "invoke", "f": "x", "value": [1]}]
    ops = [{"index": i, **op} for i, op in enumerate(ops)]
    results = {"valid": True, "checks": {}}
    dicts, cols = both(ops)
    assert pair_arrays.of(cols).lanes() == [0]
    for max_pairs in (0, 100):
        assert json.dumps(report_model.build({}, cols, results, max_pairs=max_pairs)) == \
            json.dumps(report_model.build({}, dicts, results, max_pairs=max_pairs))
    assert page(cols, {}, results) == page(dicts, {}, results)
    early = [{**ops[0], "time": -5_000_000}, ops[1]]
    dicts, cols = both(early)
    got = report_model.build({}, cols, results, max_pairs=0)
    assert got["density"]["lanes"][0][0] == "1"
    assert json.dumps(got) == json.dumps(report_model.build({}, dicts, results, max_pairs=0))


def test_the_one_path_gives_the_report_the_dict_path_gave() -> None:
    """The report's model, incidents and page of 72 histories drawn by :func:`fault_histories`
    (seed 45; as a list of dicts, and in a run's columns) are those the walk over the dict
    pairs made of them at fc2df38, before it went: their digests are the oracle (rows 0 and
    56-58 since, a compare-and-delete lock's: no overlap said to be let in by a release)."""
    import copy
    import hashlib

    oracle = Path(__file__).parent / "data" / "report_oracle.jsonl"
    for n, line in enumerate(oracle.read_text().splitlines()):
        row = json.loads(line)
        ops, max_pairs = row["ops"], row["max_pairs"]
        spec = synth_history.spec_for(ops) if ops else {}
        results = check_history(Shared(copy.deepcopy(ops)), spec)
        for fresh in (lambda ops=ops: Shared(copy.deepcopy(ops)),
                      lambda ops=ops: merged_columns(copy.deepcopy(ops))):
            h = fresh()
            got = [report_model.build(spec, h, results, max_pairs=max_pairs),
                   [i.to_dict() for i in incidents(h, results, frees=frees_of(spec))]]
            assert hashlib.sha256(json.dumps(got).encode()).hexdigest()[:16] == row["model"], n
            page_digest = hashlib.sha256(page(fresh(), spec, results).encode()).hexdigest()
            assert page_digest[:16] == row["page"], n
