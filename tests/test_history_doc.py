"""docs/history.md's example checker, run as the page shows it: right on a list of dicts and on
the same ops in columns (a ColumnHistory), and it catches what it is about."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest

from harness.core.run_history import ColumnHistory, merged_columns

DOC = Path(__file__).resolve().parents[1] / "docs" / "history.md"


def example() -> Any:
    """The page's one python block, executed: its checker class."""
    (code,) = re.findall(r"```python\n(.*?)```", DOC.read_text(), re.S)
    assert len(code.strip().splitlines()) <= 25  # a short example stays short
    space: dict[str, Any] = {}
    exec(compile(code, str(DOC), "exec"), space)
    return space["ReleaseHeld"]


def ops(*steps: tuple[int, str, str]) -> list[dict[str, Any]]:
    return [{"index": i, "time": i * 10, "process": p, "type": t, "f": f, "value": None,
             "lock": "l"} for i, (p, t, f) in enumerate(steps)]


GRANTED = ops((0, "invoke", "acquire"), (0, "ok", "acquire"), (1, "invoke", "acquire"),
              (0, "invoke", "release"), (0, "ok", "release"), (1, "info", "acquire"),
              (2, "invoke", "acquire"), (2, "fail", "acquire"))
MAYBE = ops((0, "invoke", "acquire"), (0, "info", "acquire"),
            (0, "invoke", "release"), (0, "ok", "release"))
STRAY = ops((0, "invoke", "acquire"), (0, "fail", "acquire"),
            (0, "invoke", "release"), (0, "ok", "release"))
TWICE = ops((0, "invoke", "acquire"), (0, "ok", "acquire"), (0, "invoke", "release"),
            (0, "ok", "release"), (0, "invoke", "release"), (0, "ok", "release"))


@pytest.mark.parametrize(("history", "stray"), [(GRANTED, []), (MAYBE, []), (STRAY, [3]),
                                                (TWICE, [5])])
def test_the_example_checker_judges_dicts_and_columns_alike(history: list[dict[str, Any]],
                                                           stray: list[int]) -> None:
    check = example().check
    columns = merged_columns(history)
    assert isinstance(columns, ColumnHistory) and not columns.others
    for h in (history, columns):
        result = check(h)
        assert result["valid"] is (not stray)
        assert [op["index"] for op in result["stray_releases"]] == stray
