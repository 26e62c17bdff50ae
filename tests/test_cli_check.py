"""`harness check` on foreign history files and `harness export` to Jepsen EDN, end to end."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

import pytest

from tests.harness_runs import bounded

STORED = Path(__file__).parent / "data" / "runs" / "redis-setnx-pause"


def harness(*args: str) -> subprocess.CompletedProcess[str]:
    return bounded([sys.executable, "-m", "harness.cli", *args], timeout=120)


def test_export_to_edn_and_check_it_back(tmp_path: Path) -> None:
    run = tmp_path / "run"
    shutil.copytree(STORED, run)
    exported = harness("export", str(run))
    assert exported.returncode == 0, exported.stderr
    edn = run / "history.edn"
    assert edn.read_text().lstrip().startswith(("[", "{"))
    checked = harness("check", str(edn), "--model", "mutex")
    assert checked.returncode == 1, checked.stdout + checked.stderr
    assert "acquired at" in checked.stdout


def test_a_valid_history_file_exits_0(tmp_path: Path) -> None:
    h = tmp_path / "ok.jsonl"
    h.write_text("\n".join([
        '{"time": 1, "process": 0, "type": "invoke", "f": "acquire"}',
        '{"time": 2, "process": 0, "type": "ok", "f": "acquire"}',
        '{"time": 3, "process": 1, "type": "invoke", "f": "acquire"}',
        '{"time": 4, "process": 0, "type": "invoke", "f": "release"}',
        '{"time": 5, "process": 0, "type": "ok", "f": "release"}',
        '{"time": 6, "process": 1, "type": "ok", "f": "acquire"}',
    ]) + "\n")
    assert harness("check", str(h)).returncode == 0


def test_bad_model_and_truncated_file_are_one_line_errors(tmp_path: Path) -> None:
    h = tmp_path / "bad.jsonl"
    h.write_text('{"time": 1, "process": 0, "type": "invoke", "f": "acq')
    bad = harness("check", str(h))
    assert bad.returncode == 3 and bad.stderr.count("\n") == 1 and "line 1" in bad.stderr
    model = harness("check", str(h), "--model", "queue")
    assert model.returncode == 64 and "unknown model" in model.stderr


def test_several_files_in_one_call_exit_with_the_worst_verdict(tmp_path: Path) -> None:
    ok = tmp_path / "ok.jsonl"
    ok.write_text('{"time": 1, "process": 0, "type": "invoke", "f": "acquire"}\n'
                  '{"time": 2, "process": 0, "type": "ok", "f": "acquire"}\n')
    bad = tmp_path / "bad.jsonl"
    bad.write_text(ok.read_text() + '{"time": 3, "process": 1, "type": "invoke", "f": '
                   '"acquire"}\n{"time": 4, "process": 1, "type": "ok", "f": "acquire"}\n')
    broken = tmp_path / "broken.jsonl"
    broken.write_text('{"time": 1, "process": 0, "type": "invoke", "f": "acq')
    both = harness("check", str(ok), str(ok))
    assert both.returncode == 0 and both.stdout.count("VALID") == 2
    mixed = harness("check", str(broken), str(ok))
    assert mixed.returncode == 3 and "line 1" in mixed.stderr and "VALID" in mixed.stdout
    worst = harness("check", str(ok), str(broken), str(bad))
    assert worst.returncode == 1, worst.stdout + worst.stderr
    assert "INVALID" in worst.stdout and worst.stdout.count("VALID") == 2


def test_a_large_file_says_what_it_is_doing_on_stderr(tmp_path: Path, monkeypatch: Any,
                                                      capsys: Any) -> None:
    """A history of millions of ops takes seconds to read: at a terminal, progress on stderr,
    the verdict alone on stdout; a small file, or stderr not a terminal (a script, a log):
    nothing but the verdict."""
    from harness.core import history_file
    from harness.presentation import check_file

    h = tmp_path / "ok.jsonl"
    h.write_text("\n".join(f'{{"time": {t}, "process": 0, "type": "{typ}", "f": "{f}"}}'
                           for t, (typ, f) in enumerate([("invoke", "acquire"), ("ok", "acquire"),
                                                         ("invoke", "release"), ("ok", "release")]
                                                        * 3, 1)) + "\n")
    limits = {"time_limit": 60.0, "max_states": 10**6, "max_memory": 1 << 30}  # no RLIMIT_AS
    assert check_file.check_file(h, None, limits) == 0
    small = capsys.readouterr()
    assert small.err == "" and small.out.startswith("VALID")
    monkeypatch.setattr(check_file, "PROGRESS_BYTES", 1)
    monkeypatch.setattr(history_file, "PROGRESS_LINES", 2)
    assert check_file.check_file(h, None, limits) == 0
    assert capsys.readouterr() == small  # not a terminal
    monkeypatch.setattr(sys.stderr, "isatty", lambda: True)
    assert check_file.check_file(h, None, limits) == 0
    large = capsys.readouterr()
    assert large.out == small.out
    err = large.err.rstrip("\n").split("\n")  # not splitlines: "\r" ends a line there
    assert err[0] == f"reading {h} (0 MiB)"
    assert "ok.jsonl:" in err[1] and "% of 0 MiB" in err[1]
    assert err[1].startswith("\r")  # one line rewritten in place
    assert err[-1].startswith("read 12 ops in ") and err[-1].endswith("checking them as mutex")


@pytest.mark.parametrize("unbuffered", ["1", ""])
@pytest.mark.parametrize(("run", "verdict"), [("redis-setnx-none", 0),
                                              ("redis-setnx-pause-seed9", 1)])
def test_a_reader_that_left_never_changes_the_exit_code(run: str, verdict: int,
                                                        unbuffered: str) -> None:
    """`harness check FILE | head -1`: the reader closes the pipe before the verdict is printed
    in full. Here the pipe has no reader at all from the start (its read end is closed before
    the command starts), so every write meets EPIPE, line by line (unbuffered) or at the final
    flush: the exit code is the verdict's, with nothing on stderr."""
    read, write = os.pipe()
    os.close(read)
    env = {**os.environ, "PYTHONUNBUFFERED": unbuffered}
    with tempfile.TemporaryFile("w+") as err:
        try:
            proc = subprocess.Popen([sys.executable, "-m", "harness.cli", "check",
                                     str(STORED.parent / run / "history.jsonl")],
                                    stdout=write, stderr=err, stdin=subprocess.DEVNULL, env=env)
        finally:
            os.close(write)
        code = proc.wait(timeout=120)
        err.seek(0)
        assert (code, err.read()) == (verdict, "")


