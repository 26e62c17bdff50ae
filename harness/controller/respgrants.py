"""Which replies on a Redis connection are lock grants: what ``stall-grant`` holds.

The link proxy follows each connection's two byte streams in the Redis protocol (RESP, parsed
by hiredis, a reply or request split over several reads included): requests go up, and the
replies come down in the same order, so each reply is paired with the request it answers. An
*acquire* is a request that takes a lock only if it is free, and its *grant* the reply that says
it did:

- ``SET key value ... NX ...`` (without ``GET``): granted by ``+OK``, refused by a nil;
- ``SETNX key value``: granted by ``:1``, refused by ``:0``;
- a script that calls ``SET ... NX`` (on one line): ``EVAL`` with its source, or ``EVALSHA`` of
  a source the proxy saw in an ``EVAL`` or ``SCRIPT LOAD`` on any connection (``scripts``, shared
  by the proxy's connections): granted by any reply but a nil, ``0``, false or an empty one
  (``redis-fenced``'s script answers its token, or nil).

An error reply (``-ERR``, ``-NOSCRIPT``, ``-READONLY``) is never a grant. A connection whose
first request is not a RESP array (ZooKeeper's, PostgreSQL's, etcd's HTTP/2) is not followed,
nor one that leaves the request-reply order (``SUBSCRIBE``, ``MONITOR``, ``CLIENT REPLY``):
nothing on it is a grant.
"""

from __future__ import annotations

import hashlib
import re
from collections import deque
from typing import Any

import hiredis

SET_NX = re.compile(rb"""['"]set['"][^\n]*?['"]nx['"]""", re.IGNORECASE)
UNPAIRED = frozenset({b"SUBSCRIBE", b"PSUBSCRIBE", b"SSUBSCRIBE", b"MONITOR", b"SYNC",
                      b"PSYNC"})
REFUSALS: tuple[Any, ...] = (None, 0, b"", [])  # what a script answers when it took nothing


class Lost(Exception):
    """The streams are not (or no longer) a request-reply RESP conversation."""


def sha_of(source: bytes) -> bytes:
    return hashlib.sha1(source).hexdigest().encode()


def is_grant(kind: str, reply: Any) -> bool:
    """Does ``reply`` grant the acquire of ``kind``?"""
    if isinstance(reply, Exception):  # hiredis.ReplyError: the server did nothing
        return False
    if kind == "set-nx":
        return reply is not None
    if kind == "setnx":
        return reply == 1 and not isinstance(reply, bool)
    return reply is not False and reply not in REFUSALS


class GrantTracker:
    """One proxied connection's requests and replies; :meth:`replies` tells when a grant
    completes."""

    def __init__(self, scripts: dict[bytes, bool]) -> None:
        self.scripts = scripts  # sha1 (hex) of a script's source -> does it SET NX?
        self.up = hiredis.Reader()
        self.down = hiredis.Reader()
        self.asked: deque[str | None] = deque()  # per request still unanswered: its kind
        self.on = True
        self.grants = 0

    def requests(self, data: bytes) -> None:
        """Bytes the client sent (whole requests or parts)."""
        if not self.on:
            return
        try:
            self.up.feed(data)
            while (request := self.up.gets()) is not False:
                self.asked.append(self.kind(request))
        except (Lost, hiredis.ProtocolError):
            self.stop()

    def replies(self, data: bytes) -> bool:
        """Bytes the server sent; True when a grant completes in them."""
        if not self.on:
            return False
        granted = False
        try:
            self.down.feed(data)
            while (reply := self.down.gets()) is not False:
                if not self.asked:
                    raise Lost("a reply to no request")
                kind = self.asked.popleft()
                if kind is not None and is_grant(kind, reply):
                    granted = True
                    self.grants += 1
        except (Lost, hiredis.ProtocolError):
            self.stop()
        return granted

    def stop(self) -> None:
        self.on = False
        self.asked.clear()

    def kind(self, request: Any) -> str | None:
        """``set-nx``, ``setnx`` or ``script`` for an acquire, None for any other request."""
        if not isinstance(request, list) or not request or not all(
                isinstance(x, bytes) for x in request):
            raise Lost("not a RESP request")
        cmd = request[0].upper()
        if cmd == b"SET":
            flags = {x.upper() for x in request[3:]}
            return "set-nx" if b"NX" in flags and b"GET" not in flags else None
        if cmd == b"SETNX":
            return "setnx"
        if cmd in (b"EVAL", b"EVAL_RO") and len(request) > 1:
            return "script" if self.learn(request[1]) else None
        if cmd in (b"EVALSHA", b"EVALSHA_RO") and len(request) > 1:
            return "script" if self.scripts.get(request[1].lower()) else None
        if cmd == b"SCRIPT" and len(request) > 2 and request[1].upper() == b"LOAD":
            self.learn(request[2])
            return None
        if cmd in UNPAIRED or (cmd == b"CLIENT" and len(request) > 1
                               and request[1].upper() == b"REPLY"):
            raise Lost(f"{cmd.decode(errors='replace')} leaves the request-reply order")
        return None

    def learn(self, source: bytes) -> bool:
        takes = SET_NX.search(source) is not None
        self.scripts[sha_of(source)] = takes
        return takes
