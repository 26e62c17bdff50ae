"""history.jsonl written from a history in columns is byte for byte the one written from its
dicts."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from harness.core.column_lines import history_lines, write_history
from harness.core.run_history import merged_columns

TEXTS = st.one_of(st.sampled_from(["", "lock", "a%d", "%%", "é\u2028\"x", "\\", "a\nb",
                                   "\ud800", "x\udcff"]), st.text(max_size=4))
SCALARS = st.one_of(st.none(), st.booleans(), st.integers(-2**63, 2**63 - 1),
                    st.floats(), st.sampled_from([-0.0, 0.0, 1e16, 1e-7, 2.0]), TEXTS)
VALUES = st.one_of(st.none(), st.dictionaries(st.sampled_from(["session", "validity", "%s",
                                                               "k\ud800"]), SCALARS,
                                              max_size=3), st.just([1]))


@st.composite
def histories(draw: Any) -> list[dict[str, Any]]:
    """Merged histories: clients' ops of a few layouts with fields of every kind, names and
    keys with ``%`` or no orjson encoding, now and then a nemesis op or a value no column
    holds."""
    ops: list[dict[str, Any]] = []
    t = 0
    for _ in range(draw(st.integers(0, 40))):
        t += draw(st.integers(0, 3))
        if draw(st.integers(0, 9)) == 0:
            ops.append({"time": t, "process": "nemesis", "type": "info", "f": "pause",
                        "value": draw(st.sampled_from(["start", None, ["c1"]]))})
            continue
        op: dict[str, Any] = {"time": t, "process": draw(st.integers(0, 3)),
                              "type": draw(st.sampled_from(["invoke", "ok", "fail", "info"])),
                              "f": draw(st.sampled_from(["acquire", "a%b", "\ud800", "r"])),
                              "value": draw(VALUES)}
        if draw(st.booleans()):
            op["lock"] = draw(st.one_of(st.none(), TEXTS))
        for key in ("token", "error", "%extra"):
            if draw(st.integers(0, 3)) == 0:
                op[key] = draw(SCALARS)
        ops.append(op)
    return [{"index": i, **op} for i, op in enumerate(ops)]


def written(tmp: Path, name: str, history: Any) -> bytes:
    path = tmp / name
    write_history(path, history)
    return path.read_bytes()


@settings(max_examples=400, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(histories(), st.sampled_from([1, 3, 1 << 15]))
def test_history_jsonl_from_columns_is_the_dicts_byte_for_byte(
        tmp_path: Path, ops: list[dict[str, Any]], block: int) -> None:
    h = merged_columns(ops)
    if h is None:
        return
    want = written(tmp_path, "dicts.jsonl", ops)
    assert written(tmp_path, "columns.jsonl", h) == want
    assert b"".join(history_lines(h, block)) == want


def test_the_lines_of_every_kind_of_field_and_name(tmp_path: Path) -> None:
    ops = [{"time": 5, "process": 0, "type": "ok", "f": "acquire",
            "value": {"session": -3, "validity": 1e16, "kind": "a%s", "held": True,
                      "none": None}, "lock": None, "error": "\ud800", "token": 2**63 - 1},
           {"time": 6, "process": 1, "type": "fail", "f": "a%b", "value": None,
            "error": False},
           {"time": 6, "process": "nemesis", "type": "info", "f": "kill", "value": ["c0"]},
           {"time": 7, "process": 0, "type": "ok", "f": "acquire",
            "value": {"session": 4, "validity": -0.0, "kind": "", "held": False,
                      "none": None}, "lock": None, "error": "x", "token": -1}]
    ops = [{"index": i, **op} for i, op in enumerate(ops)]
    h = merged_columns(ops)
    assert h is not None and len(h.clients) == 3
    assert written(tmp_path, "c.jsonl", h) == written(tmp_path, "d.jsonl", ops)
    with pytest.raises(ValueError):
        list(history_lines(h, 0))  # (a block of no places)