OP_JSON = '{{"index": 0, "time": 0, "process": 1, "type": "invoke", "f": "acquire", "value": {}}}'
OP_EDN = "{{:index 0, :time 0, :process 1, :type :invoke, :f :acquire, :value {}}}"


@pytest.mark.parametrize(("depth", "shape", "name"), [
    *((10**6, shape, name) for shape in ("list", "map")
      for name in ("h.jsonl", "h.edn", "h")),  # (a map's file is over 4 MB: read in bulk)
    (10**7, "list", "h.jsonl"), (10**7, "list", "h.edn"),
])
def test_a_value_nested_to_any_depth_is_refused_in_one_line(depth: int, shape: str, name: str,
                                                            tmp_path: Path) -> None:
    edn = name.endswith(".edn")
    opener, closer = {"list": ("[", "]"), "map": ("{:a " if edn else '{"a": ', "}")}[shape]
    path = tmp_path / name
    path.write_text((OP_EDN if edn else OP_JSON).format(opener * depth + "1" + closer * depth)
                    + "\n")
    got = harness("check", str(path))
    assert got.returncode == 3 and got.stdout == "", got.stderr
    assert re.match(rf"harness: {re.escape(str(path))} line 1(?: column \d+)?: ", got.stderr)
    assert got.stderr.count("\n") == 1
    assert "nested" in got.stderr, got.stderr
