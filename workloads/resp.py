"""A lean RESP client: one socket, commands packed and replies parsed by hiredis (C), no pool,
no retries.

Two users, both on the hot path of every session: the protected resource (ours), and the
project's own single-instance lock recipes on one node (:class:`LeanRedis`; the recipe is what
they test, not a client library). The libraries under test (redis-py's lock, Redlock,
Redisson, the Sentinel client) keep their own clients, as applications use them. A request
costs about a third of redis-py's CPU. Outcomes follow the history contract: a refused
connection certainly did nothing (``ConnectionRefusedError``), a timeout or a connection lost
mid-request may have done anything (``Indeterminate``).
"""

from __future__ import annotations

import hashlib
import socket
import struct
from collections.abc import Callable
from os import read, write
from typing import Any

import hiredis

from harness.core.locks import Indeterminate

BUFFER = 65536  # bytes a reply is read into at a time, past its first read
FIRST_READ = 256  # bytes a reply's first read takes (a small object: no buffer of BUFFER)
# The replies a lock's requests get most, as hiredis parses them: SET's +OK, a nil (SET NX
# that found the key taken), and a script's 1 or 0 (compare-and-delete).
SHORT_REPLIES: dict[bytes, Any] = {b"+OK\r\n": b"OK", b"$-1\r\n": None, b":1\r\n": 1,
                                   b":0\r\n": 0}


class RespError(Exception):
    """An error reply of the server (it executed nothing of the command)."""


HOLE = object()  # where a :class:`Command`'s one varying argument goes
FILLED = b"%b$%d\r\n%b\r\n%b"  # a Command: head, the value's length, the value, tail


class Command:
    """A command whose arguments are fixed but one (``HOLE``), packed once: ``pack(value)`` is
    what :func:`hiredis.pack_command` makes of the arguments with ``value`` in the hole (a
    lock's request with its owner). A value of ``width`` bytes (a lock's owner: 32 hex
    digits) is put between two pieces packed for that length (``before`` and ``after``: two
    concatenations, 0.7k instructions, where the packing of every argument costs ten times as
    much and the format of any length 2.0k); one of another length takes the format."""

    def __init__(self, *args: Any, width: int = 32) -> None:
        at = next(i for i, a in enumerate(args) if a is HOLE)
        self.head = b"*%d\r\n" % len(args) + b"".join(_bulk(a) for a in args[:at])
        self.tail = b"".join(_bulk(a) for a in args[at + 1:])
        self.width = width
        self.before, self.after = self.head + b"$%d\r\n" % width, b"\r\n" + self.tail

    def pack(self, value: str) -> bytes:
        data = value.encode()
        if len(data) == self.width:
            return self.before + data + self.after
        return FILLED % (self.head, len(data), data, self.tail)


def _bulk(arg: Any) -> bytes:
    """One argument as :func:`hiredis.pack_command` writes it (a bulk string)."""
    return hiredis.pack_command((arg,)).split(b"\r\n", 1)[1]


