"""A run's journals merged into a :class:`harness.core.run_history.ColumnHistory`, a journal at
a time: what :func:`harness.core.run_history.merged_columns` makes of
:func:`harness.core.journal.merge_journals`, op for op, without ever holding every op as a dict.

Why a journal at a time: the dict merge holds one dict an op (~560 B) for the whole run, and
its columns would be built from those. Here each client's journal is read into columns by its
lines' layouts (:func:`read_columns`, no object a line: why below), any other
journal decoded by the merge's own reader and put in columns when its ops fit, else kept as
dicts (the nemesis's, the final read's): the peak is the columns plus one journal. Then the
journals' columns are joined in history order (their codes of names, strings and layouts made
one) and numbered.

A client's journal is read by its lines' layouts (:func:`read_columns`), with the rules by
which layouts may share columns (:func:`same_kinds`): a run's client journals are hundreds of
thousands of lines of a few layouts (a lock client's four); decoded into dicts they cost ~1.5 us
and ~560 B a line, and the columns would then be made from the dicts. Read by layout, a line
costs its bytes and a few array passes.

Pure but for reading the journals.
"""

from __future__ import annotations

import typing
from collections.abc import Iterable
from itertools import repeat
from operator import itemgetter
from pathlib import Path
from typing import Any, Literal

import msgspec
import numpy as np
import orjson

from harness.core.columns import (
    BOOL,
    FLOAT,
    INT,
    KIND_OF,
    LOCK_ABSENT,
    LOCK_NULL,
    NULL,
    STR,
    TYPE_CODES,
    Columns,
    Shape,
    flat,
)
from harness.core.history import MAX_LINE, Op
from harness.core.history_bulk import _F, _LOCK, UNREAD, _Int, _Nat, _Scalar, _Value
from harness.core.journal import merge_journals, read_journal, read_lines
from harness.core.run_history import ColumnHistory, columns_of, merged_columns

_TIME, _PROCESS = itemgetter("time"), itemgetter("process")


def merge_journals_columns(paths: Iterable[Path]) -> ColumnHistory | None:
    """The journals at ``paths`` merged as :func:`harness.core.journal.merge_journals` merges
    them (journals in sorted path order, a stable sort by time, ``index`` an op's place), as a
    :class:`ColumnHistory`: equal to ``merged_columns(merge_journals(paths))``, op for op.
    None where that is None (no client op fits, or two clients' fields that no one column
    holds: an int and a float under one name): the caller then merges the dicts.

    A journal holds one process's ops (a client's, the final read's) or the nemesis's. Journals
    that do not (an int process in two journals, or beside another process in one) are merged
    as dicts first, then put in columns: the same result, at the dict merge's cost."""
    from harness.core.history_bulk import new_decoder

    paths = sorted(paths)
    decoder = new_decoder()
    times: list[np.ndarray] = []  # each journal's, in journal order
    in_cols: list[bool] = []  # each journal's: its ops in columns
    parts: list[Columns] = []  # the journals' in columns
    others: list[Op] = []  # the other journals' ops, in journal order
    seen: set[int] = set()  # the int processes of the journals read
    for path in paths:
        with path.open("rb") as fh:
            data = read_lines(fh)[0]
        cols = read_columns(data)
        del data
        if cols is not None:
            p = cols.process.item(0)
            if p in seen:
                return merged_columns(merge_journals(paths))  # (see the docstring)
            seen.add(p)
            parts.append(cols)
            times.append(cols.time)
            in_cols.append(True)
            continue
        ops = read_journal(path, decoder)
        if any(map(dict.__contains__, ops, repeat("index"))):  # as merge_journals drops it
            for op in ops:
                op.pop("index", None)
        processes = set(map(_PROCESS, ops))
        ints = {p for p in processes if type(p) is int}
        if ints and (len(processes) > 1 or not ints.isdisjoint(seen)):
            return merged_columns(merge_journals(paths))  # (see the docstring)
        seen |= ints
        cols = columns_of(ops, indexed=False) if ints else None
        if cols is not None:
            parts.append(cols)
            times.append(cols.time)
        else:
            times.append(np.fromiter(map(_TIME, ops), np.int64, len(ops)))
            others += ops
        in_cols.append(cols is not None)
        del ops
    if not parts:
        return None
    joined = joined_parts(parts)
    if joined is None:
        return None
    del parts
    # Each op by its position in journal order, and by its place: order[place] = position.
    held = np.repeat(np.array(in_cols, dtype=bool), [len(t) for t in times])  # by position
    order = np.argsort(np.concatenate(times), kind="stable")  # (as merge_journals sorts)
    del times
    row = np.cumsum(held) - 1  # a position's row in the joined columns (where held)
    is_col = held[order]  # by place
    cols_at = np.flatnonzero(is_col)  # the places of the ops in columns, in order
    joined = reordered(joined, row[order[cols_at]])
    joined.index = cols_at.astype(np.int64)
    del row, cols_at
    other_at = np.flatnonzero(~is_col)
    other_row = (np.cumsum(~held) - 1)[order[other_at]]  # each one's place in others
    placed = [{"index": at, **others[k]}
              for at, k in zip(other_at.tolist(), other_row.tolist(), strict=True)]
    return ColumnHistory(joined, placed)


