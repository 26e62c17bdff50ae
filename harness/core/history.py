"""The history: one JSON object a line (the contract in ARCHITECTURE.md).

An op is a plain dict, which keeps reading and checking a million ops cheap:

    {"index": 0, "time": 123456789, "process": 3, "type": "invoke", "f": "acquire",
     "value": null}

``time`` is nanoseconds since the test started (CLOCK_MONOTONIC, shared by every process on the
host); ``process`` is an int, or ``"nemesis"``. ``type`` is ``invoke`` then ``ok`` (it happened),
``fail`` (it certainly did not) or ``info`` (unknown: it may have happened, at any later time).

Each process appends its ops to a journal of its own as they happen (:mod:`harness.core.journal`),
so a run that crashes keeps what it recorded; the journals are merged into one history ordered by
time.
"""

from __future__ import annotations

from collections.abc import Iterable

from harness.core.text import show

# `typing` is imported by type checkers only: at run time it costs every `harness check` process
# about 3 ms (measured), and annotations are strings here (`from __future__ import annotations`).
# Type checkers take any `TYPE_CHECKING` as true.
TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

    Op = dict[str, Any]
else:
    Op = dict

INVOKE = "invoke"
OK = "ok"
FAIL = "fail"
INFO = "info"
TYPES = frozenset({INVOKE, OK, FAIL, INFO})
COMPLETIONS = frozenset({OK, FAIL, INFO})
NEMESIS = "nemesis"
STOP_CLIENTS = "stop-clients"  # the nemesis-process record of the end of the load

NS = 1_000_000_000


class HistoryError(ValueError):
    """A history (or journal) that cannot be read: the message names the file and line."""


MAX_TIME = 2**63 - 1  # ns: nearly 300 years; anything larger is not a time
MAX_NAME = 200  # characters of a process name, an f, a lock name
MAX_DEPTH = 32  # nesting of a value; no history needs more
MAX_ITEMS = 1_000_000  # elements in one op's value
MAX_LINE = 64 * 1024 * 1024  # bytes of one history line


def seconds(ns: int) -> float:
    """Nanoseconds since the test started, as seconds rounded for people (ms resolution)."""
    return round(ns / NS, 3)


def _is_int(v: Any) -> bool:
    return type(v) is int  # bools are ints to isinstance, never to us


Where = str | tuple[str, int]  # a place, or (file name, line number) formatted on error


def _loc(where: Where) -> str:
    return where if isinstance(where, str) else f"{where[0]} line {where[1]}"


_orjson: Any = None  # imported on first use: it costs a process that reads no JSON ~15 ms


def _loads(line: str | bytes) -> Any:
    """orjson for speed; the json module where orjson is stricter than JSON (a lone surrogate
    escape, NaN), so both accept the same documents and json's errors are the ones reported."""
    global _orjson
    if _orjson is None:
        import orjson

        _orjson = orjson
    try:
        return _orjson.loads(line)
    except _orjson.JSONDecodeError:
        import json  # orjson imported it already

        obj = json.loads(line)
        try:  # orjson refuses a lone surrogate escape; json keeps it: refuse it here
            json.dumps(obj, ensure_ascii=False).encode("utf-8")
        except UnicodeEncodeError:
            raise _Malformed("a lone surrogate (an escape such as \\ud800 that is half of "
                             "a character) in a string") from None
        return obj


class _Malformed(ValueError):
    """A line that is JSON but not an op's JSON: duplicate keys, a lone surrogate."""


def _no_duplicate_keys(line: str | bytes, obj: Any) -> None:
    """orjson and json keep the last of two equal keys silently; refuse such a line. The
    line's colons bound its keys from above (every key has one; a string may hold more), so
    colons == keys found means no key was merged (:func:`parse_lines` counts the usual op's
    keys itself and calls this only when they differ); otherwise (a colon inside a string,
    or a duplicate) the line is read again with a hook that sees every pair."""
    if line.count(":" if type(line) is str else b":") == _keys(obj):
        return
    import json

    def pairs(items: list[tuple[str, Any]]) -> dict[str, Any]:
        keys = [k for k, _ in items]
        if len(set(keys)) != len(keys):
            twice = next(k for k in keys if keys.count(k) > 1)
            raise _Malformed(f"duplicate key {show(twice)} in an object")
        return dict(items)

    json.loads(line, object_pairs_hook=pairs)


