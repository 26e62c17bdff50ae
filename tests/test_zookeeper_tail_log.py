"""ZOOKEEPER-2332 without servers: which file ZooKeeper's fix would delete (the empty tail
transaction log, nothing wider), moving it aside, and the words the power loss says it in.
The same repair on a real ZooKeeper data directory is in tests/test_power_loss.py."""

from __future__ import annotations

from pathlib import Path

import pytest

from dbs.base import DB
from dbs.zookeeper import ZooKeeperDB
from dbs.zookeeper_tail_log import empty_tail_log, listing, log_zxid, move_aside, repair
from harness.core.cluster import Node
from harness.core.fault_run import FaultRun
from nemesis.power_loss import PowerLoss
from nemesis.process_faults import repaired_words

HEADER = b"ZKLG" + (2).to_bytes(4, "big") + (0).to_bytes(8, "big")  # magic, version, dbid
NODE = Node("n1", "127.0.0.2", 2181)


@pytest.mark.parametrize(("name", "zxid"), [
    ("log.1a", 0x1A), ("log.100000001", 0x100000001), ("log.0", 0), ("log.1a.old", 0x1A),
    ("log.+1f", 0x1F), ("log.7fffffffffffffff", (1 << 63) - 1)])
def test_a_log_name_is_read_as_zookeeper_reads_it(name: str, zxid: int) -> None:
    assert log_zxid(name) == zxid


@pytest.mark.parametrize("name", ["snapshot.1a", "log", "log.", "log.xyz", "log.-1",
                                  "log.8000000000000000", "acceptedEpoch", "LOG.1a", "logs.1a",
                                  "log.1 a", "log.+"])
def test_a_name_that_zookeeper_does_not_take_for_a_log_has_no_zxid(name: str) -> None:
    assert log_zxid(name) is None


@pytest.mark.parametrize(("sizes", "tail"), [
    # created, the header never synced: the case the fix handles
    ({"log.1": 16 + 500, "log.1a": 0, "snapshot.0": 400}, "log.1a"),
    ({"log.100000001": 0}, "log.100000001"),
    # ordered by zxid, not by name: 0x100000001 > 0xfa, though "1" < "f"
    ({"log.fa": 800, "log.100000001": 0}, "log.100000001"),
    # an empty snapshot newer than the log does not matter: only logs are looked at
    ({"log.1a": 0, "snapshot.2b": 0}, "log.1a")])
def test_the_empty_tail_log_is_the_one_to_repair(sizes: dict[str, int], tail: str) -> None:
    assert empty_tail_log(sizes) == tail


@pytest.mark.parametrize("sizes", [
    {},
    {"snapshot.0": 0, "acceptedEpoch": 0},  # no log at all
    {"log.1a": 1},  # a header cut short: corruption, upstream still refuses to start
    {"log.1a": 15},
    {"log.1a": len(HEADER)},  # a full header and nothing after it: ZooKeeper reads it
    {"log.1a": 0, "log.2b": 600},  # an older empty log, not the tail: corruption
    {"log.1a": 600, "log.1a.old": 0},  # two logs of one zxid: no defined tail
    {"log.1a": 600, "log.xyz": 0},  # not a log to ZooKeeper
])
def test_anything_else_is_left_as_it_is(sizes: dict[str, int]) -> None:
    assert empty_tail_log(sizes) is None


def logs(tmp_path: Path, files: dict[str, bytes]) -> Path:
    data = tmp_path / "node"
    (data / "version-2").mkdir(parents=True)
    for name, content in files.items():
        (data / "version-2" / name).write_bytes(content)
    return data


def test_the_repair_moves_the_empty_tail_log_into_the_run_and_says_so(tmp_path: Path) -> None:
    data = logs(tmp_path, {"log.1": HEADER + b"x" * 100, "log.1a": b"", "snapshot.0": b"s"})
    aside = tmp_path / "run" / "repaired-aside" / "n1"
    words = ZooKeeperDB().repair_before_restart(NODE, data, aside)
    assert words == ["ZOOKEEPER-2332: empty tail log version-2/log.1a moved aside (log.1a in "
                     "repaired-aside/n1)"]
    assert sorted(listing(data / "version-2")) == ["log.1", "snapshot.0"]
    assert listing(aside) == {"log.1a": 0}
    assert ZooKeeperDB().repair_before_restart(NODE, data, aside) == [], "done once"


@pytest.mark.parametrize("files", [{"log.1a": HEADER[:7]}, {"log.1a": b"", "log.2b": HEADER},
                                   {"log.1a": HEADER}])
def test_the_repair_touches_nothing_it_does_not_repair(tmp_path: Path,
                                                       files: dict[str, bytes]) -> None:
    data = logs(tmp_path, files)
    assert repair(data, tmp_path / "aside") == []
    assert listing(data / "version-2") == {n: len(c) for n, c in files.items()}
    assert not (tmp_path / "aside").exists()


def test_a_data_dir_without_logs_yet_is_nothing_to_repair(tmp_path: Path) -> None:
    assert repair(tmp_path / "fresh", tmp_path / "aside") == []


def test_a_second_file_of_one_name_moved_aside_keeps_the_first(tmp_path: Path) -> None:
    aside = tmp_path / "aside"
    for content in (b"", b"second"):
        (tmp_path / "log.1a").write_bytes(content)
        move_aside(tmp_path / "log.1a", aside)
    assert listing(aside) == {"log.1a": 0, "log.1a~2": 6}


def test_a_db_repairs_nothing_unless_it_says_what(tmp_path: Path) -> None:
    data = logs(tmp_path, {"log.1a": b""})
    assert DB().repair_before_restart(NODE, data, tmp_path / "aside") == []
    assert listing(data / "version-2") == {"log.1a": 0}


def test_the_power_loss_says_what_was_repaired_before_the_restart() -> None:
    detail = {"dropped": {"n1": 0, "n2": 0},
              "repaired": {"n2": ["ZOOKEEPER-2332: empty tail log version-2/log.1a moved aside "
                                  "(log.1a in repaired-aside/n2)"]}}
    words = PowerLoss.describe(FaultRun("power-loss", 1, "majority", ("n1", "n2"), 4.0, 4.3,
                                        detail))
    assert words == ("a power loss (SIGKILL, unsynced data dropped) of n1,n2 at 4.0 s, nothing "
                     "unsynced dropped, repaired before the restart: n2 ZOOKEEPER-2332: empty "
                     "tail log version-2/log.1a moved aside (log.1a in repaired-aside/n2), "
                     "restarted after 0.3 s")


@pytest.mark.parametrize("detail", [None, {}, {"repaired": {}}, {"repaired": "n2"},
                                    {"repaired": {"n2": "not a list"}}, {"repaired": {"n2": []}}])
def test_no_repair_or_a_malformed_record_of_one_adds_no_words(detail: object) -> None:
    assert repaired_words(detail) == ""


def test_the_repair_is_an_option_that_defaults_on_and_refuses_a_non_boolean() -> None:
    option = PowerLoss.options["repair"]
    assert option.default is True and option.problem() is None
    assert option.parse("false") is False and option.parse("yes") is True
    with pytest.raises(ValueError, match="expected true or false"):
        option.parse("sometimes")
