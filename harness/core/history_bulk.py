"""The bulk reading of a large JSON-lines history: a block of whole lines decoded and checked
in C, in one call (msgspec, against a schema of the usual client op), instead of one line at a
time in Python.

The schema is a subset of what :func:`harness.core.history.validate_op` accepts: a client's op
(an int process) of the usual fields, its value null, a scalar, or an object of scalars whose
typed fields (``seq``, ``session``, ``validity``, ...) have their types. Whatever else a block
holds goes to the strict reader, :func:`harness.core.history.parse_lines`:

- a line the schema refuses (a nemesis op, a value that is a list, ...): that line alone;
- a line whose colons outnumber the keys decoded from it (a field the schema does not name,
  which it drops; a duplicate key, which it merges; a colon inside a string): that line alone;
- anything odd in the block's shape (a blank line, a carriage return, a line that does not
  begin with ``{`` and end with ``}``), JSON that the decoder refuses (NaN, a lone surrogate,
  bytes that are not UTF-8), a line the strict reader refuses, or times that go backwards:
  the whole block, line by line, so that every refusal is the strict reader's own, naming the
  same line with the same words.

A line begins with ``{`` and ends with ``}``, and every newline of the block stands between
``}`` and ``{``: such a newline cannot be inside a JSON value (a string holds no raw newline;
after a closing brace, an object wants a comma or its own end), so when the decoder finds as
many values as the block has lines, each line holds exactly one.
"""

from __future__ import annotations

import re
from itertools import accumulate, islice, repeat, zip_longest
from operator import attrgetter, is_, itemgetter, le
from typing import Annotated, Literal, TypedDict

import msgspec
import orjson

from harness.core.history import MAX_LINE, MAX_NAME, MAX_TIME, TYPES, Op, parse_lines

TYPE_CHECKING = False  # see harness/core/history.py
if TYPE_CHECKING:
    from collections.abc import Callable, Iterator, Sequence
    from typing import Any, BinaryIO

BLOCK = 4 << 20  # bytes read at a time (then up to the end of the line)
THREADS: int | None = None  # threads that read blocks into columns beside this one (None: one
# a spare core but this one's: harness.core.ahead.spare_cores)
_BOM = b"\xef\xbb\xbf"
# What a bulk decode that cannot read a block raises (a value nested deeper than msgspec goes,
# whatever the depth, among them): the block is then read strictly, which names the line.
UNREAD = (msgspec.ValidationError, msgspec.DecodeError, UnicodeDecodeError, RecursionError)

_Int = Annotated[int, msgspec.Meta(ge=-MAX_TIME, le=MAX_TIME)]
_Nat = Annotated[int, msgspec.Meta(ge=0, le=MAX_TIME)]
_Scalar = None | bool | str | float | _Int
_Seconds = (Annotated[float, msgspec.Meta(gt=-1e12, lt=1e12)]
            | Annotated[int, msgspec.Meta(gt=-10**12, lt=10**12)] | None)

# A value that is an object: the fields the lock checkers read, typed as
# harness.core.history._check_fields requires, and the other fields our workloads write. Any
# other field is dropped by the decoder, and the colon count sends its line to the strict reader.
_Value = TypedDict("_Value", {  # (functional form: "from" is a keyword)
    "seq": _Int | None, "session": _Int | None, "from": _Int | None, "to": _Int | None,
    "counter": _Int | None, "process": _Int | None, "token": _Int | None,
    "kind": str | None, "validity": _Seconds,
    "timeout": _Scalar, "in_lock_tx": _Scalar, "error": _Scalar,
}, total=False)


_F = Annotated[str, msgspec.Meta(min_length=1, max_length=MAX_NAME)]
_LOCK = Annotated[str, msgspec.Meta(max_length=MAX_NAME)]


class _Optional(TypedDict, total=False):
    """The usual client op's optional fields."""

    index: _Nat
    value: _Scalar | _Value
    token: _Int | None
    error: _Scalar


