"""Run ids (``<test>/<run directory>``) are unique across stores: the run directory's name has a
random tail, so two runs of one test started in the same second, in two stores (two
pytest-xdist workers, two ``--jobs``) or in one, never share the id that their docker labels,
iptables comment, active-run marker and scratch directory are named by. A run directory from
before the tail still loads."""

from __future__ import annotations

import json
import re
import shutil
import sys
from pathlib import Path

import pytest

from harness.controller import store as store_module
from harness.controller.netfilter import Netfilter
from harness.controller.places import scratch_dir
from harness.controller.store import RunDir, Store, open_run
from tests.harness_runs import bounded

OLD_RUN = Path(__file__).parent / "data" / "runs" / "redis-setnx-pause"


def test_two_runs_of_one_test_started_in_one_second_have_two_ids(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(store_module.time, "strftime", lambda fmt: "20261126T120000")
    test = "redis_redis-setnx_mutex_pause"
    runs = [Store(tmp_path / "a").create(test), Store(tmp_path / "b").create(test),
            Store(tmp_path / "a").create(test)]
    ids = [f"{test}/{r.name}" for r in runs]
    assert len(set(ids)) == 3, ids
    assert all(re.fullmatch(r"20261126T120000-[0-9a-f]{6}", r.name) for r in runs), ids
    # and so every name derived from the id
    assert len({Netfilter(i).comment for i in ids}) == 3
    assert len({scratch_dir(i) for i in ids}) == 3


def test_a_run_directory_from_before_the_tail_still_loads(tmp_path: Path) -> None:
    """A stored run named ``<stamp>`` (its test.json's run_id without a tail) opens, is
    listed, and its report is rebuilt."""
    run_dir = tmp_path / "redis_redis-setnx_mutex_pause" / "20261122T043130"
    shutil.copytree(OLD_RUN, run_dir)
    (run_dir / "report.html").unlink(missing_ok=True)
    test = json.loads((run_dir / "test.json").read_text())
    assert not re.search(r"-[0-9a-f]{6}$", str(test.get("run_id", "")))
    assert open_run(run_dir).load_test()["spec"] == test["spec"]
    assert [r.path for r in Store(tmp_path).runs()] == [RunDir(run_dir).path]
    proc = bounded([sys.executable, "-m", "harness.cli", "report", str(run_dir)], timeout=60)
    assert proc.returncode == 0, proc.stderr
    assert (run_dir / "report.html").is_file()
