"""Journals: each process appends its own ops as they happen; after the run they are merged.

A journal is a file the writer maps into its memory (``mmap``, shared): a line, its newline with
it, is copied into the mapping by one ``write`` of the mapping (or a few lines that follow one
another with no request between them, by one ``write``: see :meth:`JournalWriter.mapped_write`),
and no system call is made per line; the file grows a few MiB at a time (``posix_fallocate``,
then the mapping is resized), so a full disk is an error at the growth, not a fault later. The
mapping is the page cache itself: a client killed with SIGKILL (a nemesis, or the kernel when
the controller dies) loses nothing it recorded. Past its lines the file holds zeros only (the
space reserved; a writer that continues a journal first cuts off what a killed one left after
its last newline), so a line a killed writer had not finished copying, in whatever order its
bytes went, holds a zero byte: it is no journal line, and every reader stops at the last newline
before the first zero byte (JSON text never holds a raw zero byte: orjson escapes it). Of a few
lines copied at once, those whole before the first zero byte are read, none after it: a request
follows its invoke's copy, so no line whose request went is lost. A writer that closes cuts the
file to its lines: a plain JSON-lines file, as every reader also accepts.
"""

from __future__ import annotations

import mmap
import os
import threading
from collections.abc import Callable, Iterable
from itertools import repeat
from operator import itemgetter
from pathlib import Path
from time import monotonic_ns
from typing import Any, BinaryIO

import orjson

from harness.core.history import Op, parse_lines

_OPTIONS = orjson.OPT_NON_STR_KEYS
_NEWLINE = orjson.OPT_APPEND_NEWLINE
_dumps = orjson.dumps
GROWTH = 4 << 20  # bytes the file grows by at a time (then one new mapping)
_SCAN = 1 << 18  # bytes a reader takes at a time while it looks for the end of the lines
BULK_BYTES = 256 << 10  # a journal this large is decoded in bulk (harness.core.history_bulk)