def _schema(f: Any, lock: Any) -> Any:
    """The usual client op, its ``f`` and ``lock`` of the types given. Made by the TypedDict
    class itself, not ``TypedDict(...)`` with ``Required[f]`` or ``lock | None``: typing caches
    those by value, and would give back the Literal of another file (see :func:`_literal`)."""
    fields = {"time": _Nat, "process": _Int, "type": Literal["invoke", "ok", "fail", "info"],
              "f": f}
    optional = type(_Optional)("_Lock", (_Optional,), {"__annotations__": {"lock": lock}},
                               total=False)
    return type(_Optional)("_ClientOp", (optional,), {"__annotations__": fields}, total=True)


_decode_any = msgspec.json.Decoder(_schema(_F, _LOCK | None)).decode_lines
SHARED = 64  # f and lock names the decoder knows by name at most (then the names are shared in
# Python, op by op)


class _Decoder:
    """The schema's decoder. Once it has seen a file's f and lock names (a few), it takes them
    as Literal types and so decodes each as one shared str object (the strict reader shares
    them too: a third less memory for millions of ops), with no pass over the ops in Python; a
    block with a name it does not know yet is decoded again with str types, its names shared
    op by op, and the next block's decoder knows them."""

    def __init__(self, names: dict[str, str]) -> None:
        self.names = names
        self.fs: set[str] = set()
        self.locks: set[str] = set()
        self.decode_lines = None  # the Literal one: none before the first block

    def learn(self, ops: list[Op]) -> None:
        fs = set(map(_F_OF, ops))
        locks = {x for x in set(map(dict.get, ops, repeat("lock"))) if type(x) is str and x}
        if fs <= self.fs and locks <= self.locks and self.decode_lines is not None:
            return
        self.fs |= fs
        self.locks |= locks
        if len(self.fs) + len(self.locks) > SHARED:
            self.decode_lines = None
            return
        share = self.names.setdefault
        fs = [share(x, x) for x in sorted(self.fs)]
        locks = [share(x, x) for x in sorted(self.locks)]
        decode_lines = msgspec.json.Decoder(_schema(_literal(fs), _literal([None, *locks]))
                                            ).decode_lines
        probe = [{"time": 0, "process": 0, "type": "ok", "f": f, "lock": lock}
                 for f, lock in zip_longest(fs, locks, fillvalue=None)]
        for op in probe:
            op["f"] = op["f"] or fs[0]
        got = decode_lines(b"\n".join(map(orjson.dumps, probe)))
        same = all(a is b for op, want in zip(got, probe, strict=True)
                   for a, b in ((op["f"], want["f"]), (op["lock"], want["lock"])))
        self.decode_lines = decode_lines if same else None


def _literal(names: list[Any]) -> Any:
    """``Literal[*names]`` (made afresh where typing allows: ``Literal[...]`` is cached by
    value, and may give back the alias made for another file, with that file's objects; the
    decoder returns the objects of its Literal; :meth:`_Decoder.learn` checks they are ours)."""
    make = getattr(getattr(Literal, "_getitem", None), "__wrapped__", None)
    return make(Literal, *names) if make is not None else Literal[tuple(names)]  # type: ignore


_AT = re.compile(r"`\$\[(\d+)\]")  # where a validation error is: "- at `$[12].value`"
_NAMED = re.compile(r"`\$\[\d+\]\.(f|lock)`")  # an f or lock the Literal decoder may not know
_F_OF = itemgetter("f")


class _NewName(Exception):
    """A name the Literal decoder does not know (or an f or lock of a wrong type)."""


def read_blocks(fh: BinaryIO, name: str, progress: Callable[[int], None] | None = None
                ) -> list[Op]:
    """The ops of a JSON-lines file, ordered by time, read a block at a time; what
    :func:`harness.core.history.parse_lines` would return for its lines, or its error.
    ``progress`` is told the bytes read so far after each block."""
    ops: list[Op] = []
    decoder = new_decoder()
    line, last = 1, -1
    for block in blocks(fh):
        got = read_block(block, name, line, last, decoder)
        if got:
            last = got[-1]["time"]
            ops += got
        line += block.count(b"\n")
        if progress is not None:
            progress(fh.tell())
    return ops


