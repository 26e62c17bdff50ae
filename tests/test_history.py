"""Reading, writing and merging histories; bad input gives errors that name the line."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from checker.sessions import client_pairs
from harness.core.column_lines import write_history
from harness.core.history import HistoryError, parse_lines
from harness.core.history_file import read_history
from harness.core.journal import JournalWriter, merge_journals


def line(**kw: object) -> str:
    base = {"time": 1, "process": 0, "type": "invoke", "f": "acquire", "value": None}
    base.update(kw)
    return json.dumps(base)


@pytest.mark.parametrize(
    ("text", "message"),
    [
        (line() + "\n" + '{"time": 2, "process": 0, "ty', "line 2: not valid JSON"),
        (line(type="maybe"), "line 1: unknown type 'maybe'"),
        ('{"time": 1, "process": 0, "type": "ok"}', "line 1: missing field 'f'"),
        (line(time=5) + "\n" + line(time=3), "line 2: time 3 goes backwards"),
        (line(time=-1), "line 1: 'time' must be a non-negative integer"),
        ("[1, 2]", "line 1: expected a JSON object"),
    ],
)
def test_bad_lines_are_named(tmp_path: Path, text: str, message: str) -> None:
    p = tmp_path / "history.jsonl"
    p.write_text(text)
    with pytest.raises(HistoryError, match=message):
        read_history(p)


def test_unreadable_file(tmp_path: Path) -> None:
    with pytest.raises(HistoryError, match="cannot read"):
        read_history(tmp_path / "missing.jsonl")
    binary = tmp_path / "bin.jsonl"
    binary.write_bytes(b"\xff\xfe\x00")
    with pytest.raises(HistoryError):
        read_history(binary)


@settings(max_examples=200, deadline=None)
@given(st.text(max_size=300))
def test_fuzzed_input_is_refused_at_its_first_line_that_holds_anything(text: str) -> None:
    """Random text is no history: a HistoryError naming the first line that is not blank (no
    random line is an op), or no ops at all when every line is blank."""
    from harness.core.history import parse_lines

    lines = text.splitlines()
    filled = [n for n, x in enumerate(lines, 1) if x.strip()]
    if not filled:
        assert parse_lines(lines, "fuzz") == []
        return
    with pytest.raises(HistoryError, match=rf"^fuzz line {filled[0]}: "):
        parse_lines(lines, "fuzz")


def test_journals_merge_by_time_and_survive_a_torn_line(tmp_path: Path) -> None:
    a = JournalWriter(tmp_path / "c0.jsonl", 0, t0_ns=0)
    b = JournalWriter(tmp_path / "c1.jsonl", 1, t0_ns=0)
    a.record("invoke", "acquire")
    b.record("invoke", "acquire")
    a.record("ok", "acquire", token=1)
    a.close()
    b.close()
    with (tmp_path / "c1.jsonl").open("a") as fh:
        fh.write('{"time": 99, "process": 1, "ty')  # the writer was killed mid-line
    merged = merge_journals(sorted(tmp_path.glob("*.jsonl")))
    assert [op["index"] for op in merged] == [0, 1, 2]
    assert [op["time"] for op in merged] == sorted(op["time"] for op in merged)
    assert merged[-1]["token"] == 1 or any(op.get("token") == 1 for op in merged)
    write_history(tmp_path / "history.jsonl", merged)
    assert read_history(tmp_path / "history.jsonl") == merged


def test_a_written_history_reads_back_as_it_was(tmp_path: Path) -> None:
    """history.jsonl as orjson writes it: key order, non-ASCII text, nested values, floats and
    huge-but-legal ints read back equal; a lone surrogate (an error text decoded with
    surrogateescape) is spelled out, as in a journal; each op on one line."""
    ops: list[dict[str, Any]] = [
        {"index": 0, "time": 1, "process": 0, "type": "invoke", "f": "acquire",
         "value": {"timeout": 5.0}, "lock": "l\u00e9"},
        {"index": 1, "time": 2, "process": 0, "type": "info", "f": "acquire", "value": None,
         "lock": "l\u00e9", "error": "caf\u00e9 \u2603 \"quoted\"\nnewline"},
        {"index": 2, "time": 3, "process": "nemesis", "type": "info", "f": "pause",
         "value": [1, 2.5, True, None, {"a": [2**62]}], "targets": ["n1"]},
        {"index": 3, "time": 4, "process": 1, "type": "info", "f": "release", "value": None,
         "error": "bad \udcff byte"},
    ]
    path = tmp_path / "history.jsonl"
    write_history(path, ops)
    back = parse_lines(path.read_bytes().splitlines(), "h")  # (a fragment: not well-formed)
    assert [list(op) for op in back] == [list(op) for op in ops]  # fields in their order
    assert back[:3] == ops[:3]
    assert back[3]["error"] == "bad \\udcff byte"
    assert len(path.read_bytes().splitlines()) == 4


def test_pairs_match_invocations_with_completions() -> None:
    h = [
        {"time": 1, "process": 0, "type": "invoke", "f": "acquire"},
        {"time": 2, "process": 1, "type": "invoke", "f": "acquire"},
        {"time": 3, "process": 0, "type": "ok", "f": "acquire"},
        {"time": 4, "process": "nemesis", "type": "info", "f": "pause"},
        {"time": 5, "process": 0, "type": "info", "f": "release"},
    ]
    got = [(i["time"], None if c is None else c["time"]) for i, c in client_pairs(h)]
    assert got == [(1, 3), (2, None), (5, 5)]  # (a completion of nothing: its own pair)


# the common op's fast path accepts exactly what the full check accepts ------------------------
_edge_ints = st.sampled_from([0, 1, -1, 2**63 - 1, 2**63, -(2**63), 10**30])
_scalars = st.one_of(st.none(), st.booleans(), _edge_ints, st.integers(), st.floats(),
                     st.text(max_size=3))
_names = st.one_of(st.sampled_from(["acquire", "ok", "lock", ""]), st.text(max_size=3),
                   st.just("x" * 201), st.just("y" * 200), _edge_ints, st.none(), st.booleans())
_values = st.one_of(
    _scalars,
    st.dictionaries(st.sampled_from(["session", "validity", "seq", "kind", "other", "token"]),
                    _scalars, max_size=4),
    st.dictionaries(st.text(max_size=2), _scalars, min_size=17, max_size=18),
    st.lists(_scalars, max_size=2),
    st.dictionaries(st.just("nested"), st.dictionaries(st.just("a"), _scalars), max_size=1))
_fields = {"time": _edge_ints, "process": st.one_of(_edge_ints, _names),
           "type": st.one_of(st.sampled_from(["invoke", "ok", "fail", "info", "okay"]), _names,
                             st.lists(st.none(), max_size=1)),
           "f": _names, "index": st.one_of(_edge_ints, st.booleans(), st.none()),
           "lock": st.one_of(_names, st.none()), "value": _values,
           "token": st.one_of(_edge_ints, st.none(), st.text(max_size=1))}


_good = {"time": st.integers(0, 10**12), "process": st.integers(0, 9),
         "type": st.sampled_from(["invoke", "ok", "fail", "info"]),
         "f": st.sampled_from(["acquire", "release", "write"]), "index": st.integers(0, 99),
         "lock": st.sampled_from(["lock", "k1"]), "value": st.none()}


@st.composite
def op_like(draw: st.DrawFn) -> dict:
    """A good op, then a field or two made odd, dropped or added: the edges of the fast path."""
    obj = {k: draw(v) for k, v in _good.items()}
    for k in draw(st.lists(st.sampled_from(sorted(_good)), max_size=2)):
        obj.pop(k, None)
    for k in draw(st.lists(st.sampled_from([*_fields, "extra"]), max_size=2)):
        obj[k] = draw(_fields[k]) if k in _fields else draw(_values)
    return obj


@settings(max_examples=2000, deadline=None)
@given(op_like())
def test_the_fast_path_accepts_what_the_full_check_accepts(obj: dict) -> None:
    from harness.core import history

    def verdict(check: Any) -> str | None:
        try:
            check(dict(obj), ("h", 1))
        except HistoryError as e:
            return str(e)
        return None

    fast, full = verdict(history.validate_op), verdict(history._validate)
    assert (fast is None) == (full is None), (fast, full)
    assert fast == full