def joined_parts(parts: list[Columns]) -> Columns | None:
    """The journals' columns one after another, with one list of names (f, lock), strings and
    layouts; None where :func:`columns_of` would refuse the ops of them all together (a field
    an int in one and a float in another; one layout's field of two kinds)."""
    fs: dict[str, int] = {}
    locks: dict[str | None, int] = {}  # (names from code LOCK_NULL + 1 on)
    strings: dict[str, int] = {}
    shapes: dict[Shape, int] = {}
    kinds: dict[Any, Any] = {}  # a layout's keys (and its value's) -> its fields' kinds
    dtypes: dict[str, Any] = {}  # a field's column's dtype
    f_parts, lock_parts, shape_parts = [], [], []
    field_parts: dict[str, list[np.ndarray]] = {}
    sizes = [len(cols) for cols in parts]
    for k, cols in enumerate(parts):
        f_parts.append(np.array([fs.setdefault(x, len(fs)) for x in cols.fs],
                                dtype=np.int32)[cols.f] if len(cols.fs) else cols.f)
        lock_map = [0, LOCK_NULL, *(LOCK_NULL + 1 + locks.setdefault(x, len(locks))
                                    for x in cols.locks[LOCK_NULL + 1:])]
        lock_parts.append(np.array(lock_map, dtype=np.int32)[cols.lock])
        shape_map = []
        for shape in cols.shapes:
            if not same_kinds(shape, kinds, dtypes):
                return None
            shape_map.append(shapes.setdefault(shape, len(shapes)))
        shape_parts.append(np.array(shape_map, dtype=np.int32)[cols.shape])
        string_map = np.array([strings.setdefault(x, len(strings)) for x in cols.strings],
                              dtype=np.int64)
        for name, column in cols.fields.items():
            is_str = np.array([(name, STR) in flat(s) for s in cols.shapes], dtype=bool)
            if bool(is_str.any()):  # (codes into this journal's strings: made the joined's)
                rows = is_str[cols.shape]
                column = column.copy()
                column[rows] = string_map[column[rows]]
            got = field_parts.setdefault(name, [])
            while len(got) < k:  # (journals before it without the field)
                got.append(np.zeros(sizes[len(got)], dtype=column.dtype))
            got.append(column)
        # Each column of the journal held once: as a part of the joined one, or mapped to it.
        cols.fields = {}
        cols.f = cols.lock = cols.shape = None  # type: ignore[assignment]
    n = sum(sizes)
    fields = {}
    for name, got in field_parts.items():
        while len(got) < len(parts):
            got.append(np.zeros(sizes[len(got)], dtype=got[0].dtype))
        fields[name] = _concatenated(got)
    return Columns(_taken_from(parts, "time"), _taken_from(parts, "process"),
                   _taken_from(parts, "type"), _concatenated(f_parts), list(fs),
                   _concatenated(lock_parts), [None, None, *locks],
                   np.zeros(n, dtype=np.int64), np.zeros(n, dtype=bool),
                   _concatenated(shape_parts), list(shapes), fields, list(strings))