def read_block(block: bytes, name: str, first: int, last: int, decoder: _Decoder
               ) -> list[Op]:
    """The ops of ``block``, whole lines of a file from line ``first`` on, after an op at time
    ``last``; ``decoder``: the file's, which shares its strings (one object per type, f,
    lock)."""
    ops = bulk(block, name, first, decoder)
    if ops is not None:
        if not ops:
            return ops
        times = list(map(_TIME, ops))
        if last <= times[0] and all(map(le, times, islice(times, 1, None))):
            return ops
    parts = block.split(b"\n")
    lines = [p + b"\n" for p in parts[:-1]]
    if parts[-1]:
        lines.append(parts[-1])  # the file's last line, with no newline
    return parse_lines(lines, name, first=first, last=last, names=decoder.names)


def bulk(block: bytes, name: str, first: int, decoder: _Decoder) -> list[Op] | None:
    """The ops of ``block`` (whole lines from line ``first`` on) in their order, decoded in
    bulk; None where the block must be read strictly whole (see the module's docstring)."""
    names = decoder.names
    if decoder.decode_lines is not None:
        try:
            got = _decoded(block, name, first, names, decoder.decode_lines)
        except _NewName:
            pass
        else:
            if got is not None:
                ops, strict = got
                if strict:
                    decoder.learn(ops)  # the strict reader's lines may have new names
                return ops
    got = _decoded(block, name, first, names, _decode_any)
    if got is None:
        return None
    ops = got[0]
    _share(ops, names)
    decoder.learn(ops)
    return ops


def new_decoder() -> _Decoder:
    """A decoder for one file (it learns the file's names)."""
    return _Decoder({t: t for t in TYPES})  # the schema's own strings for the types


_TIME = itemgetter("time")
_PLUS_ONE = (1).__add__


def _decoded(block: bytes, name: str, first: int, names: dict[str, str],
             decode_lines: Callable[[memoryview], list[Op]]
             ) -> tuple[list[Op], set[int]] | None:
    """The ops of ``block`` read in bulk, the lines the schema does not describe read strictly
    (and which those are); None where the block must be read strictly whole (see the module's
    docstring). Raises :class:`_NewName` where the Literal decoder does not know an f or a
    lock."""
    if not (block.startswith(b"{") and block.endswith(b"}\n")):
        return None
    n = block.count(b"}\n{") + 1  # lines, if every newline but the last is between } and {
    if _count(block, b"\n") != n:
        return None
    lines: list[bytes] = []  # split when a line must be read strictly
    view = memoryview(block)
    ops: list[Op] = []
    strict: set[int] = set()  # the lines read by the strict reader
    at = start = 0  # the first line not decoded yet, and where it starts
    while at < n:
        try:
            got = decode_lines(view[start:])
        except msgspec.ValidationError as e:
            if decode_lines is not _decode_any and _NAMED.search(str(e)):
                raise _NewName from None
            m = _AT.search(str(e))
            if m is None:
                return None
            k = int(m.group(1))
        except (msgspec.DecodeError, UnicodeDecodeError, RecursionError):
            return None  # (nested deeper than the decoder goes: the strict reader says so)
        else:
            if len(got) != n - at:
                return None
            ops += got
            break
        if not lines:
            lines = block.split(b"\n")
            starts = list(accumulate(map(_PLUS_ONE, map(len, lines)), initial=0))
        if k:
            try:
                got = decode_lines(view[start:starts[at + k]])
            except UNREAD:
                return None
            if len(got) != k:
                return None
            ops += got
        at += k
        op = _strict(lines[at], name, first + at, names)
        if op is None:
            return None
        ops.append(op)
        strict.add(at)
        at += 1
        start = starts[at]
    values = list(map(dict.get, ops, repeat("value")))
    keys = sum(map(len, ops)) + sum([len(v) for v in values if type(v) is dict])
    if keys != _count(block, b":"):  # a line with a field the schema dropped or merged, or ...
        if not lines:
            lines = block.split(b"\n")
        for i, colons in enumerate(map(bytes.count, lines[:n], repeat(b":"))):
            v = values[i]
            if colons != len(ops[i]) + (len(v) if type(v) is dict else 0) and i not in strict:
                op = _strict(lines[i], name, first + i, names)  # ... a colon inside a string
                if op is None:
                    return None
                ops[i] = op
                strict.add(i)
    return ops, strict


