"""The link layer's proxy: ``python -m harness.controller.linkproxy CONFIG.json``.

One process per run, started by the controller (:mod:`harness.controller.links`) and recorded
in the run's process table, so teardown and ``harness clean`` stop it. It is the network, not a
client: a client that is SIGSTOPped freezes alone, the proxy goes on delivering (or holding)
bytes. It uses nothing but the standard library, so it starts in a fraction of a second.

**Routes.** Each listener is a route to one DB endpoint (``dst``), of one of two kinds:

- a *link* route knows its source (``src``, a client ``c3`` or a node ``n2``): one listener per
  (source, destination) link, so the proxy knows whose connection it is by the port it arrived
  on, whatever address the client library connected from;
- a *door* route (``src`` null) names the source by the address the connection comes from
  (``endpoints``: address -> name): for DB processes that learn each other's addresses at run
  time (a Sentinel telling a replica where its new primary is) and bind their own address.

Either way the leg to the destination leaves from the source's own address (``bind``, or the
identified source's address), so iptables rules between endpoints (partitions, loss) keep
biting on it.

**Links and directions.** A link is ``src>dst``; ``up`` is what the source sends, ``down`` what
comes back. Per link and direction the controller sets, over a JSON-lines control socket:

- ``shape``: latency plus uniform jitter, a bandwidth limit, a delayed close; shapes are kept
  per owner (the nemesis that set them) and add up, so two faults never undo each other;
- ``stall``: hold the bytes of one direction for S seconds, then deliver them all; from now,
  or from the next chunk the other direction carries (``trigger: next``: the reply to the next
  request is held); with ``after``, the stall is only armed once one of the ``after`` links
  carries a chunk up (the lock holder's release request arms the waiters' stalls before it is
  passed on, so no waiter's request can slip in between);
- ``reset``: close every connection of the link with a TCP RST, both sides;
- ``stats``: bytes, chunks, time added, bytes held by stalls, connections.

Bytes keep their order within a connection (a chunk is never delivered before the one ahead of
it): a jittered delay is the time a chunk waits at least, measured from its arrival.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import random
import signal
import socket
import struct
import sys
import time
from collections import deque
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

CHUNK = 65536
QUEUE_LIMIT = 16 * 1024 * 1024  # bytes held per connection and direction before reading stops
CONNECT_TIMEOUT = 5.0
DIRECTIONS = ("up", "down")
OTHER = {"up": "down", "down": "up"}
NOTICEABLE = 0.001  # seconds: a chunk held at least this long counts as delayed
LINGER = 30.0  # seconds a half-closed connection may go on before the proxy closes it


@dataclass
class Shape:
    delay: float = 0.0
    jitter: float = 0.0
    rate: float = 0.0  # bytes per second; 0: unlimited
    close_delay: float = 0.0


@dataclass
class Stall:
    seconds: float = 0.0
    armed: bool = False  # waiting for the other direction's next chunk
    began: float | None = None
    until: float | None = None

    def holds(self, arrival: float) -> float | None:
        """When a chunk that arrived at ``arrival`` may go, if this stall holds it."""
        if self.began is None or self.until is None:
            return None
        return self.until if self.began <= arrival < self.until else None


@dataclass
class DirStats:
    bytes: int = 0
    chunks: int = 0
    delayed_chunks: int = 0
    added: float = 0.0  # seconds added, summed over chunks
    max_added: float = 0.0
    stalled_bytes: int = 0
    stalled_chunks: int = 0
    stalls: int = 0  # stalls that began (a triggered one begins at the next chunk)
    last_stall_began: float | None = None
    last_stall_until: float | None = None

    def to_dict(self) -> dict[str, Any]:
        d = dict(self.__dict__)
        d["added"] = round(self.added, 6)
        d["max_added"] = round(self.max_added, 6)
        return d


@dataclass
class Direction:
    shapes: dict[str, Shape] = field(default_factory=dict)
    stall: Stall = field(default_factory=Stall)
    stats: DirStats = field(default_factory=DirStats)

    def shape(self) -> Shape:
        s = Shape()
        for x in self.shapes.values():
            s.delay += x.delay
            s.jitter += x.jitter
            s.close_delay += x.close_delay
            if x.rate > 0:
                s.rate = x.rate if s.rate <= 0 else min(s.rate, x.rate)
        return s


class Link:
    def __init__(self, name: str) -> None:
        self.name = name
        self.dirs = {d: Direction() for d in DIRECTIONS}
        self.conns: set[Conn] = set()
        self.opened = 0
        self.failed = 0  # connections whose upstream leg could not be made
        self.changed = asyncio.Event()

    def notify(self) -> None:
        """Wake every writer of the link: its shape or stall changed."""
        old, self.changed = self.changed, asyncio.Event()
        old.set()

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {"connections": len(self.conns), "opened": self.opened,
                               "failed": self.failed}
        for d, state in self.dirs.items():
            s = state.shape()
            out[d] = {**state.stats.to_dict(), "delay": s.delay, "jitter": s.jitter,
                      "rate": s.rate, "close_delay": s.close_delay,
                      "stalled_until": state.stall.until, "stall_armed": state.stall.armed}
        return out


class Proxy:
    def __init__(self, config: dict[str, Any]) -> None:
        self.config = config
        self.endpoints: dict[str, str] = dict(config.get("endpoints") or {})
        self.addresses = {name: addr for addr, name in self.endpoints.items()}
        self.links: dict[str, Link] = {}
        self.rng = random.Random(config.get("seed", 0))
        self.servers: list[asyncio.AbstractServer] = []
        self.bound: dict[str, list[Any]] = {}
        self.stopping = asyncio.Event()
        self.controllers: set[asyncio.StreamWriter] = set()
        # stalls armed when a chunk goes up one of the watched links: (watched, links, dirs)
        self.pending: list[tuple[set[str], list[Link], tuple[str, ...], float]] = []

    def link(self, name: str) -> Link:
        found = self.links.get(name)
        if found is None:
            found = self.links[name] = Link(name)
        return found

    # serving ---------------------------------------------------------------------------------
    async def start(self) -> None:
        for route in self.config["routes"]:
            host, port = route["listen"]
            server = await asyncio.start_server(
                lambda r, w, route=route: self.accept(route, r, w), host, int(port),
                reuse_address=True, backlog=128)
            self.servers.append(server)
            self.bound[route["id"]] = list(server.sockets[0].getsockname()[:2])
            if route.get("src"):
                self.link(f"{route['src']}>{route['dst']}")
        chost, cport = self.config.get("control", ["127.0.0.1", 0])
        control = await asyncio.start_server(self.control, chost, int(cport))
        self.servers.append(control)
        state = {"pid": os.getpid(), "control": list(control.sockets[0].getsockname()[:2]),
                 "routes": self.bound}
        path = Path(self.config["state"])
        tmp = path.with_name(f".{path.name}.tmp")
        tmp.write_text(json.dumps(state) + "\n")
        tmp.replace(path)

    async def accept(self, route: dict[str, Any], reader: asyncio.StreamReader,
                     writer: asyncio.StreamWriter) -> None:
        peer = writer.get_extra_info("peername") or ("?", 0)
        src = route.get("src") or self.endpoints.get(peer[0], "?")
        link = self.link(f"{src}>{route['dst']}")
        link.opened += 1
        bind = route.get("bind") or (self.addresses.get(src) if not route.get("src") else None)
        host, port = route["upstream"]
        nodelay(writer)
        try:
            up_r, up_w = await asyncio.wait_for(asyncio.open_connection(
                host, int(port), local_addr=(bind, 0) if bind else None), CONNECT_TIMEOUT)
        except (TimeoutError, OSError):
            link.failed += 1
            abort(writer)  # as a refused or unreachable server looks: the connection is reset
            return
        nodelay(up_w)
        conn = Conn(self, link, (reader, writer), (up_r, up_w))
        link.conns.add(conn)
        try:
            await conn.run()
        finally:
            link.conns.discard(conn)

    # control ---------------------------------------------------------------------------------
    async def control(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.controllers.add(writer)
        try:
            while line := await reader.readline():
                try:
                    reply = {"ok": True, **self.command(json.loads(line))}
                except Exception as e:  # a bad command is answered, never fatal
                    reply = {"ok": False, "error": f"{type(e).__name__}: {e}"}
                writer.write((json.dumps(reply) + "\n").encode())
                await writer.drain()
        except (ConnectionError, OSError):
            pass
        finally:
            self.controllers.discard(writer)
            writer.close()

    async def stop(self) -> None:
        """Stop listening, reset every proxied connection, let the handlers end."""
        for server in self.servers:
            server.close()
        for link in self.links.values():
            for conn in list(link.conns):
                conn.reset()
        for writer in list(self.controllers):
            writer.close()
        await asyncio.sleep(0.05)

    def _links(self, cmd: dict[str, Any]) -> list[Link]:
        names = cmd.get("links")
        if names is None:
            return list(self.links.values())
        return [self.link(str(n)) for n in names]

    def _dirs(self, cmd: dict[str, Any]) -> tuple[str, ...]:
        d = cmd.get("direction", "both")
        if d == "both":
            return DIRECTIONS
        if d not in DIRECTIONS:
            raise ValueError(f"direction {d!r}: use up, down or both")
        return (d,)

    def command(self, cmd: dict[str, Any]) -> dict[str, Any]:
        op = cmd.get("op")
        now = time.monotonic()
        if op == "ping":
            return {"now": now}
        if op == "shape":
            shape = Shape(float(cmd.get("delay", 0)), float(cmd.get("jitter", 0)),
                          float(cmd.get("rate", 0)), float(cmd.get("close_delay", 0)))
            if min(shape.delay, shape.jitter, shape.rate, shape.close_delay) < 0:
                raise ValueError("delay, jitter, rate and close_delay must be >= 0")
            owner = str(cmd.get("owner", "?"))
            for link in self._links(cmd):
                for d in self._dirs(cmd):
                    link.dirs[d].shapes[owner] = shape
                link.notify()
            return {}
        if op == "unshape":
            owner = str(cmd.get("owner", "?"))
            for link in self._links(cmd):
                for state in link.dirs.values():
                    state.shapes.pop(owner, None)
                link.notify()
            return {}
        if op == "stall":
            seconds = float(cmd["seconds"])
            if seconds < 0:
                raise ValueError("seconds must be >= 0")
            trigger = cmd.get("trigger", "now")
            if trigger not in ("now", "next"):
                raise ValueError(f"trigger {trigger!r}: use now or next")
            after = cmd.get("after")
            if after:
                if trigger != "next":
                    raise ValueError("after needs trigger next")
                self.pending.append(({str(x) for x in after}, self._links(cmd),
                                     self._dirs(cmd), seconds))
                return {}
            arm(self._links(cmd), self._dirs(cmd), seconds, trigger, now)
            return {}
        if op == "unstall":
            self.pending.clear()
            for link in self._links(cmd):
                for state in link.dirs.values():
                    st = state.stall
                    st.armed = False
                    if st.until is not None and st.until > now:
                        st.until = now
                link.notify()
            return {}
        if op == "reset":
            n = 0
            for link in self._links(cmd):
                for conn in list(link.conns):
                    conn.reset()
                    n += 1
            return {"reset": n}
        if op == "stats":
            return {"now": now, "links": {link.name: link.to_dict()
                                          for link in self._links(cmd)}}
        if op == "routes":
            return {"routes": self.bound}
        raise ValueError(f"unknown op {op!r}")


    def watched(self, link: Link) -> None:
        """A chunk goes up ``link``: arm the stalls that waited for it."""
        fired = [p for p in self.pending if link.name in p[0]]
        if fired:
            self.pending = [p for p in self.pending if link.name not in p[0]]
            for _, links, dirs, seconds in fired:
                arm(links, dirs, seconds, "next", time.monotonic())


def arm(links: list[Link], dirs: tuple[str, ...], seconds: float, trigger: str,
        now: float) -> None:
    for link in links:
        for d in dirs:
            st = link.dirs[d].stall
            st.seconds = seconds
            if trigger == "now":
                begin_stall(link.dirs[d], now)
            else:
                st.armed, st.began, st.until = True, None, None
        link.notify()


def begin_stall(state: Direction, now: float) -> None:
    st = state.stall
    st.armed = False
    st.began, st.until = now, now + st.seconds
    state.stats.stalls += 1
    state.stats.last_stall_began, state.stats.last_stall_until = st.began, st.until


class Conn:
    """One proxied connection: two directions, each a reader and a writer task."""

    def __init__(self, proxy: Proxy, link: Link,
                 down_side: tuple[asyncio.StreamReader, asyncio.StreamWriter],
                 up_side: tuple[asyncio.StreamReader, asyncio.StreamWriter]) -> None:
        self.proxy = proxy
        self.link = link
        self.client = down_side  # the side that connected to us
        self.server = up_side
        self.tasks: list[asyncio.Task[None]] = []

    async def run(self) -> None:
        up = Pipe(self, "up", self.client[0], self.server[1])
        down = Pipe(self, "down", self.server[0], self.client[1])
        self.tasks = [asyncio.create_task(p.read()) for p in (up, down)]
        writers = [asyncio.create_task(p.write()) for p in (up, down)]
        self.tasks += writers
        try:
            done, pending = await asyncio.wait(writers, return_when=asyncio.FIRST_COMPLETED)
            if pending and not any(t.exception() for t in done if not t.cancelled()):
                # one side closed and the close went through: the other has a while to end
                await asyncio.wait(pending, timeout=LINGER)
        except Exception:
            pass
        finally:
            for t in self.tasks:
                t.cancel()
            for w in (self.client[1], self.server[1]):
                with contextlib.suppress(Exception):
                    w.close()

    def reset(self) -> None:
        for w in (self.client[1], self.server[1]):
            abort(w)
        for t in self.tasks:
            t.cancel()


class Pipe:
    """One direction of a connection: chunks are read as they come, queued with their
    arrival time and delay, and written when due."""

    def __init__(self, conn: Conn, direction: str, reader: asyncio.StreamReader,
                 writer: asyncio.StreamWriter) -> None:
        self.conn = conn
        self.link = conn.link
        self.direction = direction
        self.state = conn.link.dirs[direction]
        self.other = conn.link.dirs[OTHER[direction]]
        self.reader = reader
        self.writer = writer
        self.queue: deque[tuple[float, float, bytes | None]] = deque()
        self.queued = 0
        self.arrived = asyncio.Event()
        self.space = asyncio.Event()
        self.rng = conn.proxy.rng

    async def read(self) -> None:
        try:
            while True:
                data = await self.reader.read(CHUNK)
                now = time.monotonic()
                if not data:
                    self.queue.append((now, 0.0, None))
                    self.arrived.set()
                    return
                if self.direction == "up" and self.conn.proxy.pending:
                    self.conn.proxy.watched(self.link)
                other = self.other.stall
                if other.armed:  # the request whose reply is to be held
                    begin_stall(self.other, now)
                    self.link.notify()
                shape = self.state.shape()
                delay = shape.delay
                if shape.jitter > 0:
                    delay = max(0.0, delay + self.rng.uniform(-shape.jitter, shape.jitter))
                self.queue.append((now, delay, data))
                self.queued += len(data)
                self.arrived.set()
                while self.queued > QUEUE_LIMIT:
                    self.space.clear()
                    await self.space.wait()
        except (ConnectionError, OSError):
            self.queue.append((time.monotonic(), 0.0, None))
            self.arrived.set()

    async def write(self) -> None:
        previous = 0.0  # when the chunk ahead went: order is kept
        rate_free = 0.0
        stats = self.state.stats
        while True:
            while not self.queue:
                self.arrived.clear()
                await self.arrived.wait()
            arrival, delay, data = self.queue[0]
            held_by_stall = False
            while True:
                shape = self.state.shape()
                due = max(arrival + delay, previous)
                if data is not None and shape.rate > 0:  # delivered once all its bytes passed
                    due = max(due, rate_free) + len(data) / shape.rate
                stalled = self.state.stall.holds(arrival)
                if stalled is not None and stalled > due:
                    due, held_by_stall = stalled, True
                if data is None and shape.close_delay > 0:
                    due = max(due, arrival + shape.close_delay)
                now = time.monotonic()
                if due <= now:
                    break
                changed = self.link.changed
                with contextlib.suppress(asyncio.TimeoutError):
                    await asyncio.wait_for(changed.wait(), due - now)
            self.queue.popleft()
            sent = time.monotonic()
            previous = sent
            if data is None:  # the sender closed its side: pass the close on
                with contextlib.suppress(Exception):
                    if self.writer.can_write_eof():
                        self.writer.write_eof()
                return
            rate_free = sent
            self.queued -= len(data)
            self.space.set()
            added = sent - arrival
            stats.bytes += len(data)
            stats.chunks += 1
            stats.added += added
            stats.max_added = max(stats.max_added, added)
            if added >= NOTICEABLE:
                stats.delayed_chunks += 1
            if held_by_stall:
                stats.stalled_bytes += len(data)
                stats.stalled_chunks += 1
            self.writer.write(data)
            await self.writer.drain()


def nodelay(writer: asyncio.StreamWriter) -> None:
    sock = writer.get_extra_info("socket")
    if sock is not None:
        with contextlib.suppress(OSError):
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)


def abort(writer: asyncio.StreamWriter) -> None:
    """Close with a TCP RST (SO_LINGER 0), as a reset connection looks to its peer."""
    sock = writer.get_extra_info("socket")
    if sock is not None:
        with contextlib.suppress(OSError):
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
    with contextlib.suppress(Exception):
        writer.transport.abort()


async def serve(config: dict[str, Any]) -> None:
    proxy = Proxy(config)
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, proxy.stopping.set)
    await proxy.start()
    await proxy.stopping.wait()
    await proxy.stop()


def main(argv: list[str]) -> int:
    if len(argv) != 2:
        print("usage: python -m harness.controller.linkproxy CONFIG.json", file=sys.stderr)
        return 64
    config = json.loads(Path(argv[1]).read_text())
    try:
        asyncio.run(serve(config))
    except OSError as e:
        print(f"link proxy: {e}", file=sys.stderr, flush=True)
        return 70
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