def _concatenated(arrays: list[np.ndarray]) -> np.ndarray:
    """The arrays one after another, the list emptied (each part freed once joined)."""
    out = np.concatenate(arrays)
    arrays.clear()
    return out


def _taken_from(parts: list[Columns], name: str) -> np.ndarray:
    """The parts' column ``name`` joined, each part's let go."""
    arrays = [getattr(cols, name) for cols in parts]
    for cols in parts:
        setattr(cols, name, None)
    return _concatenated(arrays)


def reordered(cols: Columns, take: np.ndarray) -> Columns:
    """``cols``'s rows ``take``, in that order (each column replaced in turn: one column held
    twice at a time)."""
    for name in ("time", "process", "type", "f", "lock", "has_value", "shape"):
        setattr(cols, name, getattr(cols, name)[take])
    for name in list(cols.fields):
        cols.fields[name] = cols.fields[name][take]
    return cols


_ValueLine = msgspec.defstruct(
    "_ValueLine", [(k, t | msgspec.UnsetType, msgspec.UNSET)
                   for k, t in typing.get_type_hints(_Value, include_extras=True).items()],
    forbid_unknown_fields=True, gc=False)


class _Line(msgspec.Struct, gc=False, forbid_unknown_fields=True):
    """A client's op as the merge's bulk decoder reads it (its schema's fields, of its types,
    :mod:`harness.core.history_bulk`), as a struct: what decodes the lines :func:`read_columns`
    has the decoder judge (any other field, or a field of another type, and the journal is
    read as dicts)."""

    time: _Nat
    process: _Int
    type: Literal["invoke", "ok", "fail", "info"]
    f: _F
    value: _Scalar | _ValueLine | msgspec.UnsetType = msgspec.UNSET  # type: ignore[valid-type]
    lock: _LOCK | msgspec.UnsetType | None = msgspec.UNSET
    token: _Int | msgspec.UnsetType | None = msgspec.UNSET
    error: _Scalar | msgspec.UnsetType = msgspec.UNSET


_decode = msgspec.json.Decoder(_Line).decode_lines
MAX_LAYOUTS = 256  # a journal's distinct lines but for their digits, at most (else: dicts)
_CORE_OR_LOCK = frozenset(("time", "process", "type", "f", "lock"))


