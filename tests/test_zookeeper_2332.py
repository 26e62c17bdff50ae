"""ZOOKEEPER-2332 on a real ZooKeeper (Debian's 3.8.0, standalone, forceSync=no) and its own
data directory: a node killed after it began a new transaction log, that log left empty (what a
power loss between its creation and its first fsync leaves: the file, no byte of it), does not
start; moved aside by the harness's repair (``ZooKeeperDB.repair_before_restart``), it
starts, with everything the logs before it held. Deterministic: the window the power-loss runs
hit by chance (tests/test_power_loss.py) is made here on purpose."""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import socket
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from dbs.zookeeper import ZOOKEEPER_JAR, ZooKeeperDB
from dbs.zookeeper_tail_log import LOG_DIR, listing, log_zxid
from harness.core.cluster import Node

pytestmark = [pytest.mark.servers,
              pytest.mark.skipif(shutil.which("java") is None or
                                 not os.path.exists(ZOOKEEPER_JAR),
                                 reason="ZooKeeper or a JVM missing: run `bash setup.sh`")]

START_TIMEOUT = 60.0  # a JVM start on 2 shared cores under load


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class Server:
    """One ZooKeeper JVM on ``data`` (its config written there once), its log appended to."""

    def __init__(self, data: Path) -> None:
        self.db = ZooKeeperDB(persistence="none")
        self.node = Node("n1", "127.0.0.1", free_port())
        self.data = data
        self.log = data.parent / "zookeeper.log"
        self.proc: subprocess.Popen[bytes] | None = None
        data.mkdir(parents=True)
        for name, text in self.db.files(self.node, [self.node], data).items():
            (data / name).write_text(text)

    def start(self) -> bool:
        """Start it; True once it serves, False when it exited first (its code kept)."""
        with open(self.log, "ab") as log:
            self.proc = subprocess.Popen(self.db.argv(self.node, self.data), stdout=log,
                                         stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                         start_new_session=True)
        deadline = time.monotonic() + START_TIMEOUT
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                return False
            if self.db.ready(self.node):
                return True
            time.sleep(0.1)
        raise AssertionError(f"ZooKeeper neither served nor exited in {START_TIMEOUT:.0f} s: "
                             f"{self.log.read_text(errors='replace')[-2000:]}")

    def kill(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(self.proc.pid, signal.SIGKILL)
            self.proc.wait(timeout=30)

    def create(self, *paths: str) -> None:
        client = self.client()
        try:
            for p in paths:
                client.create(p, b"x")
        finally:
            client.stop()
            client.close()

    def existing(self, *paths: str) -> list[str]:
        client = self.client()
        try:
            return [p for p in paths if client.exists(p) is not None]
        finally:
            client.stop()
            client.close()

    def client(self):  # type: ignore[no-untyped-def]
        from kazoo.client import KazooClient

        client = KazooClient(hosts=f"{self.node.host}:{self.node.port}", timeout=10.0)
        client.start(timeout=30.0)
        return client


@pytest.fixture
def server(tmp_path: Path) -> Iterator[Server]:
    s = Server(tmp_path / "node")
    try:
        yield s
    finally:
        s.kill()


def tail(data: Path) -> str:
    """The name of the transaction log with the highest zxid."""
    logs = [n for n in listing(data / LOG_DIR) if log_zxid(n) is not None]
    return max(logs, key=lambda n: log_zxid(n) or 0)


def test_an_empty_tail_log_stops_zookeeper_from_starting_and_its_repair_brings_it_back(
        server: Server, tmp_path: Path) -> None:
    assert server.start(), server.log.read_text(errors="replace")[-2000:]
    server.create("/kept-1", "/kept-2")
    server.kill()
    first = tail(server.data)
    assert listing(server.data / LOG_DIR)[first] > 16, "its transactions are in the first log"

    assert server.start()
    server.create("/lost")  # the first transaction of this start: a new log begins
    server.kill()
    newest = tail(server.data)
    assert log_zxid(newest) > log_zxid(first)  # type: ignore[operator]
    os.truncate(server.data / LOG_DIR / newest, 0)  # the loss: the file stays, its bytes go

    assert not server.start(), "ZooKeeper 3.8.0 started on an empty tail log"
    assert server.proc is not None and server.proc.returncode != 0
    text = server.log.read_text(errors="replace")
    assert "EOFException" in text and "FileHeader.deserialize" in text

    aside = tmp_path / "run" / "repaired-aside" / "n1"
    words = server.db.repair_before_restart(server.node, server.data, aside)
    assert words == [f"ZOOKEEPER-2332: empty tail log {LOG_DIR}/{newest} moved aside ({newest} "
                     "in repaired-aside/n1)"]
    assert listing(aside) == {newest: 0}
    assert server.start(), server.log.read_text(errors="replace")[-2000:]
    assert server.existing("/kept-1", "/kept-2", "/lost") == ["/kept-1", "/kept-2"]


def test_an_older_empty_log_is_corruption_the_repair_leaves_alone(server: Server,
                                                                  tmp_path: Path) -> None:
    """An empty log that is not the tail: upstream's fix refuses to start on it, and so the
    harness does not touch it (the node stays down: exit 3 in a run, never a verdict)."""
    assert server.start()
    server.create("/a")
    server.kill()
    first = tail(server.data)
    assert server.start()
    server.create("/b")
    server.kill()
    os.truncate(server.data / LOG_DIR / first, 0)
    before = listing(server.data / LOG_DIR)
    assert server.db.repair_before_restart(server.node, server.data, tmp_path / "aside") == []
    assert listing(server.data / LOG_DIR) == before
    assert not server.start(), "ZooKeeper started on an empty log in the middle"


class Adapter:
    """The kill nemesis's view of the one node (``restart``'s calls), over the real server."""

    def __init__(self, server: Server, aside: Path) -> None:
        self.server, self.aside, self.started = server, aside, False

    def is_running(self, node: Node) -> bool:
        return self.server.proc is not None and self.server.proc.poll() is None

    def repair_before_restart(self, node: Node) -> list[str]:
        return self.server.db.repair_before_restart(node, self.server.data, self.aside)

    def start(self, node: Node) -> None:
        self.started = self.server.start()

    def wait_ready(self, node: Node, timeout: float) -> None:
        if not self.started:
            raise RuntimeError(f"{node.name} did not come back")


@pytest.mark.parametrize("repair", [True, False])
def test_a_kill_leaves_the_same_empty_tail_and_the_kill_nemesis_repairs_it_before_the_restart(
        server: Server, tmp_path: Path, repair: bool) -> None:
    """A SIGKILL between a new log's creation and its header's write leaves what the power loss
    leaves (the page cache keeps what was written, and nothing was): the kill nemesis's restart
    repairs it, says so in the fault's detail and its words; ``repair=false`` shows the bug."""
    from types import SimpleNamespace

    from harness.core.fault_run import FaultRun
    from nemesis.process_faults import KillNode

    assert server.start()
    server.create("/kept")
    server.kill()
    assert server.start()
    server.create("/lost")
    server.kill()
    newest = tail(server.data)
    os.truncate(server.data / LOG_DIR / newest, 0)
    cluster = Adapter(server, tmp_path / "run" / "repaired-aside" / "n1")
    ctx = SimpleNamespace(cluster=cluster, options={"repair": repair},
                          node=lambda name: server.node)
    nemesis = KillNode()
    if not repair:
        with pytest.raises(RuntimeError, match="did not come back"):
            nemesis.stop(ctx, ["n1"])  # type: ignore[arg-type]
        assert nemesis.detail() is None
        return
    nemesis.stop(ctx, ["n1"])  # type: ignore[arg-type]
    assert server.existing("/kept") == ["/kept"]
    detail = nemesis.detail()
    assert detail == {"repaired": {"n1": [f"ZOOKEEPER-2332: empty tail log {LOG_DIR}/{newest} "
                                          f"moved aside ({newest} in repaired-aside/n1)"]}}
    words = KillNode.describe(FaultRun("kill", 0, None, ("n1",), 1.0, 3.0, detail))
    assert words.endswith(f", repaired before the restart: n1 ZOOKEEPER-2332: empty tail log "
                          f"{LOG_DIR}/{newest} moved aside ({newest} in repaired-aside/n1)"), words