class JournalWriter:
    """Appends one process's ops to its journal as they happen: a copy into memory a line, no
    system call. A journal that exists already is continued after its last whole line.
    Threads may share a writer (the nemesis's lanes do): a line is one copy, made by the
    mapping's ``write`` (one call in C: no other thread runs during it, and none is torn by
    another); only a growth of the file takes a lock.

    Past the last line the file holds only zeros (the space reserved, and a killed writer's
    torn line is cut off when a writer continues its journal), so a line the copy had not
    finished when its writer was killed holds a zero byte, where every reader stops."""

    def __init__(self, path: str | os.PathLike[str], process: int | str, t0_ns: int) -> None:
        self.path = Path(path)
        self.process = process
        self.t0_ns = t0_ns
        self._fd: int | None = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o644)
        with open(self._fd, "rb", closefd=False) as fh:
            end = read_lines(fh)[1]  # the file offset the first line goes to
        os.ftruncate(self._fd, end)  # a torn line left by a killed writer, and its zeros
        self._first = end
        self._base = end - end % mmap.PAGESIZE  # the file offset of the mapping's first byte
        self._map: mmap.mmap | None = None  # from the first line on; its position: the end
        self._mu = threading.Lock()
        self._lines = 0  # this writer's lines, once it has closed

    def now(self) -> int:
        return max(0, monotonic_ns() - self.t0_ns)

    @property
    def lines(self) -> int:
        """The lines this writer wrote (counted when asked: no count is kept a line)."""
        m = self._map
        if m is None:
            return self._lines
        end = m.tell()
        return sum(m[at:min(at + _SCAN, end)].count(b"\n")
                   for at in range(self._first - self._base, end, _SCAN))

    def record(self, type_: str, f: str, value: Any = None, lock: str | None = None,
               token: Any = None, **extra: Any) -> Op:
        """Journal one op, now. Its keys: time, process, type, f, value, then ``lock``,
        ``token`` and ``extra`` in that order, each only when it is not None (the lock and
        token of a lock workload's every op are named parameters: no dict built for them)."""
        t = monotonic_ns() - self.t0_ns
        op: Op = {"time": t if t > 0 else 0, "process": self.process, "type": type_, "f": f,
                  "value": value}
        if lock is not None:
            op["lock"] = lock
        if token is not None:
            op["token"] = token
        if extra:
            for k, v in extra.items():
                if v is not None:
                    op[k] = v
        if self._fd is not None:
            try:  # what encode(op) tries first, a call less on every op
                line = _dumps(op, option=_NEWLINE)
            except TypeError:
                line = encode(op) + b"\n"
            self.copy(line)
        return op

    def line_format(self, type_: str, f: str, lock: str | None = None,
                    value: bytes = b"%b", rest: bytes = b"%b") -> bytes:
        """This writer's op of ``type_`` and ``f`` (and ``lock`` when not None) as a format
        for :meth:`put`: ``%d`` the time, then ``value``, a format of the value's JSON (``%b``:
        all of it given; ``b'{"session":%d}'``: an int put in), then ``rest``: ``%b``, the
        rest given (empty, or ``,"token":`` and the token's JSON, as :func:`token_json` makes
        it), or that rest itself, put in once here (a format's every ``%`` as ``%%``: a
        ``%b`` less to fill in each line). Filled in, it is byte for byte the line
        :meth:`record` writes for the same op (the same keys in the same order, each part
        encoded by orjson), whenever orjson can encode that op."""
        def key(name: str, value: Any) -> bytes:
            return b',"' + name.encode() + b'":' + literal(encode(value))

        return b"".join([b'{"time":%d', key("process", self.process), key("type", type_),
                         key("f", f), b',"value":', value,
                         key("lock", lock) if lock is not None else b"", rest, b"}\n"])

    def put(self, form: bytes, *parts: Any) -> None:
        """Journal one op, now, from a :meth:`line_format` and what it puts in after the
        time: the value's parts, then the rest (:func:`token_json`). No op is built, nothing
        encoded but what the caller encodes (a value used twice, the invoke's and the ok's,
        it encodes once)."""
        t = monotonic_ns() - self.t0_ns
        self.copy(form % (t if t > 0 else 0, *parts))

    def put_at(self, now_ns: int, form: bytes, part: Any) -> None:
        """:meth:`put` of a format with one part to put in after the time (a session's
        number; the rest, when the format has it still to fill in), at ``now_ns``: a
        :func:`time.monotonic_ns` the caller read just now, and needed itself (the clock read
        once, not twice). The hot path of a lock workload's every line: no tuple of parts
        built, no frame more (0.7k instructions less than :meth:`put`)."""
        t = now_ns - self.t0_ns
        m = self._map
        if m is not None:
            try:
                m.write(form % (t if t > 0 else 0, part))
                return
            except ValueError:  # no room left (or closed meanwhile)
                pass
        if self._fd is not None:
            self._append(form % (t if t > 0 else 0, part))

    def mapped_write(self) -> Callable[[bytes], Any]:
        """The mapping's own ``write``, for a caller that copies whole lines (their newlines
        with them) with no frame of the writer's: one call in C. It raises ValueError when the
        mapping has no room left (or the writer closed): then :meth:`copy` the same lines,
        which grows the file. (The mapping is made now, if it was not: it grows in place and
        stays the same object until the writer closes.)"""
        with self._mu:
            if self._map is None and self._fd is not None:
                self._grow(0)
        m = self._map
        return m.write if m is not None else _closed

    def copy(self, line: bytes) -> None:
        """Copy ``line`` (its newline last) into the mapping at its end: one call in C."""
        m = self._map
        if m is not None:
            try:
                m.write(line)
                return
            except ValueError:  # no room left (or closed meanwhile)
                pass
        self._append(line)

    def _append(self, line: bytes) -> None:
        """``line`` where the mapping had no room for it: under the lock, after the file has
        grown (unless another thread grew it meanwhile, or closed the writer)."""
        with self._mu:
            while self._fd is not None:
                m = self._map
                if m is not None:
                    try:
                        m.write(line)
                        return
                    except ValueError:
                        pass
                self._grow(len(line))

    def _grow(self, need: int) -> None:
        """Reserve the next stretch of the file (``posix_fallocate``: ENOSPC here, as an
        OSError, never a SIGBUS at a later copy) and map it too (the mapping grows in place,
        its position kept: a line another thread copies meanwhile is not lost)."""
        assert self._fd is not None
        m = self._map
        at = m.tell() if m is not None else self._first - self._base
        size = at + need + GROWTH
        size += -size % mmap.PAGESIZE
        os.posix_fallocate(self._fd, self._base, size)
        if m is not None:
            m.resize(size)
        else:
            m = mmap.mmap(self._fd, size, offset=self._base)
            m.seek(at)
            self._map = m

    def close(self) -> None:
        """Unmap and cut the file to its lines (what stays is plain JSON lines)."""
        with self._mu:
            if self._fd is None:
                return
            m, end = self._map, self._first
            if m is not None:
                self._lines = self.lines
                end = self._base + m.tell()
                self._map = None
                m.close()
            os.ftruncate(self._fd, end)
            os.close(self._fd)
            self._fd = None