def _count(data: bytes, byte: bytes) -> int:
    """How many times ``byte`` is in ``data``: twice as fast as ``bytes.count``, which looks at
    a byte at a time where ``replace`` searches."""
    return len(data) - len(data.replace(byte, b""))


def _strict(line: bytes, name: str, lineno: int, names: dict[str, str]) -> Op | None:
    """One line read by the strict reader; None where it refuses it (the block is then read
    strictly whole, for its first refusal)."""
    from harness.core.history import HistoryError

    try:
        got = parse_lines([line + b"\n"], name, ordered=False, first=lineno, names=names)
    except HistoryError:
        return None
    return got[0] if len(got) == 1 else None


def _share(ops: list[Op], names: dict[str, str]) -> None:
    """One str object per distinct f and lock name, as the strict reader keeps them (the
    schema's types are shared already)."""
    share = names.setdefault
    for op in ops:
        f = op["f"]
        op["f"] = share(f, f)
        lock = op.get("lock")
        if lock is not None:
            op["lock"] = share(lock, lock)


# ---------------------------------------------------------------------------------------------
# Columns: a big file of plain client ops read with no Python object per op kept


class _Plain(msgspec.Struct, gc=False, forbid_unknown_fields=True):
    """A plain lock client's op: the fields :class:`harness.core.columns.Columns` holds, of
    the schema's types (``value`` only null). Any other field, and the op is not plain."""

    time: _Nat
    process: _Int
    type: Literal["invoke", "ok", "fail", "info"]
    f: _F
    index: _Nat = -1  # (a default is not checked: -1, as no index is, says it is not there)
    value: None = msgspec.UNSET  # type: ignore[assignment]  # (so: null, or not there)
    lock: _LOCK | msgspec.UnsetType | None = msgspec.UNSET


_decode_plain = msgspec.json.Decoder(_Plain).decode_lines


class _Codes(dict):  # type: ignore[type-arg]
    """Names to codes, a new name given the next code."""

    def __init__(self, names: list[Any]) -> None:
        super().__init__((x, i) for i, x in enumerate(names))
        self.names = list(names)

    def __missing__(self, name: Any) -> int:
        self.names.append(name)
        code = self[name] = len(self.names) - 1
        return code


def read_columns(fh: BinaryIO, progress: Callable[[int], None] | None = None) -> Any:
    """The ops of a JSON-lines file as :class:`harness.core.columns.Columns`, read a block at a
    time, when every line is a plain client op (see :class:`_Plain`) and times never go back;
    None otherwise (a nemesis op, another field, anything the strict reader would refuse or
    read another way: the caller then reads the file as it always did). ``progress`` is told
    the bytes read so far after each block. Each block's columns are written into columns
    sized for the whole file (:class:`ColumnStore`), not kept apart and joined at the end (which
    held every column twice, and left the heap as large after)."""
    from harness.core.ahead import Ahead, spare_cores

    store = ColumnStore.of(fh)
    threads = THREADS if THREADS is not None else max(0, spare_cores() - 1)
    with Ahead(threads if store.size > 2 * BLOCK else 0) as ahead:  # (a block or two: none)
        return _read_columns(fh, progress, store, ahead)


