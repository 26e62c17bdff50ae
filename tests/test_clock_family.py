"""The clock family's contracts, no servers: which clock a DB lets a fault move (refused in one
line, exit 64, before any server starts), and how libfaketime is told to fake it."""

from __future__ import annotations

from pathlib import Path

import pytest

from dbs.faketime import check_clock, faketime_env
from dbs.postgres import PostgresDB
from dbs.redis import RedisDB
from dbs.zookeeper import ZooKeeperDB
from harness.cli import main
from harness.core.capabilities import clock_unmet
from harness.core.errors import EXIT_USAGE, HarnessError


class VdsoDB:
    name = "vdso-db"
    clock_mechanism = "vdso"
    clocks = ("wall", "monotonic", "both")


class OldDB:
    """A DB class from before the declarations: libfaketime, wall clock only."""

    name = "old-db"


@pytest.mark.parametrize(("db", "clock", "says"), [
    (RedisDB(), "wall", None),
    (RedisDB(), "both", None),
    (RedisDB(), "monotonic", "cannot move the monotonic clock alone"),
    (RedisDB(), "tai", "is not one of wall, monotonic, both"),
    (OldDB(), "wall", None),
    (OldDB(), "both", "old-db moves its wall clock, not clock-id both"),
    (OldDB(), "monotonic", "cannot move the monotonic clock alone"),
    (PostgresDB(), "monotonic", "cannot move the monotonic clock alone"),
    (ZooKeeperDB(), "monotonic", None),  # libfaketime both, the wall set back by the vDSO patch
    (VdsoDB(), "monotonic", None),
    (VdsoDB(), "both", None),
])
def test_a_clock_id_the_db_does_not_list_is_refused(db: object, clock: str,
                                                     says: str | None) -> None:
    reason = clock_unmet(db, clock)
    if says is None:
        assert reason is None
    else:
        assert reason is not None and says in reason and "\n" not in reason


def test_libfaketime_fakes_the_wall_clock_alone_or_both() -> None:
    wall = faketime_env("/lib.so", "/n1/faketime", "wall")
    both = faketime_env("/lib.so", "/n1/faketime", "both")
    assert wall == {"LD_PRELOAD": "/lib.so", "FAKETIME_TIMESTAMP_FILE": "/n1/faketime",
                    "FAKETIME_NO_CACHE": "1", "FAKETIME_FORCE_MONOTONIC_FIX": "0",
                    "FAKETIME_DONT_FAKE_MONOTONIC": "1"}
    assert both == {**{k: v for k, v in wall.items() if k != "FAKETIME_DONT_FAKE_MONOTONIC"},
                    "FAKETIME_FORCE_MONOTONIC_FIX": "1"}
    with pytest.raises(HarnessError, match="not 'monotonic'"):
        faketime_env("/lib.so", "/n1/faketime", "monotonic")


def test_a_move_of_another_clock_than_the_server_fakes_raises() -> None:
    check_clock("n1", "wall", "wall")
    check_clock("n1", "both", "both")
    with pytest.raises(HarnessError, match="n1: its server fakes the wall clock"):
        check_clock("n1", "wall", "both")
    with pytest.raises(HarnessError, match="n1: its server fakes the both clock"):
        check_clock("n1", "both", "wall")
    with pytest.raises(HarnessError, match="not started under libfaketime"):
        check_clock("n1", None, "wall")


@pytest.mark.parametrize(("argv", "says"), [
    (["--db", "redis", "--lock", "redis-setnx", "--nemesis", "clock",
      "--nemesis-opt", "clock-id=monotonic"], "cannot move the monotonic clock alone"),
    (["--db", "redis", "--lock", "redis-setnx", "--nemesis", "clock-strobe",
      "--nemesis-opt", "clock-id=tai"], "clock-id="),
])
def test_run_refuses_a_clock_the_db_cannot_move_before_start(
        argv: list[str], says: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.chdir(tmp_path)
    try:
        code = main(["run", *argv, "--time-limit", "5"])
    except SystemExit as e:
        code = int(e.code or 0)
    err = capsys.readouterr().err.strip().splitlines()
    assert code == EXIT_USAGE
    assert len(err) == 1 and err[0].startswith("harness: ") and says in err[0], err
    assert not (tmp_path / "results").exists() or not any((tmp_path / "results").iterdir())



def test_the_clock_rows_suite_holds_issue_26s_rows() -> None:
    from harness.presentation import suite as suite_mod

    s = suite_mod.load(Path(__file__).parent.parent / "suites" / "clocks.toml")
    assert len(s.entries) == 42 and s.estimate() <= 30 * 60, len(s.entries)
    assert all(str(e.options["nemesis"]).split(":")[0].startswith("clock") for e in s.entries)
    rows = {(e.options["db"], e.options.get("workload", "mutex"), e.expect) for e in s.entries}
    assert rows == {("redis", "mutex", "invalid"), ("redis-masters", "mutex", "invalid"),
                    ("redis-masters", "mutex", "valid"), ("zookeeper", "mutex", "valid"),
                    ("zookeeper", "mutex", "invalid"), ("zookeeper", "fenced", "valid"),
                    ("postgres", "mutex", "valid"), ("etcd", "mutex", "valid"),
                    ("etcd", "mutex", "invalid"), ("etcd", "fenced", "valid")}


def test_a_steps_params_cannot_change_the_runs_clock_id(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.chdir(tmp_path)
    (tmp_path / "steps.toml").write_text(
        '[[step]]\nat = 1\nfault = "clock"\nparams = { clock-id = "both" }\n')
    try:
        code = main(["run", "--lock", "redis-setnx", "--config", "steps.toml",
                     "--time-limit", "5"])
    except SystemExit as e:
        code = int(e.code or 0)
    err = capsys.readouterr().err.strip().splitlines()
    assert code == EXIT_USAGE
    assert len(err) == 1 and "params clock-id = 'both': the clock id is one for the run" in err[0]
