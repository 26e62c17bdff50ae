"""The link layer's proxy on loopback, no DB servers: routes, delays, stalls, resets, rates,
delayed closes, doors that name peers by their address, and a proxy that goes on while a
client is stopped. Each test starts its own proxy through the controller's :class:`Links`."""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import hiredis
import pytest

from harness.controller.links import Links
from harness.controller.procs import ProcessTable
from harness.controller.store import RunDir
from harness.core.cluster import Node
from harness.core.errors import HarnessError


class Echo:
    """A TCP echo server; remembers the address each connection came from."""

    def __init__(self, host: str = "127.0.0.1") -> None:
        self.sock = socket.socket()
        self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self.sock.bind((host, 0))
        self.sock.listen(16)
        self.peers: list[str] = []
        self.close_after_first = False
        threading.Thread(target=self._serve, daemon=True).start()

    @property
    def node(self) -> Node:
        host, port = self.sock.getsockname()
        return Node("n1", host, port)

    def _serve(self) -> None:
        while True:
            try:
                conn, peer = self.sock.accept()
            except OSError:
                return
            self.peers.append(peer[0])
            threading.Thread(target=self._echo, args=(conn,), daemon=True).start()

    def _echo(self, conn: socket.socket) -> None:
        with contextlib.suppress(OSError), conn:
            while data := conn.recv(65536):
                conn.sendall(data)
                if self.close_after_first:
                    return


@pytest.fixture
def echo() -> Iterator[Echo]:
    e = Echo()
    yield e
    e.sock.close()


@pytest.fixture
def links(tmp_path: Path, echo: Echo) -> Iterator[Links]:
    run = RunDir(tmp_path)
    layer = Links(run, ProcessTable(run.pids), seed=1)
    layer.route_clients({0: "127.0.0.1", 1: "127.0.0.1"}, [echo.node], lambda n: "127.0.0.1")
    layer.start()
    yield layer
    layer.stop()
    assert not layer.running()


def connect(links: Links, process: int = 0) -> socket.socket:
    found = links.listener(process, "n1")
    assert found is not None
    s = socket.create_connection(found, timeout=10)
    s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    return s


def rtt(s: socket.socket, n: int = 16) -> float:
    began = time.monotonic()
    s.sendall(b"x" * n)
    got = b""
    while len(got) < n:
        chunk = s.recv(65536)
        assert chunk, "connection closed"
        got += chunk
    return time.monotonic() - began


def test_bytes_pass_unchanged_and_are_counted(links: Links) -> None:
    s = connect(links)
    payload = os.urandom(200_000)
    s.sendall(payload)
    got = b""
    while len(got) < len(payload):
        got += s.recv(65536)
    assert got == payload
    stats = links.stats(["c0>n1"])["c0>n1"]
    assert stats["up"]["bytes"] == stats["down"]["bytes"] == len(payload)
    assert stats["connections"] == 1 and stats["opened"] == 1
    assert links.links(src="c0") == ["c0>n1"] and links.links(dst="n1") == ["c0>n1", "c1>n1"]


def shape_of(links: Links, link: str) -> dict[str, tuple[float, float]]:
    """The (delay, jitter) in force on each direction of ``link``, as the proxy reports it."""
    st = links.stats([link])[link]
    return {d: (st[d]["delay"], st[d]["jitter"]) for d in ("up", "down")}


def delayed(links: Links, link: str) -> tuple[int, int]:
    """Chunks the proxy held (up, down): an unshaped link passes every chunk on at once."""
    st = links.stats([link])[link]
    return st["up"]["delayed_chunks"], st["down"]["delayed_chunks"]