def _read_columns(fh: BinaryIO, progress: Callable[[int], None] | None, store: ColumnStore,
                  ahead: Any) -> Any:
    """:func:`read_columns`, the blocks' layouts read (:meth:`_Template.read`) in turn by
    ``ahead``'s threads and this one, as many at once as it has, the results taken in the
    file's order. The threads are let finish before the template learns names; a block read
    while it knew fewer names than now is read again if it did not fit (one that fitted fits
    still: a name's code never changes), and one dealt before it knew any is read when its
    turn comes. So every block is read as the plain loop reads it."""
    from collections import deque

    import numpy as np

    from harness.core.columns import LOCK_NULL, TYPE_CODES

    types = TYPE_CODES.__getitem__
    fs = _Codes([])
    locks = _Codes([msgspec.UNSET, None])  # codes LOCK_ABSENT, LOCK_NULL
    at = 0  # ops read so far
    template: _Template | bool | None = None  # None: not known yet; False: none fits
    queue: deque[tuple[bytes, int, Any, int, int]] = deque()
    blocks_read = blocks(fh)
    while True:
        while len(queue) < ahead.depth and (block := next(blocks_read, None)) is not None:
            if not (block.startswith(b"{") and block.endswith(b"}\n")):
                return None
            n = _count(block, b"\n")
            if template is None:
                template = (_Template(True) if block.startswith(b'{"index": ') else
                            _Template(False) if block.startswith(b'{"index":') else False)
            job = ahead.submit(template.read, block, n) if template and template.tails else None
            queue.append((block, n, job, template.generation if template else 0, fh.tell()))
        if not queue:
            break
        block, n, job, generation, done = queue.popleft()
        # (a block the layout reads is n lines "{...}": no newline inside a value to fear)
        read = job.result() if job is not None else None
        if read is None and template and (job is None or generation != template.generation):
            read = template.read(block, n)  # with the names known now
        if read is None and block.count(b"}\n{") + 1 != n:
            return None
        if read is not None:
            store.put(at, n, len(block), (*read, True))
            at += n
            if progress is not None:
                progress(done)
            continue
        try:
            got = _decode_plain(block)
        except UNREAD:
            return None
        if len(got) != n:
            return None
        index = np.fromiter(map(_INDEX_OF, got), np.int64, n)
        absent = index < 0
        missing = int(absent.sum())
        if missing:  # as read_history numbers them: by position
            index[absent] = np.arange(at, at + n, dtype=np.int64)[absent]
        values = np.fromiter(map(is_, map(_VALUE_OF, got), repeat(None)), bool, n)
        lock = np.fromiter(map(locks.__getitem__, map(_LOCK_OF, got)), np.int32, n)
        fields = 5 * n - missing + int(values.sum()) + int(np.count_nonzero(lock))
        if fields != _count(block, b":"):  # a duplicate key, or a colon inside a string
            return None
        store.put(at, n, len(block), (
            index, np.fromiter(map(_TIME_OF, got), np.int64, n),
            np.fromiter(map(_PROCESS_OF, got), np.int64, n),
            np.fromiter(map(types, map(_TYPE_OF, got)), np.uint8, n),
            np.fromiter(map(fs.__getitem__, map(_F_OF_PLAIN, got)), np.int32, n),
            lock, values))
        at += n
        del got
        if template:
            ahead.quiet()  # (no thread reads the template while it learns)
            template.learn(fs.names, locks.names)
        if progress is not None:
            progress(done)
    return store.history(at, [str(x) for x in fs.names], locks.names[LOCK_NULL + 1:])


def blocks(fh: BinaryIO) -> Iterator[bytes]:
    """The file's blocks of whole lines (:data:`BLOCK` bytes, then up to the end of the line;
    a longer line is refused by the strict reader), the first one's byte order mark left
    out."""
    first = True
    while block := fh.read(BLOCK):
        if not block.endswith(b"\n"):
            block += fh.readline(MAX_LINE + 1)
        if first and block.startswith(_BOM):
            block = block[len(_BOM):]
        first = False
        yield block


