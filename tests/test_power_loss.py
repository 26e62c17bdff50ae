"""Power loss (issue 27) on real Redis masters: Redlock with ``appendfsync everysec`` loses the
key a power loss of a majority drops at a fresh grant (invalid); with ``always`` nothing is
dropped (valid); with ``everysec`` and the delayed restart every forgotten lock has expired by
the time the nodes are back (valid). The rows of ``suites/power-loss.toml``; the first is
CI's, the others are slow. Long holds (0.5-1.5 s) make "while held" last past the restart."""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

import pytest

from harness.controller.syncfs_mounts import unavailable
from tests.harness_runs import history, run

pytestmark = [pytest.mark.servers,
              pytest.mark.skipif(shutil.which("redis-server") is None or unavailable() is not None,
                                 reason=f"redis-server or FUSE missing ({unavailable()})")]

ROW = ("--db", "redis-masters", "--lock", "redlock", "--nemesis", "power-loss",
       "--hold", "0.5-1.5", "--time-limit", "10", "--seed", "1")


def dropped(run_dir: Path) -> list[int]:
    """Bytes each power loss of the run dropped, fault by fault."""
    return [sum(op["detail"]["dropped"].values()) for op in history(run_dir)
            if op.get("f") == "power-loss" and op["type"] == "info" and op["value"] == "start"]


def test_everysec_loses_the_lock_a_majority_held(store: Path) -> None:
    code, results, run_dir, out = run(store, *ROW, "--persistence", "everysec")
    assert code == 1, out
    assert results["checks"]["mutex"]["lock-overlap-count"] >= 1
    assert any(dropped(run_dir)), "an everysec node lost what it wrote since its last fsync"


@pytest.mark.slow
@pytest.mark.parametrize("args", [("--persistence", "appendonly"),
                                  ("--persistence", "everysec", "--nemesis-opt",
                                   "restart=delayed")], ids=["always", "everysec-delayed"])
def test_always_or_a_delayed_restart_keeps_redlock_safe(store: Path, args: tuple[str, ...]
                                                        ) -> None:
    code, _, run_dir, out = run(store, *ROW, *args)
    assert code == 0, out
    losses: list[Any] = dropped(run_dir)
    if "appendonly" in args:
        assert losses and not any(losses), "appendfsync always leaves nothing unsynced"
    else:
        assert any(losses), "the delayed restart is what kept it safe, not luck"