def _closed(line: bytes) -> None:
    """The write of a writer that closed before a mapping was made: ValueError, as a closed
    mapping's."""
    raise ValueError("the journal is closed")


def encode(op: Op) -> bytes:
    """One journal line, without its newline: JSON encoded once, in C (anything orjson cannot
    encode, a lone surrogate in an error text say, falls back to json with escapes). Plain
    orjson first: its options (keys that are no strings, ``default=str``) change nothing of
    what it encodes without them, and cost as much again."""
    try:
        return _dumps(op)
    except TypeError:  # orjson.JSONEncodeError is one
        pass
    try:
        return _dumps(op, option=_OPTIONS, default=str)
    except (orjson.JSONEncodeError, TypeError):
        from harness.core.history import dumps

        return dumps(_whole(op)).encode("utf-8")


def literal(part: bytes) -> bytes:
    """``part`` as a :meth:`JournalWriter.line_format` takes it in to be written as it is
    (a value's JSON or a token's part fixed in the format): its every ``%`` doubled."""
    return part.replace(b"%", b"%%")


def token_json(token: Any) -> bytes:
    """The end of a :meth:`JournalWriter.line_format` line for an op's token: none for None
    (no key, as :meth:`JournalWriter.record` leaves it out), else the key and its JSON."""
    return b"" if token is None else b',"token":' + encode(token)


def _whole(value: Any) -> Any:
    """``value`` with every lone surrogate (an error text decoded with surrogateescape, say)
    spelled as text, ``\\udcff``: a history holds no half characters (it would be malformed)."""
    if isinstance(value, str):
        return value.encode("utf-8", "backslashreplace").decode("utf-8")
    if isinstance(value, dict):
        return {_whole(k): _whole(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_whole(v) for v in value]
    if value is None or isinstance(value, bool | int | float):
        return value
    return _whole(str(value))  # what orjson's default=str would have written


def read_lines(fh: BinaryIO, start: int = 0) -> tuple[bytes, int]:
    """The whole lines of a journal from ``start`` (an offset at which a line begins) on, and
    the offset just past them: the reading stops at the first zero byte (a killed writer's
    reserved space) and leaves out what follows the last newline (a torn line)."""
    fh.seek(start)
    data = fh.read()  # (whole: the zeros past the lines are a few MiB at most, GROWTH)
    zero = data.find(b"\0")
    if zero >= 0:
        data = data[:zero]
    end = data.rfind(b"\n") + 1
    return data[:end], start + end  # (data itself when it ends with its last line: no copy)


def read_journal(path: Path, decoder: Any = None) -> list[Op]:
    """A journal's ops. Its tail after the last newline, a line its killed writer had not
    finished and the zeros of the space it had reserved, is dropped. ``decoder``: the bulk
    decoder of the journals read before (:func:`harness.core.history_bulk.new_decoder`), which
    knows their f and lock names already: a merge reads every journal with one."""
    with path.open("rb") as fh:
        data, _ = read_lines(fh)
    if len(data) >= BULK_BYTES:
        from harness.core.history_bulk import bulk, new_decoder

        ops = bulk(data, str(path), 1, decoder or new_decoder())  # the journal as one block
        if ops is not None:
            return ops
    text = data.decode("utf-8", errors="replace")
    return parse_lines(text.split("\n")[:-1], str(path), ordered=False)


def merge_journals(paths: Iterable[Path]) -> list[Op]:
    """Merge per-process journals into one history ordered by time (stable within a journal).
    One bulk decoder reads them all: the clients' journals share their f and lock names, so
    the first teaches it the names and the others are decoded with them shared (no pass over
    their ops in Python; a third less time for the merge of a lock run, measured)."""
    from harness.core.history_bulk import new_decoder

    decoder = new_decoder()
    ops = [op for path in sorted(paths) for op in read_journal(path, decoder)]
    ops.sort(key=itemgetter("time"))  # stable: equal times stay in (journal, line) order
    # Each op made again with its index first (the key order of history.jsonl), in place: the
    # op read is freed as its successor is made, so the ops are never held twice (a list made
    # beside them held both: 481 MiB at the peak for a 558k-op run's merge, not 339 MiB).
    if any(map(dict.__contains__, ops, repeat("index"))):  # (a pass in C: none has one)
        for op in ops:
            op.pop("index", None)
    for i, op in enumerate(ops):
        ops[i] = {"index": i, **op}
    return ops
