"""read_capped: a file of ours read whole, what keeps it from being read one line of the
caller's error class (a TOML file: 64; a run's JSON: 3)."""

from __future__ import annotations

from pathlib import Path

import pytest

from harness.controller.store import RunDir
from harness.core.capped import read_capped
from harness.core.errors import EXIT_SETUP, EXIT_USAGE, HarnessError, UsageError


def test_the_bytes_up_to_the_limit_and_one_line_past_it(tmp_path: Path) -> None:
    f = tmp_path / "a.toml"
    f.write_bytes(b"x" * (1 << 20))
    assert read_capped(f, 1 << 20, "spec a.toml", "TOML file") == b"x" * (1 << 20)
    f.write_bytes(b"x" * ((1 << 20) + 1))
    with pytest.raises(UsageError) as e:
        read_capped(f, 1 << 20, "spec a.toml", "TOML file", UsageError)
    assert str(e.value) == "spec a.toml is larger than 1 MiB: not a TOML file of ours"
    assert e.value.exit_code == EXIT_USAGE


def test_missing_and_a_directory_are_the_callers_error(tmp_path: Path) -> None:
    with pytest.raises(UsageError) as e:
        read_capped(tmp_path / "nowhere.toml", 10, "spec nowhere.toml", "TOML file", UsageError)
    assert str(e.value) == "spec nowhere.toml: no such file"
    run = RunDir(tmp_path)
    run.test_json.mkdir()
    with pytest.raises(HarnessError) as e:
        run.load_test()
    assert str(e.value) == f"{run.test_json}: a directory, not a test.json"
    assert e.value.exit_code == EXIT_SETUP