def _keys(value: Any) -> int:
    """How many keys the objects in ``value`` have, nested ones included."""
    n, stack = 0, [value]
    while stack:
        v = stack.pop()
        if type(v) is dict:
            n += len(v)
            stack.extend(x for x in v.values() if type(x) in (dict, list))
        elif type(v) is list:
            stack.extend(x for x in v if type(x) in (dict, list))
    return n


def _check_value(value: Any, where: Where, name: str) -> None:
    """Bounded nesting and size, walked without recursion."""
    if type(value) in _SCALARS:
        return
    stack: list[tuple[Any, int]] = [(value, 0)]
    items = 0
    while stack:
        v, depth = stack.pop()
        if isinstance(v, dict | list | tuple):
            if depth >= MAX_DEPTH:
                raise HistoryError(f"{_loc(where)}: {name!r} is nested deeper than "
                                   f"{MAX_DEPTH} levels")
            items += len(v)
            if items > MAX_ITEMS:
                raise HistoryError(f"{_loc(where)}: {name!r} has more than {MAX_ITEMS} elements")
            stack.extend((x, depth + 1) for x in (v.values() if isinstance(v, dict) else v))
        elif _is_int(v) and not -MAX_TIME <= v <= MAX_TIME:
            raise HistoryError(f"{_loc(where)}: {name!r} holds an integer too large to be a number "
                               "of this history")
        elif isinstance(v, float) and v != v:
            continue  # NaN is a value some histories have; it compares unequal, harmlessly


def validate_op(obj: Any, where: Where) -> Op:
    """Check one decoded op against the contract; return it, or raise HistoryError (one line
    naming the place, the field and what was wrong, the bad value shown short and escaped).

    The common op (a client's: int process, the usual fields, a value that is null, a scalar or
    a flat object) passes in a few checks here; any other goes through :func:`_validate`, which
    accepts exactly what this does and names what is wrong (a property test holds them equal)."""
    if type(obj) is dict and obj.keys() <= _FAST_KEYS:
        t, time, p, f = obj.get("type"), obj.get("time"), obj.get("process"), obj.get("f")
        if (type(t) is str and t in TYPES and type(time) is int and 0 <= time <= MAX_TIME
                and type(p) is int and -MAX_TIME <= p <= MAX_TIME
                and type(f) is str and 0 < len(f) <= MAX_NAME):
            i, lock, v = obj.get("index", 0), obj.get("lock"), obj.get("value")
            if (type(i) is int and 0 <= i <= MAX_TIME
                    and (lock is None or (type(lock) is str and len(lock) <= MAX_NAME))):
                if type(v) in _SCALARS:
                    return obj
                if type(v) is dict and len(v) <= 16 and _flat(v.values()):
                    if not _TYPED_KEYS.isdisjoint(v):
                        _check_fields(v, where, "value")
                    return obj
    return _validate(obj, where)


