"""Reading, writing and merging histories; bad input gives errors that name the line."""

from __future__ import annotations

import contextlib
import json
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from harness.core.history import HistoryError, pairs, read_history, write_history
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
def test_fuzzed_input_raises_only_history_errors(text: str) -> None:
    from harness.core.history import parse_lines

    with contextlib.suppress(HistoryError):
        parse_lines(text.splitlines(), "fuzz")


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


def test_pairs_match_invocations_with_completions() -> None:
    h = [
        {"time": 1, "process": 0, "type": "invoke", "f": "acquire"},
        {"time": 2, "process": 1, "type": "invoke", "f": "acquire"},
        {"time": 3, "process": 0, "type": "ok", "f": "acquire"},
        {"time": 4, "process": "nemesis", "type": "info", "f": "pause"},
    ]
    got = [(i["time"], None if c is None else c["time"]) for i, c in pairs(h)]
    assert got == [(1, 3), (2, None), (4, 4)]