class ColumnStore:
    """The columns of a file read a block at a time (index, time, process, type, f, lock,
    value), each an array sized for the whole file: its size over the first block's bytes
    an op, with a margin (pages never written take no memory), made larger (copied) if the
    file holds more ops than that."""

    KINDS = ("int64", "int64", "int64", "uint8", "int32", "int32", "bool")
    MARGIN = 1.125

    def __init__(self, size: int) -> None:
        self.size = size  # the file's bytes (0: not known, grown as it goes)
        self.arrays: list[Any] = []

    @classmethod
    def of(cls, fh: BinaryIO) -> ColumnStore:
        """A store for the file ``fh`` (an EDN history or a Jepsen log's reader makes one of
        its size too: :mod:`harness.presentation.interop_bulk`)."""
        try:
            import os

            return cls(os.fstat(fh.fileno()).st_size)
        except (OSError, AttributeError, ValueError):  # (not a file: grown as it goes)
            return cls(0)

    def put(self, at: int, n: int, nbytes: int, columns: tuple[Any, ...]) -> None:
        """A block's ``n`` ops (``nbytes`` bytes) at ``at``; a column may be one value."""
        import numpy as np

        if not self.arrays or at + n > len(self.arrays[0]):
            wanted = max(at + n, int(self.size * n / max(nbytes, 1) * self.MARGIN) + 1)
            wanted = max(wanted, 2 * len(self.arrays[0])) if self.arrays else wanted
            grown = [np.empty(wanted, kind) for kind in self.KINDS]
            for old, new in zip(self.arrays, grown, strict=False):  # (none at first)
                new[:at] = old[:at]
            self.arrays = grown
        for column, values in zip(self.arrays, columns, strict=True):
            column[at:at + n] = values

    def history(self, n: int, fs: list[str], locks: list[str], kind: type | None = None
                ) -> Any:
        """The ``n`` ops read as ``kind`` (:class:`harness.core.columns.Columns`), the codes
        of ``f`` naming ``fs`` and those of ``lock`` from 2 ``locks``; None for no op, or
        times that go back (the strict reader refuses them, or keeps the file's order). Each
        column a copy when the array is much larger (a file whose first block had longer lines
        than the rest), else the array's start."""
        import numpy as np

        from harness.core.columns import Columns

        if not n:
            return None
        index, time, process, type_, f, lock, value = [
            a[:n].copy() if len(a) > 2 * n else a[:n] for a in self.arrays]
        if time[0] < 0 or not bool(np.all(time[1:] >= time[:-1])):
            return None
        if int(process.min()) >= -(1 << 31) and int(process.max()) < 1 << 31:
            process = process.astype(np.int32)  # (half the memory; any int64 is as good)
        return (kind or Columns)(time, process, type_, f, fs, lock, [None, None, *locks], index,
                                 value)


_TIME_OF = attrgetter("time")
_PROCESS_OF = attrgetter("process")
_TYPE_OF = attrgetter("type")
_F_OF_PLAIN = attrgetter("f")
_LOCK_OF = attrgetter("lock")
_INDEX_OF = attrgetter("index")
_VALUE_OF = attrgetter("value")