def _validate(obj: Any, where: Where) -> Op:
    """:func:`validate_op`, every case."""
    if not isinstance(obj, dict):
        raise HistoryError(f"{_loc(where)}: expected a JSON object, got {type(obj).__name__}")
    for field in ("time", "process", "type", "f"):
        if field not in obj:
            raise HistoryError(f"{_loc(where)}: missing field {field!r}")
    t = obj["type"]
    if not isinstance(t, str) or t not in TYPES:
        raise HistoryError(f"{_loc(where)}: unknown type {show(t)} (expected one of invoke, ok, "
                           "fail, info)")
    time = obj["time"]
    if not _is_int(time) or not 0 <= time <= MAX_TIME:
        raise HistoryError(f"{_loc(where)}: 'time' must be a non-negative integer of ns, got "
                           f"{show(time)}")
    process = obj["process"]
    if not (_is_int(process) and -MAX_TIME <= process <= MAX_TIME) and not (
            isinstance(process, str) and 0 < len(process) <= MAX_NAME):
        raise HistoryError(f"{_loc(where)}: 'process' must be an int or a short name, got "
                           f"{show(process)}")
    f = obj["f"]
    if not isinstance(f, str) or not f or len(f) > MAX_NAME:
        raise HistoryError(f"{_loc(where)}: 'f' must be a short non-empty string, got {show(f)}")
    if "index" in obj and not (_is_int(obj["index"]) and 0 <= obj["index"] <= MAX_TIME):
        raise HistoryError(f"{_loc(where)}: 'index' must be a non-negative integer, got "
                           f"{show(obj['index'])}")
    token = obj.get("token")
    if token is not None and not (_is_int(token) and -MAX_TIME <= token <= MAX_TIME):
        raise HistoryError(f"{_loc(where)}: 'token' must be an integer fencing token or null, got "
                           f"{show(token)}")
    lock = obj.get("lock")
    if lock is not None and not ((isinstance(lock, str) and len(lock) <= MAX_NAME)
                                 or _is_int(lock)):
        raise HistoryError(f"{_loc(where)}: 'lock' must be a short name, got {show(lock)}")
    for name, v in obj.items():
        if name in _CORE:
            continue
        tv = type(v)
        if tv in _SCALARS or (tv is dict and len(v) <= 16 and _flat(v.values())):
            continue
        _check_value(v, where, name)
    _check_lock_fields(obj, where)
    return obj


def _flat(values: Iterable[Any]) -> bool:
    """Only scalars (and integers of a sane size): nothing to walk."""
    for x in values:
        tx = type(x)
        if tx is int:
            if not -MAX_TIME <= x <= MAX_TIME:
                return False
        elif tx not in _SCALARS:
            return False
    return True


_CORE = frozenset({"time", "process", "type", "f", "index", "token", "lock"})
_FAST_KEYS = frozenset({"time", "process", "type", "f", "index", "lock", "value"})
_SCALARS = frozenset({str, bool, type(None), float})
_TYPED_KEYS = frozenset({"seq", "session", "from", "to", "counter", "process", "token", "kind",
                         "validity"})


_INT_FIELDS = ("seq", "session", "from", "to", "counter", "process")
_ENTRY_REQUIRED = {"seq": _is_int, "process": _is_int, "accepted": lambda v: isinstance(v, bool),
                   "kind": lambda v: isinstance(v, str)}


def _check_fields(value: dict[str, Any], where: Where, what: str) -> None:
    for key in value.keys() & _TYPED_KEYS:
        v = value[key]
        if v is None:
            continue
        if key in _INT_FIELDS or key == "token":
            if type(v) is not int:
                raise HistoryError(f"{_loc(where)}: {what} field {key!r} must be an integer, "
                                   f"got {show(v)}")
        elif key == "kind":
            if type(v) is not str:
                raise HistoryError(f"{_loc(where)}: {what} field 'kind' must be a string, "
                                   f"got {show(v)}")
        elif key == "validity" and not (type(v) in (int, float) and v == v and abs(v) < 1e12):
            raise HistoryError(f"{_loc(where)}: {what} field 'validity' must be a number of "
                               f"seconds, got {show(v)}")