def read_columns(data: bytes) -> Columns | None:
    """A journal's whole lines (:func:`harness.core.journal.read_lines`) as the columns
    :func:`columns_of` makes of the ops :func:`harness.core.journal.read_journal` reads from
    them (``index`` zero), when they are one client's and fit; None otherwise, and the caller
    reads them as dicts (a nemesis's, the final read's, a line the decoder would refuse or read
    another way, a layout :func:`columns_of` refuses: what is made of them is then their own).

    No object is made a line. Lines alike but for their digits (each taken for a 0) are of
    one layout: the same keys in the same order (no key holds a digit), each value of the
    same kind (told by its bytes) and as wide, where the others' are; only digits differ
    (nothing is escaped as ``\\u``). One line of each layout is read as a dict and written
    back: it must be the very line (orjson's: no space, no duplicate key); its dict says the
    layout, its strings without digits are every line's, and each number of every line of
    the layout is read at once where the layout puts it. What the decoder would refuse in
    a line of a layout whose first line it takes is a number out of its field's range or
    with a leading zero (each range is an interval, and a number with a leading zero the
    least of its width: the lines with each field's least and greatest int are decoded too),
    or a text it refuses (each distinct text of a number with a point or an exponent, or of
    a string with a digit, is decoded, on a line of its own)."""
    if b"\\u" in data:
        return None
    buf = np.frombuffer(data, np.uint8)
    ends = np.flatnonzero(buf == 10)  # each line's newline
    n = len(ends)
    if not n:
        return None
    starts = np.empty(n, dtype=np.int64)
    starts[0] = 0
    starts[1:] = ends[:-1] + 1
    if int((ends - starts).max()) + 1 > MAX_LINE:
        return None  # (the strict reader's to refuse)
    bare = data.translate(_AS_ZERO).split(b"\n")
    bare.pop()
    distinct = dict.fromkeys(bare)
    if len(distinct) > MAX_LAYOUTS:
        return None
    code = {k: i for i, k in enumerate(distinct)}
    layout = np.fromiter(map(code.__getitem__, bare), np.int32, n)
    del bare, distinct, code
    groups = _rows_of(layout, int(layout.max()) + 1)
    del layout
    read = [_layout_of(data[starts[rows[0]]:ends[rows[0]]]) for _, rows in groups]
    if any(r is None for r in read):
        return None
    shapes = [r[0] for r in read]  # type: ignore[index]
    kinds: dict[Any, Any] = {}
    dtypes: dict[str, Any] = {}
    if not all(same_kinds(shape, kinds, dtypes) for shape in shapes):
        return None  # (columns_of refuses the journal)
    distinct_shapes = list(dict.fromkeys(shapes))
    cols = _Built(n, distinct_shapes)
    witnesses: list[np.ndarray] = []  # rows to decode (see the docstring)
    for (_, rows), got in zip(groups, read, strict=True):
        layout_shape, op, places = got  # type: ignore[misc]
        witnesses.append(rows[:1])
        cols.shape[rows] = distinct_shapes.index(layout_shape)
        cols.type[rows] = TYPE_CODES.get(op["type"], 0)
        for name, kind in _read_kinds(layout_shape):
            if kind == NULL:
                continue  # (no column holds a null)
            at, width = places.get(name, (0, 0))
            if kind == INT:
                got_v = _ints(buf, starts[rows] + at, width)
                if got_v is None:
                    return None
                witnesses.append(rows[[int(got_v.argmin()), int(got_v.argmax())]])
            elif kind == BOOL:
                got_v = int(_field(op, name))
            elif kind == "name" and name not in places:  # (a lock not there)
                got_v = LOCK_ABSENT
            else:  # a float, a string, an f or lock (a string, or a null lock)
                value = _field(op, name)
                if type(value) is str and not any(c in value for c in _DIGIT_CHARS):
                    got_v = cols.code(name, kind, value)  # (every line's)
                elif value is None:
                    got_v = LOCK_NULL
                else:  # each distinct text, read once
                    texts = _texts(buf, starts[rows] + at, width)
                    distinct_texts, first, where = np.unique(texts, return_index=True,
                                                             return_inverse=True)
                    witnesses.append(rows[first])
                    try:
                        values = [orjson.loads(x) for x in distinct_texts.tolist()]
                    except orjson.JSONDecodeError:
                        return None
                    if kind == FLOAT:
                        if set(map(type, values)) != {float}:
                            return None
                        got_v = np.array(values, dtype=np.float64)[where]
                    else:
                        if set(map(type, values)) != {str}:
                            return None
                        got_v = np.array([cols.code(name, kind, v) for v in values],
                                         dtype=np.int64)[where]
            cols.put(name, kind, rows, got_v)
    taken = np.unique(np.concatenate(witnesses))
    lines = b"".join([data[s:e + 1] for s, e in zip(starts[taken].tolist(),
                                                     ends[taken].tolist(), strict=True)])
    try:  # (the decoder's schema as a struct, its types)
        if len(_decode(lines)) != len(taken):
            return None
    except UNREAD:
        return None
    return cols.columns()


