"""`harness check`'s arguments read without argparse (harness/check_argv.py): wherever it
answers, argparse gives the same answer; everything else is left to argparse; and a plain
`harness check FILE` imports neither argparse nor pathlib (what the fast path is for)."""

from __future__ import annotations

import math
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from harness.check_argv import plain_path, quick_check_args
from harness.cli_parser import build_parser

OPTIONS = ["--model", "--time-limit", "--max-memory", "--mod", "--time", "--model=x", "-h",
           "--help", "--", "-", "--nemesis", "-m"]
VALUES = ["cas-register", "mutex", "5", "0.5", "1e3", "1_000", "nan", "inf", "-3", "x", "",
          "2G", " 7 "]
PATHS = ["a.log", "dir/b.edn", "./c.jsonl", "d/", "a//b", "/abs/p.log", "..", "../x", "", "/",
         "//net/x", "e f.txt", "a/./b", "results/run-1", "x.log/"]


def by_argparse(words: list[str]) -> dict[str, Any] | None:
    """argparse's reading, paths as strings; None where it refuses the command line."""
    try:
        args = build_parser("check").parse_args(words)
    except SystemExit:
        return None
    out = vars(args)
    out["run_dir"] = [str(p) for p in out["run_dir"]]
    return out


def same(a: dict[str, Any], b: dict[str, Any]) -> bool:
    def norm(d: dict[str, Any]) -> dict[str, Any]:
        return {k: ("nan" if isinstance(v, float) and math.isnan(v) else v) for k, v in d.items()}

    return norm(a) == norm(b)


words = st.lists(st.one_of(st.sampled_from(OPTIONS), st.sampled_from(VALUES),
                           st.sampled_from(PATHS)), max_size=7)


@settings(max_examples=600, deadline=None)
@given(words)
def test_where_it_answers_argparse_answers_the_same(rest: list[str]) -> None:
    argv = ["check", *rest]
    quick = quick_check_args(argv)
    if quick is None:
        return
    expected = by_argparse(argv)
    assert expected is not None, f"argparse refuses {argv} but the fast path read {quick}"
    assert same(vars(quick), expected), (argv, vars(quick), expected)


@pytest.mark.parametrize("argv", [
    ["check", "a.log"],
    ["check", "a.log", "b.edn", "results/run-1"],
    ["check", "a.log", "--model", "cas-register"],
    ["check", "--time-limit", "120", "a.log", "b.log"],
    ["check", "/abs/h.jsonl", "--max-memory", "2G", "--time-limit", "5"],
])
def test_the_common_forms_take_the_fast_path(argv: list[str]) -> None:
    quick = quick_check_args(argv)
    assert quick is not None
    assert same(vars(quick), by_argparse(argv) or {})


@pytest.mark.parametrize("argv", [
    ["check"], ["check", "--help"], ["check", "-h"], ["check", "a.log", "--model=mutex"],
    ["check", "a.log", "--mod", "mutex"], ["check", "--", "a.log"],
    ["check", "a.log", "--time-limit", "-1"], ["check", "a.log", "--time-limit", "soon"],
    ["check", "a.log", "--model"], ["check", "a.log", "--model", "m", "b.log"],
    ["check", "./a.log"], ["check", "dir/"], ["check", ""], ["run", "a.log"], [],
    ["check", "a.log", "--nemesis", "pause"],
])
def test_anything_else_is_left_to_argparse(argv: list[str]) -> None:
    assert quick_check_args(argv) is None


@given(st.text(alphabet="ab./", max_size=8))
def test_a_plain_path_is_one_pathlib_spells_the_same(word: str) -> None:
    if plain_path(word):
        assert str(Path(word)) == word


def test_a_plain_check_imports_neither_argparse_nor_pathlib_nor_typing(tmp_path: Path) -> None:
    """Nor json, for a Jepsen log. What the interpreter imported before is not counted: an
    editable install's import finder brings pathlib into every process."""
    log = tmp_path / "h.log"
    log.write_text("INFO  jepsen.util - 0\t:invoke\t:write\t1\n"
                   "INFO  jepsen.util - 0\t:ok\t:write\t1\n"
                   "INFO  jepsen.util - 1\t:invoke\t:read\tnil\n"
                   "INFO  jepsen.util - 1\t:ok\t:read\t1\n")
    probe = ("import sys; before = set(sys.modules); from harness.cli import main; "
             "code = main(['check', sys.argv[1]]); new = set(sys.modules) - before; "
             "print(sorted({'argparse', 'pathlib', 'json', 'orjson', 'typing'} & new)); "
             "sys.exit(code)")
    proc = subprocess.run([sys.executable, "-c", probe, str(log)], capture_output=True,
                          text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.startswith("VALID"), proc.stdout
    assert proc.stdout.splitlines()[-1] == "[]"
