"""The link layer's proxy: ``python -m harness.controller.linkproxy CONFIG.json``.

One process per run, started by the controller (:mod:`harness.controller.links`) and recorded
in the run's process table, so teardown and ``harness clean`` stop it. It is the network, not a
client: a client that is SIGSTOPped freezes alone, the proxy goes on delivering (or holding)
bytes. It uses nothing but the standard library and hiredis (to tell grants in Redis replies),
so it starts in a fraction of a second.

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
  passed on, so no waiter's request can slip in between); or from the next *grant* on a link
  of one of ``groups`` (``trigger: grant``, armed at once or, with ``after``, as above): a reply
  that says a lock was taken (see :mod:`harness.controller.respgrants`), and the stall then
  holds every link of that group (one client's), the grant first; the other groups are
  disarmed, their links never held;
- ``reset``: close every connection of the link with a TCP RST, both sides;
- ``stats``: bytes, chunks, time added, bytes held by stalls, grants held (and of those, how
  many were delivered late and how many were dropped: the client had closed the connection),
  connections.

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

from harness.controller.respgrants import GrantTracker

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
    grants_held: int = 0  # grants a ``trigger: grant`` stall caught
    grants_late: int = 0  # ...delivered when the stall let them go
    grants_dropped: int = 0  # ...never delivered: the connection closed first
    last_grant_held: float | None = None

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

    def notify(self) -> None:
        """Its shape or stall changed: every pipe of the link looks at its queue again."""
        for conn in list(self.conns):
            for pipe in conn.pipes:
                pipe.kick()

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
        self.tasks: set[asyncio.Task[None]] = set()
        # stalls armed when a chunk goes up one of the watched links: (watched, links, dirs)
        self.pending: list[tuple[set[str], list[Link], tuple[str, ...], float]] = []
        # a stall armed for the next grant on a link of one of the groups: (groups, seconds);
        # with ``after``, armed once a chunk goes up one of the watched links
        self.grant_watch: tuple[list[list[Link]], float] | None = None
        self.grant_after: tuple[set[str], tuple[list[list[Link]], float]] | None = None
        self.scripts: dict[bytes, bool] = {}  # scripts seen (sha1 -> takes a lock), for all

    def link(self, name: str) -> Link:
        found = self.links.get(name)
        if found is None:
            found = self.links[name] = Link(name)
        return found

    # serving ---------------------------------------------------------------------------------
    async def start(self) -> None:
        loop = asyncio.get_running_loop()
        for route in self.config["routes"]:
            host, port = route["listen"]
            server = await loop.create_server(
                lambda route=route: Side(self, route, accepted=True), host, int(port),
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

    async def dial(self, client: Side) -> None:
        """The leg to the server, from the source's own address; the client side's reading
        waits until it is up."""
        route = client.route
        peer = client.transport.get_extra_info("peername") or ("?", 0)
        src = route.get("src") or self.endpoints.get(peer[0], "?")
        link = self.link(f"{src}>{route['dst']}")
        link.opened += 1
        bind = route.get("bind") or (self.addresses.get(src) if not route.get("src") else None)
        host, port = route["upstream"]
        loop = asyncio.get_running_loop()
        try:
            _, server = await asyncio.wait_for(loop.create_connection(
                lambda: Side(self, route), host, int(port),
                local_addr=(bind, 0) if bind else None), CONNECT_TIMEOUT)
        except (TimeoutError, OSError):
            link.failed += 1
            client.abort()  # as a refused or unreachable server looks: the connection is reset
            return
        if client.closed:
            server.abort()
            return
        Conn(link, client, server)

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
            if trigger not in ("now", "next", "grant"):
                raise ValueError(f"trigger {trigger!r}: use now, next or grant")
            if trigger == "grant":
                if self._dirs(cmd) != ("down",):
                    raise ValueError("a grant comes down: trigger grant needs direction down")
                groups = cmd.get("groups") or [[link] for link in cmd.get("links") or []]
                watch = ([[self.link(str(x)) for x in g] for g in groups], seconds)
                after = cmd.get("after")
                self.grant_watch, self.grant_after = (None, ({str(x) for x in after}, watch)
                                                      ) if after else (watch, None)
                return {}
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
            self.grant_watch = self.grant_after = None
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


    def caught(self, link: Link, now: float) -> bool:
        """A grant comes down ``link``: if a stall waits for one there, it begins on the
        link's group (and the grant is held); the other groups are disarmed."""
        if self.grant_watch is None:
            return False
        groups, seconds = self.grant_watch
        group = next((g for g in groups if link in g), None)
        if group is None:
            return False
        self.grant_watch = None
        for member in group:
            state = member.dirs["down"]
            state.stall.seconds = seconds
            begin_stall(state, now)
            member.notify()
        stats = link.dirs["down"].stats
        stats.grants_held += 1
        stats.last_grant_held = now
        return True

    def watched(self, link: Link) -> None:
        """A chunk goes up ``link``: arm the stalls that waited for it."""
        if self.grant_after is not None and link.name in self.grant_after[0]:
            self.grant_watch, self.grant_after = self.grant_after[1], None
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