_AS_ZERO = bytes.maketrans(b"123456789", b"000000000")
_ABSENT = msgspec.UNSET  # (a lock not there: what the struct holds; code LOCK_ABSENT)


class _Coder(dict):  # type: ignore[type-arg]
    """Names to codes, a new name given the next code (looked up in C but for new names)."""

    def __missing__(self, name: Any) -> int:
        code = self[name] = len(self)
        return code


def _layout_of(line: bytes) -> tuple[Shape, Op, dict[str, tuple[int, int]]] | None:
    """``line``'s layout as :func:`columns_of` calls it, its dict, and where each field's
    value is in it (offset, width); None where it is no layout that holds (a value neither
    null nor a flat dict, an ``index``) or the line is not the one orjson writes of its
    dict."""
    try:
        op = orjson.loads(line)
    except orjson.JSONDecodeError:
        return None
    if type(op) is not dict or orjson.dumps(op) != line or "index" in op:
        return None
    out: list[tuple[str, Any]] = []
    places: dict[str, tuple[int, int]] = {}
    at = 1  # past "{"
    for i, (key, v) in enumerate(op.items()):
        at += (1 if i else 0) + len(orjson.dumps(key)) + 1  # [,]"key":
        if key == "value" and type(v) is dict:
            kinds = []
            at += 1  # "{"
            for j, (k, x) in enumerate(v.items()):
                at += (1 if j else 0) + len(orjson.dumps(k)) + 1
                kind = KIND_OF.get(type(x))
                if kind is None:
                    return None
                kinds.append((k, kind))
                width = len(orjson.dumps(x))
                places[f"value.{k}"] = (at, width)
                at += width
            at += 1  # "}"
            out.append((key, tuple(kinds)))
            continue
        if key == "value" and v is not None:
            return None
        width = len(orjson.dumps(v))
        places[key] = (at, width)
        at += width
        if key in _CORE_OR_LOCK:
            out.append((key, None))
        else:
            kind = KIND_OF.get(type(v))
            if kind is None:
                return None
            out.append((key, NULL if key == "value" else kind))
    if at + 1 != len(line):
        return None
    return tuple(out), op, places


def _read_kinds(shape: Shape) -> list[tuple[str, str]]:
    """The fields of a layout with their kinds, as they are read: the names (type is one of
    the layout, f and lock, ``"name"``), the numbers of time and process, every other field
    but a null value."""
    out = [("time", INT), ("process", INT), ("f", "name"), ("lock", "name")]
    for key, kind in shape:
        if key == "value" and isinstance(kind, tuple):
            out += [(f"value.{k}", kd) for k, kd in kind]
        elif key not in _CORE_OR_LOCK and key != "value":
            out.append((key, kind))
    return out


def _field(op: Op, name: str) -> Any:
    return op["value"][name[6:]] if name.startswith("value.") else op.get(name)


_DIGIT_CHARS = "0123456789"
_POWERS = 10 ** np.arange(18, -1, -1, dtype=np.int64)  # (10**18 down to 1)


def _ints(buf: np.ndarray, at: np.ndarray, width: int) -> np.ndarray | None:
    """The ints ``width`` bytes long at ``at`` in ``buf``, read digit by digit (a leading
    ``-`` is every one's, as the layout is); None for more than 18 digits (the decoder's to
    read). A leading zero (not JSON) is read as a digit: its line holds the least number of
    the layout's (the greatest, if negative), which the decoder is given."""
    if width and buf[at[0]] == 45:  # "-"
        sign, at, width = -1, at + 1, width - 1
    else:
        sign = 1
    if not 0 < width <= 18:
        return None
    weights = _POWERS[-width:]
    got = buf[at[:, None] + np.arange(width)] @ weights - 48 * int(weights.sum())
    return -got if sign < 0 else got