class _Template:
    """Lines of one exact layout, read by array operations with no Python object a line:
    ``{"index": N, "time": N, "process": N, "type": "T", "f": "F", "value": null, "lock": "L"}``
    (as ``json.dumps`` writes them, or without the spaces, as orjson does), every N digits
    without a leading zero (at most 18), T a type and F, L names the file has shown already
    (so what is not a digit in a line is one of a few exact byte strings). A line of any
    other form fails the block, which is then decoded (:data:`_decode_plain`): what a line
    that matches says is beyond doubt, and what does not match is read as before."""

    MAX_TAILS = 64

    def __init__(self, spaced: bool) -> None:
        colon, comma = (b": ", b", ") if spaced else (b":", b",")
        self.segs = [b'{"index"' + colon, comma + b'"time"' + colon,
                     comma + b'"process"' + colon]
        self.colon, self.comma = colon, comma
        import numpy as np

        self.seg_arrays = {seg: np.frombuffer(seg, np.uint8) for seg in self.segs}
        self.tails: list[tuple[bytes, int, int, int]] = []  # (bytes, type, f, lock codes)
        self.generation = 0  # how many times it learned names
        import threading

        self._local = threading.local()  # each thread's scratch arrays

    def learn(self, fs: list[str], locks: list[Any]) -> None:
        """The tails of every type, f and lock name known (locks[2:]: names)."""
        from harness.core.columns import TYPE_NAMES

        c, k = self.colon, self.comma
        tails = []
        for t_code, t in enumerate(TYPE_NAMES):
            for f_code, f in enumerate(fs):
                for l_code, lock in enumerate(locks):
                    if l_code < 2:
                        continue
                    tails.append((k + b'"type"' + c + orjson.dumps(t) + k + b'"f"' + c
                                  + orjson.dumps(f) + k + b'"value"' + c + b"null" + k
                                  + b'"lock"' + c + orjson.dumps(lock) + b"}",
                                  t_code, f_code, l_code))
        self.tails = tails if len(tails) <= self.MAX_TAILS else []
        self.generation += 1
        import numpy as np

        self.codes = np.array([t[1:] for t in self.tails], np.int32).reshape(-1, 3)
        # How tail_of() tells the tails apart (what follows the third number of a line).
        tails = [t[0] for t in self.tails]
        self.tail_codes = {t: k for k, t in enumerate(tails)}
        self.tail_arrays = [np.frombuffer(t, np.uint8) for t in tails]
        self.tail_offsets = telling(tails)
        keys = np.array([line_key(x, self.tail_offsets or ()) for x in tails], np.int64)
        self.tail_order = np.argsort(keys)
        self.tail_keys = keys[self.tail_order]

    def scratch(self, size: int) -> list[Any]:
        """Three byte arrays of at least ``size`` bytes, the calling thread's, kept from block
        to block (fresh ones each time cost a page fault every 4 KiB)."""
        import numpy as np

        scratch = getattr(self._local, "scratch", None)
        if scratch is None or len(scratch[0]) < size:
            scratch = self._local.scratch = [np.empty(size, np.uint8), np.empty(size, bool),
                                             np.empty(size, bool)]
        return scratch

    def tail_of(self, buf: Any, begins: Any, ends: Any) -> Any:
        """Which of the layout's tails each line's bytes from ``begins`` to ``ends`` (its
        newline) in ``buf`` are, or None when one is none of them. Each is told by its length
        and its bytes at a few offsets (:func:`telling`), then
        compared whole with the tail told, the lines of each tail at once: what is told is
        only a guess, what is compared is exact."""
        import numpy as np
        from numpy.lib.stride_tricks import sliding_window_view


        length = ends - begins
        if self.tail_offsets is None:  # no offsets tell the tails apart: each looked up
            data = buf.tobytes()
            get = self.tail_codes.get
            which = np.fromiter((get(data[b:e], -1) for b, e in zip(
                begins.tolist(), ends.tolist(), strict=True)), np.intp, len(begins))
            return None if bool(np.any(which < 0)) else which
        key = keys_of(buf, begins, length, self.tail_offsets)
        at = np.minimum(np.searchsorted(self.tail_keys, key), len(self.tail_keys) - 1)
        if not bool(np.all(self.tail_keys[at] == key)):
            return None
        which = self.tail_order[at]
        for code in np.flatnonzero(np.bincount(which)).tolist():
            tail = self.tail_arrays[code]
            rows = sliding_window_view(buf, len(tail))[begins[which == code]]
            if not bool((rows == tail).all()):
                return None
        return which

    def read(self, block: bytes, n: int) -> tuple[Any, ...] | None:
        """(index, time, process, type, f, lock codes) of the block's ``n`` lines (it has
        ``n`` newlines, the last its last byte: the caller counted them), or None when a line
        is not of the layout.

        The digits of a line form exactly three runs, each where the layout puts it (right
        after its segment); what is not a digit, line by line, is exactly the layout's three
        segments and one of the known tails (each line's looked up whole)."""
        import numpy as np
        from numpy.lib.stride_tricks import sliding_window_view


        if not self.tails:
            return None
        buf = np.frombuffer(block, np.uint8)
        size = len(buf)
        scratch = self.scratch(size)
        digit = np.less(np.subtract(buf, 48, out=scratch[0][:size]), 10,
                        out=scratch[1][:size])  # (bytes below "0" wrap around)
        # Where a run of digits begins or ends (the block begins with "{", ends with "\n").
        turns = np.flatnonzero(np.not_equal(digit[1:], digit[:-1], out=scratch[2][:size - 1]))
        if len(turns) != 6 * n:
            return None
        run_start = turns[0::2] + 1
        run_end = (turns[1::2] + 1).reshape(n, 3)
        run_start = run_start.reshape(n, 3)
        length = run_end - run_start
        if int(length.max()) > 18 or bool(np.any((length > 1) & (buf[run_start] == 48))):
            return None  # (a leading zero is not JSON)
        # Each line begins where its first run says: the block's first, and each other one
        # right after a newline. The block has n newlines, its last byte one of them, so these
        # n - 1 (distinct, in order) are the others: the lines begin there and nowhere else.
        l0, l1, l2 = map(len, self.segs)
        starts = run_start[:, 0] - l0
        if not (int(starts[0]) == 0 and buf[size - 1] == 10
                and bool(np.all(buf[starts[1:] - 1] == 10))
                and bool(np.all(run_start[:, 1] == run_end[:, 0] + l1))
                and bool(np.all(run_start[:, 2] == run_end[:, 1] + l2))):
            return None
        # What is not a digit, line by line: exactly the layout's segments, each where the
        # runs put it, and one of its tails, from the last run to the newline.
        for seg, at in zip(self.segs, (starts, run_end[:, 0], run_end[:, 1]), strict=True):
            if not bool((sliding_window_view(buf, len(seg))[at] == self.seg_arrays[seg]).all()):
                return None
        ends = np.empty(n, np.int64)  # each line's newline
        ends[:-1] = starts[1:] - 1
        ends[-1] = size - 1
        which = self.tail_of(buf, run_end[:, 2], ends)
        if which is None:
            return None
        values = [run_values(buf, run_end[:, j], length[:, j]) for j in range(3)]
        codes = self.codes[which]
        return (*values, codes[:, 0].astype(np.uint8), codes[:, 1].copy(), codes[:, 2].copy())