class Side(asyncio.Protocol):
    """One socket of a proxied connection: the client's (accepted) or the server's (dialled)."""

    def __init__(self, proxy: Proxy, route: dict[str, Any], *, accepted: bool = False) -> None:
        self.proxy = proxy
        self.route = route
        self.accepted = accepted  # the client's side (else the server's, which we dialled)
        self.transport: asyncio.Transport = None  # type: ignore[assignment]
        self.into: Pipe | None = None  # the pipe that carries what this side receives
        self.out: Pipe | None = None  # the pipe that writes to this side
        self.conn: Conn | None = None
        self.closed = False
        self.early: list[bytes | None] = []  # received before the connection was whole

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        assert isinstance(transport, asyncio.Transport)
        self.transport = transport
        sock = transport.get_extra_info("socket")
        if sock is not None:
            with contextlib.suppress(OSError):
                sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        if self.accepted:
            transport.pause_reading()
            self.proxy.tasks.add(task := asyncio.get_running_loop().create_task(
                self.proxy.dial(self)))
            task.add_done_callback(self.proxy.tasks.discard)

    def data_received(self, data: bytes) -> None:
        if self.into is not None:
            self.into.feed(data)
        else:
            self.early.append(data)

    def eof_received(self) -> bool:
        if self.into is not None:
            self.into.feed(None)
        else:
            self.early.append(None)
        return True  # keep the socket open to write: the close is passed on by the pipe

    def connection_lost(self, exc: Exception | None) -> None:
        self.closed = True
        if self.conn is not None:
            self.conn.close()

    def pause_writing(self) -> None:  # our peer reads slowly: stop reading the other side
        if self.out is not None:
            self.out.source.transport.pause_reading()

    def resume_writing(self) -> None:
        if self.out is not None:
            self.out.source.transport.resume_reading()

    def abort(self) -> None:
        """Close with a TCP RST (SO_LINGER 0), as a reset connection looks to its peer."""
        sock = self.transport.get_extra_info("socket")
        if sock is not None:
            with contextlib.suppress(OSError):
                sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
        self.transport.abort()


class Conn:
    """One proxied connection: the client's side, the server's side, a pipe each way."""

    def __init__(self, link: Link, client: Side, server: Side) -> None:
        self.link = link
        self.client, self.server = client, server
        up, down = Pipe(self, "up", client, server), Pipe(self, "down", server, client)
        self.pipes = (up, down)
        for side in (client, server):
            side.conn = self
        client.into, server.out = up, up
        server.into, client.out = down, down
        self.done = False
        self.grants = GrantTracker(client.proxy.scripts)
        link.conns.add(self)
        for side in (client, server):
            early, side.early = side.early, []
            for data in early:
                side.into.feed(data)  # type: ignore[union-attr]
        client.transport.resume_reading()

    def close(self) -> None:
        if self.done:
            return
        self.done = True
        self.link.conns.discard(self)
        for pipe in self.pipes:
            pipe.cancel()
            pipe.state.stats.grants_dropped += sum(1 for entry in pipe.queue if entry[3])
        for side in (self.client, self.server):
            if not side.closed:
                side.transport.close()

    def reset(self) -> None:
        for side in (self.client, self.server):
            if not side.closed:
                side.abort()
        self.close()