def _check_lock_fields(op: Op, where: Where) -> None:
    """The fields the lock checkers read, where an op has them: typed, so that past this
    boundary the checkers may trust them. Values of other shapes (a Jepsen register's
    integers) are left alone; the checkers count what they do not understand."""
    value = op.get("value")
    if type(value) is dict:
        if value.keys() & _TYPED_KEYS:
            _check_fields(value, where, "value")
    elif (isinstance(value, list) and op["f"] == "read" and op["type"] == OK and value
          and isinstance(value[0], dict)):
        for i, entry in enumerate(value):  # the protected resource's log, read back
            what = f"resource log entry {i}"
            if not isinstance(entry, dict):
                raise HistoryError(f"{_loc(where)}: {what} must be an object, got {show(entry)}")
            if entry.get("lock") is not None and not isinstance(entry["lock"], str):
                raise HistoryError(f"{_loc(where)}: {what} field 'lock' must be a name, got "
                                   f"{show(entry['lock'])}")
            for key, ok in _ENTRY_REQUIRED.items():
                if not ok(entry.get(key)):
                    raise HistoryError(f"{_loc(where)}: {what} field {key!r} is missing or of the "
                                       f"wrong type ({show(entry.get(key))})")
            _check_fields(entry, where, what)
    if op["process"] == NEMESIS:
        targets = op.get("targets")
        if targets is not None and not (isinstance(targets, list) and all(
                isinstance(t, str | int) and not isinstance(t, bool) for t in targets)):
            raise HistoryError(f"{_loc(where)}: nemesis 'targets' must be a list of names, got "
                               f"{show(targets)}")
        detail = op.get("detail")
        if detail is not None and not isinstance(detail, dict):
            raise HistoryError(f"{_loc(where)}: nemesis 'detail' must be an object, got "
                               f"{show(detail)}")


def parse_lines(lines: Iterable[str | bytes], name: str, *, ordered: bool = True,
                first: int = 1, last: int = -1, names: dict[str, str] | None = None
                ) -> list[Op]:
    """Parse JSON lines. ``ordered``: times must not go backwards (true of a merged history).
    A part of a file: ``first`` is the number of its first line, ``last`` the time of the op
    before it, ``names`` the strings shared so far (see below)."""
    import json  # JSON lines only: a process reading a Jepsen log or EDN never imports it

    ops: list[Op] = []
    if names is None:
        names = {}
    _loads("{}")  # orjson imported
    loads, decode_error = _orjson.loads, _orjson.JSONDecodeError
    for lineno, line in enumerate(lines, first):
        if not line.strip():
            continue
        where = (name, lineno)
        if len(line) > MAX_LINE:
            raise HistoryError(f"{_loc(where)}: longer than {MAX_LINE >> 20} MB; not a "
                               "history line")
        try:
            try:
                obj = loads(line)  # orjson; _loads says what it refuses and why
            except decode_error:
                obj = _loads(line)
            if type(obj) is dict:  # colons bound keys: see _no_duplicate_keys
                n = len(obj)
                v = obj.get("value")
                if type(v) is dict:
                    n += len(v)
                if line.count(b":" if type(line) is bytes else ":") != n:
                    _no_duplicate_keys(line, obj)
        except json.JSONDecodeError as e:
            raise HistoryError(f"{_loc(where)}: not valid JSON ({e.msg}); truncated line?"
                               ) from None
        except _Malformed as e:
            raise HistoryError(f"{_loc(where)}: malformed history: {e}") from None
        except RecursionError:
            raise HistoryError(f"{_loc(where)}: nested too deeply to be an op") from None
        except UnicodeDecodeError:
            raise HistoryError(f"{_loc(where)}: not UTF-8 text; is this a history.jsonl?"
                               ) from None
        except ValueError as e:  # a number of more than 4300 digits, say
            raise HistoryError(f"{_loc(where)}: not a JSON op ({show(str(e), 120)})") from None
        op = validate_op(obj, where)
        # one str object per distinct type, f and lock name, not one per op: a third less
        # memory for a history of millions of ops
        op["type"] = names.setdefault(op["type"], op["type"])
        op["f"] = names.setdefault(op["f"], op["f"])
        lock = op.get("lock")
        if type(lock) is str:
            op["lock"] = names.setdefault(lock, lock)
        if ordered and op["time"] < last:
            raise HistoryError(
                f"{_loc(where)}: time {op['time']} goes backwards (previous op at {last}); "
                "a history must be ordered by time"
            )
        last = op["time"]
        ops.append(op)
    return ops


def dumps(op: Op) -> str:
    import json

    return json.dumps(op, separators=(",", ":"), sort_keys=False, default=str)