def test_delay_with_jitter_adds_at_least_its_least_delay_and_heals(links: Links) -> None:
    """Correctness only: no round trip beats the least delay each way, shapes of two owners add
    up and come off one by one, a healed link holds nothing. How far above its bounds a round
    trip lands is the machine's load: bench/bench_test_timings.py measures it."""
    s = connect(links)
    links.shape(["c0>n1"], "t", delay=0.1, jitter=0.05)
    assert shape_of(links, "c0>n1") == {"up": (0.1, 0.05), "down": (0.1, 0.05)}
    times = [rtt(s) for _ in range(12)]
    assert min(times) >= 2 * (0.1 - 0.05), times
    assert delayed(links, "c0>n1") == (12, 12)
    links.shape(["c0>n1"], "u", delay=0.05, direction="up")  # owners add up
    assert shape_of(links, "c0>n1") == {"up": (0.1 + 0.05, 0.05), "down": (0.1, 0.05)}
    assert rtt(s) >= 2 * (0.1 - 0.05) + 0.05
    links.unshape("t")
    assert shape_of(links, "c0>n1") == {"up": (0.05, 0.0), "down": (0.0, 0.0)}
    assert rtt(s) >= 0.05
    assert delayed(links, "c0>n1") == (14, 13)  # one more up, none down
    links.unshape("u")
    assert shape_of(links, "c0>n1") == {"up": (0.0, 0.0), "down": (0.0, 0.0)}
    rtt(s)
    assert delayed(links, "c0>n1") == (14, 13)  # healed: nothing held
    other = connect(links, 1)  # another client's link was never slowed
    rtt(other)
    assert shape_of(links, "c1>n1") == {"up": (0.0, 0.0), "down": (0.0, 0.0)}
    assert delayed(links, "c1>n1") == (0, 0)


def test_a_stall_holds_one_direction_then_delivers_everything(links: Links) -> None:
    s = connect(links)
    links.stall(["c0>n1"], 0.6, direction="down")
    assert rtt(s) >= 0.55
    links.stall(["c0>n1"], 30, direction="down")
    s.sendall(b"held")
    healed: list[float] = []

    def heal() -> None:
        healed.append(time.monotonic())
        links.unstall()

    threading.Timer(0.3, heal).start()  # the heal delivers what was held at once
    assert s.recv(100) == b"held"  # within the socket's 10 s, long before the 30-s stall ends
    assert healed and time.monotonic() >= healed[0]  # delivered after the heal, not before
    stats = links.stats(["c0>n1"])["c0>n1"]["down"]
    assert stats["stalled_bytes"] >= 16 + 4 and stats["stalls"] == 2


def test_a_triggered_stall_holds_the_reply_to_the_next_request_only(links: Links) -> None:
    holder, waiter = connect(links, 0), connect(links, 1)
    waiter.sendall(b"before")  # asked before the trigger: its reply passes
    # the waiter's next reply is held once the holder sends something up its own link
    links.stall(["c1>n1"], 0.8, direction="down", trigger="next", after=["c0>n1"])
    assert waiter.recv(100) == b"before"

    def stalls(link: str) -> tuple[int, int]:
        down = links.stats([link])[link]["down"]
        return down["stalls"], down["stalled_chunks"]

    time.sleep(0.2)
    rtt(waiter)
    assert stalls("c1>n1") == (0, 0)  # not armed yet: the holder has said nothing
    rtt(holder)
    assert stalls("c0>n1") == (0, 0)  # the holder's request arms the waiter's link; its own passes
    assert stalls("c1>n1") == (0, 0)
    assert rtt(waiter) >= 0.75  # the waiter's next request: its reply is held
    assert stalls("c1>n1") == (1, 1)
    rtt(waiter)
    assert stalls("c1>n1") == (1, 1)  # one stall only


class LockServer(Echo):
    """A few Redis commands over RESP, enough for a lock: ``SET k v NX`` takes the one lock
    if it is free (``+OK``, else a nil), ``DEL`` frees it, ``PING`` pongs. With ``split``, each
    reply goes out in two sends 50 ms apart."""

    def __init__(self) -> None:
        self.free = True
        self.split = False
        super().__init__()

    def _echo(self, conn: socket.socket) -> None:
        reader = hiredis.Reader()
        with contextlib.suppress(OSError), conn:
            while data := conn.recv(65536):
                reader.feed(data)
                while (request := reader.gets()) is not False:
                    cmd = request[0].upper()
                    if cmd == b"SET":
                        reply, self.free = (b"+OK\r\n", False) if self.free else (
                            b"$-1\r\n", False)
                    elif cmd == b"DEL":
                        reply, self.free = b":1\r\n", True
                    else:
                        reply = b"+PONG\r\n"
                    if self.split:
                        conn.sendall(reply[:2])
                        time.sleep(0.05)
                        reply = reply[2:]
                    conn.sendall(reply)


@pytest.fixture
def locking(tmp_path: Path) -> Iterator[tuple[Links, LockServer]]:
    server = LockServer()
    run = RunDir(tmp_path)
    layer = Links(run, ProcessTable(run.pids), seed=1)
    layer.route_clients({0: "127.0.0.1", 1: "127.0.0.1"}, [server.node], lambda n: "127.0.0.1")
    layer.start()
    yield layer, server
    layer.stop()
    server.sock.close()