class Resp:
    def __init__(self, host: str, port: int, timeout: float) -> None:
        self.address = (host, port)
        self.timeout = timeout
        self.sock: socket.socket | None = None
        self.fd = -1  # the socket's file descriptor while it is open, else -1
        self.reader = hiredis.Reader()
        self.buffer = bytearray(BUFFER)  # every reply is read into it, no new object a read
        self.scripts: dict[str, str] = {}  # sha -> source
        self._ask = self.prepared()  # request's

    def _connect(self) -> socket.socket:
        try:
            sock = socket.create_connection(self.address, self.timeout)
        except ConnectionRefusedError:
            raise
        except OSError as e:
            raise Indeterminate(f"connect: {e}") from e
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        # A blocking socket with the kernel's own timeouts: a reply costs one recv, where
        # Python's settimeout() polls before every recv (a system call more per request).
        sock.settimeout(None)
        usec = max(1, round(self.timeout * 1e6))  # 0 would mean "wait for ever"
        limit = struct.pack("ll", usec // 1_000_000, usec % 1_000_000)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVTIMEO, limit)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_SNDTIMEO, limit)
        self.reader = hiredis.Reader()
        return sock

    def call(self, *args: Any) -> Any:
        """One command, one reply; an error reply raises RespError."""
        return self._ask(hiredis.pack_command(args))

    def request(self, packed: bytes) -> Any:
        """One packed command (:func:`hiredis.pack_command`, :meth:`Command.pack`), one reply;
        an error reply raises RespError. Two system calls when the reply comes in one piece:
        the send, and one read of at most :data:`FIRST_READ` bytes. A reply a lock's request
        gets most (``+OK``, a nil, ``:1``, ``:0``) is known by a look-up of its bytes, as
        hiredis would have parsed it; any other is parsed by hiredis (:meth:`_parse`)."""
        return self._ask(packed)

    def prepared(self, command: Command | None = None, instead: Command | None = None
                 ) -> Callable[[Any], Any]:
        """``command``'s request with a value put in its hole, as one function ``(value) ->
        reply``: packed, sent and its reply read as :meth:`request` does, in one frame (a
        lock's requests: no frame of the packing's, none of :meth:`request`'s). A script's
        command by its SHA1 gives ``instead``, the same script by its source, sent when the
        server answers NOSCRIPT (it forgot the script). No ``command``: the function of
        :meth:`request`, a request packed already."""
        before, after, width = (b"", b"", -1) if command is None else (
            command.before, command.after, command.width)

        def ask(value: Any) -> Any:
            if command is None:
                packed = value
            else:
                data = value.encode()
                packed = (before + data + after if len(data) == width
                          else command.pack(value))
            # The socket's descriptor written and read by os.write and os.read: 1k
            # instructions less a request than the socket's own sendall and recv, the same
            # system calls, the kernel's timeouts the same (SO_SNDTIMEO, SO_RCVTIMEO).
            fd = self.fd
            if fd < 0:
                self.sock = self._connect()
                fd = self.fd = self.sock.fileno()
            try:
                sent = write(fd, packed)
                if sent < len(packed):  # a send buffer full: the rest as the socket sends
                    self.sock.sendall(packed[sent:])  # type: ignore[union-attr]
                data = read(fd, FIRST_READ)
            except OSError as e:
                raise self._lost(e) from e
            reply = SHORT_REPLIES.get(data, data)
            if reply is not data:
                return reply
            try:  # not one of them: parsed, more read if it is not whole
                return self._parse(self.sock, data)  # type: ignore[arg-type]
            except RespError as e:
                if instead is None or not str(e).startswith("NOSCRIPT"):
                    raise
            return self._ask(instead.pack(value))

        return ask

    def _parse(self, sock: socket.socket, data: bytes) -> Any:
        """The reply :meth:`request` began to read (``data``): hiredis parses it, reading on
        into the buffer kept for every reply while it is not whole."""
        reader, buffer = self.reader, self.buffer
        try:
            if not data:
                raise ConnectionResetError("the server closed the connection")
            # The reader holds nothing yet (a reply a request, and a connection in doubt is
            # closed, its reader with it).
            reader.feed(data)
            while (reply := reader.gets()) is False:
                n = sock.recv_into(buffer)
                if not n:
                    raise ConnectionResetError("the server closed the connection")
                reader.feed(buffer, 0, n)
        except (OSError, hiredis.ProtocolError) as e:
            raise self._lost(e) from e
        if isinstance(reply, hiredis.ReplyError):
            raise RespError(str(reply))
        return reply

    def _lost(self, e: Exception) -> Indeterminate:
        """The connection's state is unknown after ``e``: closed (the next request starts
        afresh), and the request's outcome unknown."""
        self.close()
        if isinstance(e, BlockingIOError):  # SO_RCVTIMEO / SO_SNDTIMEO ran out
            return Indeterminate(f"timeout: no reply within {self.timeout:g} s")
        return Indeterminate(f"{type(e).__name__}: {e}")

    def script(self, source: str) -> str:
        sha = hashlib.sha1(source.encode()).hexdigest()
        self.scripts[sha] = source
        return sha

    def evalsha(self, sha: str, keys: list[str], args: list[Any]) -> Any:
        """EVALSHA, loading the script first if the server does not know it (yet)."""
        try:
            return self.call("EVALSHA", sha, len(keys), *keys, *args)
        except RespError as e:
            if not str(e).startswith("NOSCRIPT"):
                raise
        return self.call("EVAL", self.scripts[sha], len(keys), *keys, *args)

    def close(self) -> None:
        self.fd = -1  # before the descriptor is closed (its number may be given out again)
        if self.sock is not None:
            try:
                self.sock.close()
            finally:
                self.sock = None


class LeanRedis:
    """The few commands the project's own single-instance lock recipes send, over :class:`Resp`:
    the same requests redis-py would send (no retries, no pipelining), a third of its CPU per
    request. Replies are decoded as redis-py's ``decode_responses=True`` client returns them.
    Outcomes follow :class:`Resp`: refused is ``ConnectionRefusedError`` (nothing done), a
    timeout or a lost connection is ``Indeterminate``, an error reply is ``RespError``."""

    def __init__(self, host: str, port: int, timeout: float) -> None:
        self.resp = Resp(host, port, timeout)

    def set(self, key: str, value: str, *, nx: bool = False, px: int | None = None) -> bool:
        args: list[Any] = ["SET", key, value]
        if nx:
            args.append("NX")
        if px is not None:
            args += ["PX", px]
        return self.resp.call(*args) is not None

    def setnx(self, key: str, value: str) -> bool:
        return bool(self.resp.call("SETNX", key, value))

    def expire(self, key: str, seconds: int) -> bool:
        return bool(self.resp.call("EXPIRE", key, seconds))

    def delete(self, key: str) -> int:
        return int(self.resp.call("DEL", key))

    def get(self, key: str) -> str | None:
        value = self.resp.call("GET", key)
        return None if value is None else value.decode("utf-8", "replace")

    def register_script(self, source: str) -> Any:
        """A callable ``(keys=[...], args=[...])`` running ``source`` by EVALSHA."""
        sha = self.resp.script(source)
        return lambda keys, args: self.resp.evalsha(sha, list(keys), list(args))

    def setter(self, key: str, *, nx: bool = False, px: int | None = None
               ) -> Callable[[str], Any]:
        """``set(key, value, nx=..., px=...)`` of one key, packed once: ``(value) -> reply``,
        ``b"OK"`` when it set the key and None when it did not (``nx``: the key was there)."""
        args: list[Any] = ["SET", key, HOLE]
        if nx:
            args.append("NX")
        if px is not None:
            args += ["PX", px]
        return self.resp.prepared(Command(*args))

    def script_of_keys(self, source: str, keys: list[str]) -> Callable[[str], Any]:
        """A script on fixed ``keys`` with one argument, packed once: ``(arg) -> reply``. As
        :meth:`register_script`'s: EVALSHA, and EVAL when the server does not know it."""
        sha = self.resp.script(source)
        return self.resp.prepared(Command("EVALSHA", sha, len(keys), *keys, HOLE),
                                  Command("EVAL", source, len(keys), *keys, HOLE))

    def close(self) -> None:
        self.resp.close()