def _texts(buf: np.ndarray, at: np.ndarray, width: int) -> np.ndarray:
    """The bytes ``width`` long at ``at`` in ``buf``, each as one bytes string."""
    rows = buf[at[:, None] + np.arange(width)]
    return np.ascontiguousarray(rows).view(f"S{width}").ravel()


class _Built:
    """The columns of a journal being read, and the codes of its names and strings."""

    def __init__(self, n: int, shapes: list[Shape]) -> None:
        self.n = n
        self.shapes = shapes
        self.shape = np.empty(n, dtype=np.int32)
        self.time = np.empty(n, dtype=np.int64)
        self.process = np.empty(n, dtype=np.int64)
        self.type = np.empty(n, dtype=np.uint8)
        self.f = np.empty(n, dtype=np.int32)
        self.lock = np.empty(n, dtype=np.int32)
        self.fields: dict[str, np.ndarray] = {}
        self.codes = {"f": _Coder(), "lock": _Coder({_ABSENT: LOCK_ABSENT, None: LOCK_NULL}),
                      "": _Coder()}  # (strings; a lock's names from code LOCK_NULL + 1 on)

    def code(self, name: str, kind: str, text: str) -> int:
        """A name's code (f, lock) or a string's."""
        return self.codes[name if kind == "name" else ""][text]

    def put(self, name: str, kind: str, rows: np.ndarray, got: Any) -> None:
        if name in ("time", "process", "f", "lock"):
            getattr(self, name)[rows] = got
            return
        column = self.fields.get(name)
        if column is None:
            column = self.fields[name] = np.zeros(
                self.n, dtype=np.float64 if kind == FLOAT else np.int64)
        column[rows] = got

    def columns(self) -> Columns | None:
        """The columns read; None unless they are one process's."""
        if int(self.process.min()) != int(self.process.max()):
            return None
        fs, locks = list(self.codes["f"]), list(self.codes["lock"])
        return Columns(self.time, self.process, self.type, self.f, fs, self.lock,
                       [None, None, *locks[LOCK_NULL + 1:]], np.zeros(self.n, dtype=np.int64),
                       np.zeros(self.n, dtype=bool), self.shape, self.shapes, self.fields,
                       list(self.codes[""]))


def _rows_of(codes: np.ndarray, count: int) -> list[tuple[int, np.ndarray]]:
    """Each code's rows, in order (one sort, no Python code a row)."""
    if count == 1:
        return [(0, np.arange(len(codes)))]
    order = np.argsort(codes, kind="stable")
    bounds = np.cumsum(np.bincount(codes, minlength=count))[:-1]
    return [(c, rows) for c, rows in enumerate(np.split(order, bounds)) if len(rows)]


def same_kinds(shape: Shape, kinds: dict[Any, Any], dtypes: dict[str, Any]) -> bool:
    """Whether ``shape`` agrees with the layouts seen: :func:`columns_of` reads a field of all
    the ops with the same keys at once (of one kind, or it refuses), a field of their values
    of all those with the same keys there too, and holds a field's every kind in one column
    (int64: int, bool, a string's code; float64: float)."""
    keys = tuple(k for k, _ in shape)
    top = tuple(kd for k, kd in shape if k != "value")
    if kinds.setdefault(keys, top) != top:
        return False
    for k, kd in shape:
        if k == "value" and isinstance(kd, tuple):
            vkeys = (keys, tuple(x for x, _ in kd))
            vkinds = tuple(x for _, x in kd)
            if kinds.setdefault(vkeys, vkinds) != vkinds:
                return False
    for name, kind in flat(shape):
        if kind == NULL:
            continue
        dtype = FLOAT if kind == FLOAT else "int"
        if dtypes.setdefault(name, dtype) != dtype:
            return False
    return True