def ask(s: socket.socket, *args: object) -> tuple[bytes, float]:
    """One request, its whole reply and the seconds it took."""
    began = time.monotonic()
    s.sendall(hiredis.pack_command(args))
    got = b""
    while not got.endswith(b"\r\n"):
        chunk = s.recv(100)
        assert chunk, "connection closed"
        got += chunk
    return got, time.monotonic() - began


def grants(links: Links, link: str) -> tuple[int, int, int, int]:
    """(grants held, delivered late, dropped, stalls begun) of the link's replies."""
    down = links.stats([link])[link]["down"]
    return down["grants_held"], down["grants_late"], down["grants_dropped"], down["stalls"]


def test_a_grant_stall_holds_the_grant_itself_and_no_other_client(
        locking: tuple[Links, LockServer]) -> None:
    links, _ = locking
    holder, waiter = connect(links, 0), connect(links, 1)
    assert ask(holder, "SET", "lock", "a", "NX", "PX", 2000)[0] == b"+OK\r\n"  # unarmed
    links.stall(["c0>n1", "c1>n1"], 0.8, direction="down", trigger="grant",
                groups=[["c1>n1"]])
    refused, took = ask(waiter, "SET", "lock", "b", "NX", "PX", 2000)
    assert refused == b"$-1\r\n" and took < 0.5  # a refusal is no grant: it passes
    assert ask(waiter, "PING")[0] == b"+PONG\r\n"
    assert ask(holder, "DEL", "lock")[0] == b":1\r\n"  # c0 is in no group: never held
    assert grants(links, "c1>n1") == (0, 0, 0, 0)

    def meanwhile() -> None:  # while c1's grant is held, c0 is answered at once
        time.sleep(0.2)
        answered.append(ask(holder, "PING"))

    answered: list[tuple[bytes, float]] = []
    threading.Thread(target=meanwhile).start()
    granted, took = ask(waiter, "SET", "lock", "b", "NX", "PX", 2000)
    assert granted == b"+OK\r\n" and took >= 0.75  # the grant itself was held
    assert answered and answered[0][0] == b"+PONG\r\n" and answered[0][1] < 0.5
    assert grants(links, "c1>n1") == (1, 1, 0, 1)
    assert ask(waiter, "DEL", "lock")[1] < 0.5  # one grant held, then the link is free
    assert ask(waiter, "SET", "lock", "c", "NX", "PX", 2000)[1] < 0.5
    assert grants(links, "c1>n1") == (1, 1, 0, 1)
    assert grants(links, "c0>n1") == (0, 0, 0, 0)


def test_a_grant_stall_after_a_link_is_armed_by_its_next_request(
        locking: tuple[Links, LockServer]) -> None:
    links, _ = locking
    holder, waiter = connect(links, 0), connect(links, 1)
    links.stall(["c1>n1"], 0.8, direction="down", trigger="grant", after=["c0>n1"])
    assert ask(waiter, "SET", "lock", "b", "NX", "PX", 2000)[1] < 0.5  # not armed yet
    assert ask(waiter, "DEL", "lock")[0] == b":1\r\n"
    assert grants(links, "c1>n1") == (0, 0, 0, 0)
    assert ask(holder, "SET", "lock", "a", "NX", "PX", 2000)[1] < 0.5  # arms; its own passes
    assert ask(holder, "DEL", "lock")[1] < 0.5  # c0 is in no group
    granted, took = ask(waiter, "SET", "lock", "b", "NX", "PX", 2000)
    assert granted == b"+OK\r\n" and took >= 0.75
    assert grants(links, "c1>n1") == (1, 1, 0, 1)
    assert grants(links, "c0>n1") == (0, 0, 0, 0)


def test_a_grant_split_over_two_sends_is_held_from_its_last_part(
        locking: tuple[Links, LockServer]) -> None:
    links, server = locking
    server.split = True
    s = connect(links, 0)
    links.stall(["c0>n1"], 0.8, direction="down", trigger="grant")
    granted, took = ask(s, "SET", "lock", "a", "NX", "PX", 2000)
    assert granted == b"+OK\r\n" and took >= 0.75
    assert grants(links, "c0>n1") == (1, 1, 0, 1)


