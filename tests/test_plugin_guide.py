"""docs/plugins.md's answers to a plugin author (section 10), each example run as the page
shows it, against the real server it is about: a lock on --db dynamodb (its endpoint, its
table made race-safe in setup(), error codes mapped to Refused and Indeterminate), an acquire
that cannot be cancelled, and holds longer than the lease."""

from __future__ import annotations

import os
import re
import shutil
import sys
import threading
from pathlib import Path
from typing import Any

import pytest

from dbs.dynamodb import DynamoDB
from harness.core.locks import LockConfig, Refused
from tests.harness_runs import bounded, history, run

REPO = Path(__file__).resolve().parents[1]
pytestmark = pytest.mark.servers
needs_dynalite = pytest.mark.skipif(DynamoDB.unavailable() is not None,
                                    reason=f"dynamodb: {DynamoDB.unavailable()}")
needs_redis = pytest.mark.skipif(shutil.which("redis-server") is None,
                                 reason="redis-server missing")


def example(name: str, folder: Path) -> Path:
    """The page's code block whose first line is ``# name``, written to ``folder/name``."""
    text = (REPO / "docs" / "plugins.md").read_text()
    match = re.search(rf"```python\n# {re.escape(name)}\n(.*?)```", text, re.S)
    assert match, f"docs/plugins.md shows {name}"
    path = folder / name
    path.write_text(match.group(1))
    return path


@pytest.fixture
def examples(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    folder = tmp_path / "examples"
    folder.mkdir()
    for name in ("guide_dynamo.py", "guide_blocking.py"):
        example(name, folder)
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join([str(folder), str(REPO)]))
    monkeypatch.syspath_prepend(str(folder))
    return folder


def harness_run(store: Path, *args: str) -> tuple[int, list[dict[str, Any]], str]:
    code, _, run_dir, output = run(store, "--seed", "1", *args)
    return code, history(run_dir) if (run_dir / "history.jsonl").exists() else [], output


@needs_dynalite
def test_the_dynamodb_example_reaches_dynalite_and_its_setup_is_race_safe(
        examples: Path, tmp_path: Path) -> None:
    from botocore.exceptions import ClientError
    from guide_dynamo import TABLE, DynamoLock  # type: ignore[import-not-found]

    from tests.one_node import one_node

    with one_node(DynamoDB(), tmp_path) as nodes:
        locks = [DynamoLock(LockConfig(nodes=tuple(nodes), ttl=0.5, op_timeout=1.0, process=p))
                 for p in range(5)]
        start, errors = threading.Barrier(5), []

        def setup(lock: DynamoLock) -> None:
            start.wait()
            try:
                lock.setup()
            except Exception as e:
                errors.append(e)

        threads = [threading.Thread(target=setup, args=(lock,)) for lock in locks]
        for t in threads:
            t.start()
        for t in threads:
            t.join(60)
        assert not errors, errors  # five at once: one creates the table, four find it
        with pytest.raises(ClientError) as ttl:  # why a library's own table creation fails
            locks[0].db.update_time_to_live(TableName=TABLE, TimeToLiveSpecification={
                "Enabled": True, "AttributeName": "until"})
        assert ttl.value.response["Error"]["Code"] == "UnknownOperationException"
        a, b = locks[0], locks[1]
        first = a.acquire(1.0)
        with pytest.raises(Refused, match=r"^lock is held by another owner$"):
            b.acquire(0.2)
        second = b.acquire(2.0)  # once a's half-second lease has run out
        assert second is not None
        with pytest.raises(Refused, match="not ours any more"):
            a.release(first)
        assert b.release(second)


@needs_dynalite
def test_the_dynamodb_example_runs_on_db_dynamodb_and_its_refusals_say_why(
        examples: Path, tmp_path: Path) -> None:
    code, ops, output = harness_run(tmp_path / "s", "--db", "dynamodb", "--lock",
                                    "guide_dynamo:DynamoLock", "--nemesis", "none",
                                    "--hold", "0.4", "--acquire-timeout", "0.2",
                                    "--time-limit", "5")
    assert code == 0, output
    fails = {op["error"] for op in ops if op["type"] == "fail" and op["f"] == "acquire"}
    assert fails == {"timeout: lock is held by another owner"}, output


@needs_redis
def test_an_acquire_that_cannot_be_cancelled_is_info_past_its_timeout(
        examples: Path, tmp_path: Path) -> None:
    code, ops, output = harness_run(tmp_path / "s", "--lock", "guide_blocking:BlockingLock",
                                    "--nemesis", "none", "--hold", "0.5", "--acquire-timeout",
                                    "0.3", "--time-limit", "5")
    assert code == 0, output
    late = [op for op in ops if op["f"] == "acquire" and op["type"] == "info"]
    said = "acquire timed out, still waiting after 0.3 s"
    assert late and all(op["error"] == said for op in late)
    assert [op for op in ops if op["f"] == "acquire" and op["type"] == "ok"]
    ends = [op for op in ops if op["f"] == "stop-clients"]
    assert ends and not ends[0]["detail"]["killed"], "no client was stuck at the end"


@needs_redis
def test_long_critical_sections_hold_past_the_lease(examples: Path, tmp_path: Path) -> None:
    listing = bounded([sys.executable, "-m", "harness.cli", "list", "--lock",
                       "guide_blocking:LongHolds"], timeout=60)
    assert "used with: hold_min 1, hold_max 6, acquire_timeout 15" in listing.stdout, listing
    code, ops, output = harness_run(tmp_path / "s", "--lock", "guide_blocking:LongHolds",
                                    "--nemesis", "none", "--time-limit", "8")
    assert code == 1 and "lock-overlap-count" in output, output
    assert [op for op in ops if op["f"] == "release" and op["type"] == "fail"
            and op["error"].startswith("not-held")], "a holder outlived its lease"