# The pieces the array readers of big history files share (this module's for JSON lines,
# harness.presentation.interop_bulk's for EDN and Jepsen logs): lines told apart by their
# length and a few bytes, and the numbers of a block's runs of digits read by array operations.
MAX_OFFSETS = 3  # bytes a line is told by, besides its length (a key fits an int64)


def line_key(line: bytes, offsets: Sequence[Any]) -> int:
    """A line's length, then its bytes at ``offsets`` (0 past its end), as one int: what
    the readers compute for each line of a block, by array operations."""
    key = len(line)
    for o in offsets:
        key = key << 8 | (line[o] if o < len(line) else 0)
    return key


def telling(lines: Sequence[bytes]) -> tuple[int, ...] | None:
    """A few offsets at which ``lines`` differ, so that a line's length and its bytes there
    (:func:`line_key`) tell which it is (each offset the one that tells most apart, in turn);
    None when :data:`MAX_OFFSETS` do not tell them all apart."""
    longest = max(map(len, lines), default=0)
    offsets: list[int] = []
    while len({line_key(x, offsets) for x in lines}) < len(lines):
        if len(offsets) == MAX_OFFSETS:
            return None
        offsets.append(max(range(longest),
                           key=lambda o: len({line_key(x, [*offsets, o]) for x in lines})))
    return tuple(offsets)


def keys_of(buf: Any, begins: Any, length: Any, offsets: Sequence[int]) -> Any:
    """:func:`line_key` of each line of ``buf`` (a block's bytes as uint8) that begins at
    ``begins`` and is ``length`` bytes long, for all of them at once."""
    import numpy as np

    key = length.copy()
    last = len(buf) - 1
    for offset in offsets:
        key <<= 8
        key |= np.where(offset < length, buf[np.minimum(begins + offset, last)], 0)
    return key


def run_values(buf: Any, end: Any, digits: Any) -> Any:
    """The numbers of runs of decimal digits in ``buf`` (a block's bytes as uint8), each
    ending before ``end`` and ``digits`` long (the caller has checked they are digits, at
    most 18): the bytes before each run's end, as many as the longest run's, by powers of
    ten, those that are not the run's own counted as 0."""
    import numpy as np
    from numpy.lib.stride_tricks import sliding_window_view

    longest = int(digits.max())
    place = np.arange(longest)
    weights = 10 ** place[::-1]
    if int(end.min()) >= longest:  # (then every row is inside the block)
        rows = sliding_window_view(buf, longest)[end - longest]
        if int(digits.min()) == longest:  # every run as long: only digits in the rows
            return rows @ weights - 48 * int(weights.sum())
        window = np.subtract(rows, 48, dtype=np.int64)
    else:
        window = np.subtract(buf[end[:, None] - longest + place], 48, dtype=np.int64)
    window[place < longest - digits[:, None]] = 0  # (not this number's)
    return window @ weights