class Pipe:
    """One direction of a connection: a chunk goes on at once when nothing holds it, else it
    waits in a queue with its arrival time and drawn delay until it is due."""

    def __init__(self, conn: Conn, direction: str, source: Side, sink: Side) -> None:
        self.conn = conn
        self.link = conn.link
        self.direction = direction
        self.state = conn.link.dirs[direction]
        self.other = conn.link.dirs[OTHER[direction]]
        self.source, self.sink = source, sink
        # (arrival, drawn delay, bytes or None for the close, a grant a stall caught?)
        self.queue: deque[tuple[float, float, bytes | None, bool]] = deque()
        self.queued = 0
        self.previous = 0.0  # when the chunk ahead went: order is kept
        self.rate_free = 0.0
        self.timer: asyncio.TimerHandle | None = None
        self.eof_sent = False
        self.ended = False  # the source closed its side (its end of file arrived)
        self.loop = asyncio.get_running_loop()

    def feed(self, data: bytes | None) -> None:
        now = time.monotonic()
        grant = False
        if data is not None:
            proxy = self.source.proxy
            if self.direction == "up":
                self.conn.grants.requests(data)
                if proxy.pending or proxy.grant_after:
                    proxy.watched(self.link)
            elif self.conn.grants.replies(data):
                grant = proxy.caught(self.link, now)
            if self.other.stall.armed:  # the request whose reply is to be held
                begin_stall(self.other, now)
                self.link.notify()
            shape = self.state.shape()
            if not self.queue and self.idle(shape, now):  # nothing to hold: pass it on
                self.sent(data, 0.0, False)
                self.previous = now
                self.sink.transport.write(data)
                return
            delay = shape.delay
            if shape.jitter > 0:
                delay = max(0.0, delay + self.source.proxy.rng.uniform(-shape.jitter,
                                                                        shape.jitter))
            self.queued += len(data)
            if self.queued > QUEUE_LIMIT:
                self.source.transport.pause_reading()
        else:
            delay = 0.0
            self.ended = True
        self.queue.append((now, delay, data, grant))
        self.pump()

    def kick(self) -> None:
        if self.timer is not None:
            self.timer.cancel()
            self.timer = None
        self.loop.call_soon(self.pump)

    def cancel(self) -> None:
        if self.timer is not None:
            self.timer.cancel()
            self.timer = None

    def pump(self) -> None:
        """Send every chunk that is due, then wait for the next one's time."""
        if self.timer is not None:
            self.timer.cancel()
            self.timer = None
        while self.queue and not self.conn.done:
            arrival, delay, data, grant = self.queue[0]
            shape = self.state.shape()
            due = max(arrival + delay, self.previous)
            if data is not None and shape.rate > 0:  # delivered once all its bytes passed
                due = max(due, self.rate_free) + len(data) / shape.rate
            held = self.state.stall.holds(arrival)
            held_by_stall = held is not None and held > due
            if held_by_stall:
                due = held  # type: ignore[assignment]
            if data is None and shape.close_delay > 0:
                due = max(due, arrival + shape.close_delay)
            now = time.monotonic()
            if due > now:
                self.timer = self.loop.call_at(self.loop.time() + (due - now), self.pump)
                return
            self.queue.popleft()
            self.previous = self.rate_free = now
            if data is None:  # the sender closed its side: pass the close on
                self.eof_sent = True
                with contextlib.suppress(Exception):
                    if self.sink.transport.can_write_eof():
                        self.sink.transport.write_eof()
                other = self.conn.pipes[0 if self.direction == "down" else 1]
                if other.eof_sent:
                    self.conn.close()
                else:
                    self.loop.call_later(LINGER, self.conn.close)
                return
            self.queued -= len(data)
            if self.queued <= QUEUE_LIMIT // 2:
                with contextlib.suppress(Exception):
                    self.source.transport.resume_reading()
            self.sent(data, now - arrival, held_by_stall)
            if grant:  # a client that has hung up will never read it
                hung_up = self.conn.pipes[0 if self.direction == "down" else 1].ended
                if hung_up:
                    self.state.stats.grants_dropped += 1
                else:
                    self.state.stats.grants_late += 1
            self.sink.transport.write(data)

    def idle(self, shape: Shape, now: float) -> bool:
        """Nothing would hold a chunk arriving now: no shape, no stall on or armed."""
        st = self.state.stall
        return (shape.delay <= 0 and shape.jitter <= 0 and shape.rate <= 0 and not st.armed
                and (st.until is None or now >= st.until))

    def sent(self, data: bytes, added: float, held_by_stall: bool) -> None:
        stats = self.state.stats
        stats.bytes += len(data)
        stats.chunks += 1
        stats.added += added
        stats.max_added = max(stats.max_added, added)
        if added >= NOTICEABLE:
            stats.delayed_chunks += 1
        if held_by_stall:
            stats.stalled_bytes += len(data)
            stats.stalled_chunks += 1


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
