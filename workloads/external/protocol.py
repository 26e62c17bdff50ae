"""The client protocol's messages: JSON lines between the harness and a lock program.

Pure functions, no I/O: what goes down the program's stdin and how each line that comes back
up its stdout is read (``docs/clients.md`` is the specification, for program authors).

The harness sends one ``hello``, then requests, one at a time, each with an ``id``::

    {"op": "hello", "protocol": 1, "process": 3, "lock": "lock", "ttl": 2.0, ...}
    {"id": 1, "op": "acquire", "timeout": 5.0}
    {"id": 2, "op": "release", "token": 17, "handle": ...}

and the program answers each with one line: ``type`` ok, fail or info, plus the fields of that
op (``token``, ``validity``, ``handle``, ``held``, ``error``). Anything else on stdout (a line
that is not JSON, an object without the right ``id`` or ``type``, a token that is not an
integer) is a :class:`ProtocolError`: the harness cannot know what the program did.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass, field
from typing import Any

VERSION = 1
OK, FAIL, INFO = "ok", "fail", "info"
TYPES = (OK, FAIL, INFO)
OPS = ("acquire", "release", "extend", "held")
FEATURES = ("extend", "held")  # optional ops a program may declare in its hello reply
MAX_LINE = 1 << 20  # bytes: a longer line is garbage


class ProtocolError(Exception):
    """A line from the program that does not follow the protocol (one line of text)."""


@dataclass(frozen=True)
class Hello:
    """What a program declares in its hello reply."""

    name: str = ""
    version: str = ""
    tokens: bool = False
    features: frozenset[str] = frozenset()


@dataclass(frozen=True)
class Reply:
    """One answer: ``type`` ok | fail | info, and the fields its op carries."""

    type: str
    token: int | None = None
    validity: float | None = None
    handle: Any = None
    held: bool | None = None
    error: str | None = None
    extra: dict[str, Any] = field(default_factory=dict)


def encode(message: dict[str, Any]) -> bytes:
    """One line, compact, ASCII-safe."""
    return (json.dumps(message, separators=(",", ":"), allow_nan=False) + "\n").encode()


def hello(*, process: int, lock: str, ttl: float, op_timeout: float,
          nodes: list[dict[str, Any]], source: str | None, seed: int,
          options: dict[str, Any]) -> dict[str, Any]:
    return {"op": "hello", "protocol": VERSION, "process": process, "lock": lock, "ttl": ttl,
            "op_timeout": op_timeout, "nodes": nodes, "source": source, "seed": seed,
            "options": options}


def request(request_id: int, op: str, **fields: Any) -> dict[str, Any]:
    if op not in OPS:
        raise ValueError(f"unknown op {op!r}")
    return {"id": request_id, "op": op, **{k: v for k, v in fields.items() if v is not None}}


def _object(line: bytes | str) -> dict[str, Any]:
    text = line.decode("utf-8", "replace") if isinstance(line, bytes) else line
    text = text.strip()
    if not text:
        raise ProtocolError("an empty line")
    try:
        obj = json.loads(text)
    except ValueError:
        raise ProtocolError(f"not JSON: {shorten(text)}") from None
    if not isinstance(obj, dict):
        raise ProtocolError(f"not a JSON object: {shorten(text)}")
    return obj


def parse_hello(line: bytes | str) -> Hello:
    """The program's answer to ``hello``: ok with its declarations; fail names why it cannot
    run (raised as ProtocolError with the program's own words)."""
    obj = _object(line)
    kind = obj.get("type")
    if kind != OK:
        why = obj.get("error") if kind in (FAIL, INFO) else f"no ok in {shorten(json.dumps(obj))}"
        raise ProtocolError(f"hello refused: {why}" if kind in (FAIL, INFO) else str(why))
    tokens = obj.get("tokens", False)
    features = obj.get("features", [])
    if not isinstance(tokens, bool):
        raise ProtocolError(f"hello: tokens must be true or false, got {tokens!r}")
    if not isinstance(features, list) or not all(isinstance(f, str) for f in features):
        raise ProtocolError(f"hello: features must be a list of op names, got {features!r}")
    unknown = sorted(set(features) - set(FEATURES))
    if unknown:
        raise ProtocolError(f"hello: unknown feature {unknown[0]!r} (known: "
                            f"{', '.join(FEATURES)})")
    return Hello(name=str(obj.get("name", "")), version=str(obj.get("version", "")),
                 tokens=tokens, features=frozenset(features))


def parse_reply(line: bytes | str, request_id: int, op: str) -> Reply:
    """The answer to request ``request_id`` (an ``op``), checked field by field."""
    obj = _object(line)
    if obj.get("id") != request_id:
        raise ProtocolError(f"answer to request {obj.get('id')!r} while waiting for "
                            f"{request_id}: {shorten(json.dumps(obj))}")
    kind = obj.get("type")
    if kind not in TYPES:
        raise ProtocolError(f"type must be ok, fail or info, got {kind!r}")
    token = obj.get("token")
    if token is not None and (isinstance(token, bool) or not isinstance(token, int)):
        raise ProtocolError(f"token must be an integer or null, got {token!r}")
    validity = obj.get("validity")
    if validity is not None:
        if (isinstance(validity, bool) or not isinstance(validity, int | float)
                or not math.isfinite(validity)):
            raise ProtocolError(f"validity must be a number of seconds or null, got "
                                f"{validity!r}")
        validity = float(validity)
    held = obj.get("held")
    if op == "held" and kind == OK and not isinstance(held, bool):
        raise ProtocolError(f"held: an ok answer needs held true or false, got {held!r}")
    error = obj.get("error")
    known = {"id", "type", "token", "validity", "handle", "held", "error"}
    return Reply(type=kind, token=token, validity=validity, handle=obj.get("handle"),
                 held=held if isinstance(held, bool) else None,
                 error=None if error is None else shorten(str(error)),
                 extra={k: v for k, v in obj.items() if k not in known})


def shorten(text: str, limit: int = 200) -> str:
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 3] + "..."