def test_a_held_grant_whose_client_hangs_up_is_counted_dropped(
        locking: tuple[Links, LockServer]) -> None:
    links, _ = locking
    s = connect(links, 0)
    links.stall(["c0>n1"], 30, direction="down", trigger="grant")
    s.sendall(hiredis.pack_command(("SET", "lock", "a", "NX", "PX", 2000)))
    deadline = time.monotonic() + 5
    while grants(links, "c0>n1")[0] == 0 and time.monotonic() < deadline:
        time.sleep(0.01)
    s.close()  # as Redlock does when its per-node timeout runs out
    time.sleep(0.1)
    links.unstall()  # the grant goes to a client that hung up
    while grants(links, "c0>n1")[2] == 0 and time.monotonic() < deadline:
        time.sleep(0.01)
    assert grants(links, "c0>n1") == (1, 0, 1, 1)


def test_reset_ends_every_connection_of_the_link(links: Links) -> None:
    s = connect(links)
    assert rtt(s) < 1
    assert links.reset(["c0>n1"]) == 1
    with pytest.raises(ConnectionResetError):
        s.sendall(b"x")
        s.recv(10)


def test_a_bandwidth_limit_slows_a_transfer(links: Links) -> None:
    s = connect(links)
    links.shape(["c0>n1"], "bw", rate=200_000, direction="down")
    began = time.monotonic()
    assert rtt(s, 100_000) >= 0.4  # 100 kB at 200 kB/s
    links.unshape("bw")
    assert time.monotonic() - began < 5


def test_a_delayed_close_reaches_the_client_late(links: Links, echo: Echo) -> None:
    echo.close_after_first = True
    links.shape(["c0>n1"], "slow-close", close_delay=0.5, direction="down")
    s = connect(links)
    s.sendall(b"bye")
    assert s.recv(10) == b"bye"
    began = time.monotonic()
    assert s.recv(10) == b""  # the server's close, held back
    assert time.monotonic() - began >= 0.4


def test_bad_commands_are_refused_in_a_line_and_the_proxy_goes_on(links: Links) -> None:
    with pytest.raises(HarnessError, match=r"the link layer refused shape: .*>= 0"):
        links.shape(["c0>n1"], "bad", delay=-1)
    with pytest.raises(HarnessError, match="unknown op"):
        links.command(op="teleport")
    assert rtt(connect(links)) < 1


def test_the_proxy_goes_on_while_a_client_is_stopped(links: Links) -> None:
    """It is the network, not the client: SIGSTOP one client in the middle of a transfer and
    the proxy keeps serving the others (and holds what the stopped one does not read)."""
    found = links.listener(0, "n1")
    assert found is not None
    code = ("import socket, sys, time\n"
            f"s = socket.create_connection({found!r})\n"
            "s.sendall(b'x' * 4_000_000)\n"
            "print('sent', flush=True)\n"
            "time.sleep(60)\n")
    client = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, text=True)
    try:
        assert client.stdout is not None and client.stdout.readline() == "sent\n"
        os.kill(client.pid, signal.SIGSTOP)
        other = connect(links, 1)
        for _ in range(20):  # each within the socket's 10 s: the proxy was not blocked ...
            rtt(other)
        assert delayed(links, "c1>n1") == (0, 0)  # ... nor were they queued behind the 4 MB
        assert links.stats(["c1>n1"])["c1>n1"]["up"]["bytes"] == 20 * 16
        assert links.stats(["c0>n1"])["c0>n1"]["up"]["bytes"] > 0
    finally:
        os.kill(client.pid, signal.SIGCONT)
        client.kill()
        client.wait()


def test_a_door_names_its_peer_by_address_and_dials_from_it(tmp_path: Path, echo: Echo
                                                            ) -> None:
    run = RunDir(tmp_path)
    layer = Links(run, ProcessTable(run.pids), seed=1)
    layer.add_endpoint("n2", "127.0.0.5")
    doors = layer.route_doors([echo.node], [echo.node.port], lambda host: "127.0.0.9")
    assert doors == {("n1", echo.node.port): ("127.0.0.9", echo.node.port)}
    layer.start()
    try:
        layer.shape(["n2>n1"], "lag", delay=0.2, direction="down")
        s = socket.socket()
        s.bind(("127.0.0.5", 0))
        s.connect(("127.0.0.9", echo.node.port))
        assert rtt(s) >= 0.2
        assert echo.peers[-1] == "127.0.0.5"  # the server sees the peer, not the proxy
        assert layer.stats(["n2>n1"])["n2>n1"]["connections"] == 1
        assert layer.peer_links() == []  # one node: no link between nodes to plan
    finally:
        layer.stop()
