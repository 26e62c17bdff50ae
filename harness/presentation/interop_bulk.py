"""A big EDN history or Jepsen log of plain client ops read into columns
(:class:`harness.core.columns.Columns`) with no Python object kept per op, where
:mod:`harness.presentation.interop` builds a dict of each (a 1M-op EDN: minutes and gigabytes).

Every line of such a file is one op, and is one of a few texts with numbers in it: the same
keys in the same order, and one text per type, f and lock, e.g.

    {:index 7, :time 1234, :process 2, :type :invoke, :f :acquire, :value nil, :lock "lock"}
    INFO  jepsen.util - 2	:invoke	:acquire	nil

A line is known by its bytes with the digits taken out (its *shape*): a block of lines is read
by array operations when each line's shape is one the file has shown already and its digits
stand exactly where that shape's numbers go (:meth:`_Shapes.read`). A shape is learnt from a
line that has it, and only after the strict reader has read a line of that shape (made up, with
other numbers) as the op the shape says (:meth:`_Shapes.learn`): what this module reads is what
the strict reader reads, by construction, not by a second grammar kept in step.

Lines the strict reader reads no op from are left out, each looked at alone (in EDN a blank
line or a comment, in a log any line that is no op's). Anything else — a map over two lines, a
vector of maps, a nemesis op, another field, a name with a digit, a negative process, a number
with a leading zero, times that go back, a malformed history — and :func:`read_columns` says
None: the caller reads the file with :func:`harness.presentation.interop.load_any`, for its
ops or its own error, word for word.
"""

from __future__ import annotations

import os
import re

import numpy as np

from harness.core import history_file
from harness.core.columns import LOCK_ABSENT, LOCK_NULL, TYPE_CODES, Columns
from harness.core.history import HistoryError, validate_op
from harness.core.history_bulk import ColumnStore, blocks, keys_of, line_key, run_values, telling
from harness.presentation.interop import EdnReader, _log_op, _op_fields, to_op

TYPE_CHECKING = False  # see harness/core/history.py
if TYPE_CHECKING:
    from collections.abc import Callable
    from typing import Any, BinaryIO

    from harness.core.history import Op

MAX_SHAPES = 256  # distinct line shapes a file may have (types x fs x locks); more: not plain
MAX_DIGITS = 18  # a number of more digits may not fit an int64: the strict reader reads it
_DIGITS = b"0123456789"
_PROBE = (12, 3456, 789)  # numbers a made-up line of a shape is read with (distinct)
_SLOTS = ("index", "time", "process")  # the fields that are numbers
_EDN_NOTHING = re.compile(r"[ \t\r,]*(?:;[^\n]*)?")  # a line of whitespace, then a comment
_LINE_BREAKS = re.compile("[\r\x0b\x0c\x1c\x1d\x1e\x85\u2028\u2029]")  # str.splitlines's


# ---------------------------------------------------------------------------------------------
# Layouts: how a file writes its op lines


class _Edn:
    """One op map a line, the same separator between pairs as the file's first line (``, ``
    or a space), and the same fields that are numbers (``:index``, ``:time``, ``:process``,
    in digits), in the same order; ``:type`` and ``:f`` keywords or strings, ``:value`` nil,
    ``:lock`` a keyword, a string or nil, either there or not (line by line)."""

    _PAIR = re.compile(rb":([a-z]+) (\d+|:[A-Za-z*!_?<>=+.-]+|\"[A-Za-z*!_?<>=+.:/ -]*\"|nil)")
    _KEYS = frozenset({b"index", b"time", b"process", b"type", b"f", b"value", b"lock"})

    def __init__(self, first: bytes) -> None:
        self.keys: tuple[bytes, ...] = ()
        self.sep = b""
        for sep in (b", ", b" "):
            pairs = self._pairs(first, sep)
            if pairs is not None:
                self.keys, self.sep = tuple(k for k, _ in pairs), sep
                break
        keys = set(self.keys)
        if not ({b"process", b"type", b"f"} <= keys and len(keys) == len(self.keys)):
            self.keys = ()  # (not a layout: no line is read by it)
        self.slots = tuple(k.decode() for k in self.keys if k.decode() in _SLOTS)
        self.numbered = tuple(k.encode() for k in self.slots)

    def slots_for(self, k: int) -> tuple[str, ...]:
        """The fields of a line's ``k`` numbers, in order (the file's: split has checked)."""
        return self.slots

    def _pairs(self, line: bytes, sep: bytes) -> list[tuple[bytes, bytes]] | None:
        if not (line.startswith(b"{") and line.endswith(b"}")):
            return None
        pairs = self._PAIR.findall(line, 1, len(line) - 1)
        if b"{" + sep.join(b":%s %s" % p for p in pairs) + b"}" != line:
            return None
        return pairs if all(k in self._KEYS for k, _ in pairs) else None

    def split(self, line: bytes) -> tuple[list[bytes], dict[str, Any]] | None:
        """The line's text around its numbers (one part more than numbers), and its other
        fields as they would be read; None when the line is not of the layout."""
        pairs = self._pairs(line, self.sep) if self.keys else None
        if pairs is None or tuple(k for k, _ in pairs if k.decode() in _SLOTS) != self.numbered:
            return None  # (other keys may differ from line to line: a lock nil, absent, ...)
        parts, text, fields = [], b"{", {}
        for i, (key, value) in enumerate(pairs):
            name = key.decode()
            text += (self.sep if i else b"") + b":" + key + b" "
            if name in _SLOTS:
                if not value.isdigit():
                    return None
                parts.append(text)
                text = b""
                continue
            if value[:1].isdigit():
                return None
            text += value
            fields[name] = None if value == b"nil" else value[1:].rstrip(b'"').decode()
        parts.append(text + b"}")
        return parts, fields

    @staticmethod
    def skipped(line: bytes) -> bool:
        """Whether the strict reader reads nothing from this line, whatever the lines around
        it (those read are whole maps): blanks and commas, then perhaps a comment."""
        try:
            return _EDN_NOTHING.fullmatch(line.decode("utf-8")) is not None
        except UnicodeDecodeError:
            return False

    @staticmethod
    def strict(line: str, position: int) -> Op:
        """The op the strict reader reads from this line at this position of the file (its
        own functions, as :func:`harness.presentation.interop.parse_edn_history` calls them;
        no well-formedness: that is the whole history's)."""
        reader = EdnReader(line, "probe")
        forms = list(reader.forms())
        if len(forms) != 1:
            raise HistoryError("probe: not one form")
        op = to_op(forms[0][1], "probe")
        for field in ("index", "time"):  # (a file none of whose ops has it, as finish_ops)
            op.setdefault(field, position)
        return validate_op(op, "probe")


class _Log:
    """A Jepsen log's op lines (``INFO  jepsen.util - 2\\t:invoke\\t:acquire\\tnil``, with a
    time stamp and a thread's name before, or a ``history.txt`` without the prefix): the
    process in digits, type and f keywords, value nil; no time (its position stands in its
    place), no lock. The numbers before the process (a time stamp, a worker's) are numbers of
    the shape that are read by no one (slot ``_``): as many on every op line as on the file's
    first."""

    _LINE = re.compile(rb"([\t\x20-\x7e]*?)(\d+)((?:\t|[ ]+):([A-Za-z][A-Za-z_-]*)"
                       rb"(?:\t|[ ]+):([A-Za-z][A-Za-z_-]*)(?:\t|[ ]+)nil)")
    _RUN = re.compile(rb"\d+")

    def __init__(self) -> None:
        self.slots: tuple[str, ...] = ()  # (known from the first shape learnt)

    @staticmethod
    def slots_for(k: int) -> tuple[str, ...]:
        return ("_",) * (k - 1) + ("process",)

    def split(self, line: bytes) -> tuple[list[bytes], dict[str, Any]] | None:
        m = self._LINE.fullmatch(line)
        if m is None:
            return None
        parts = self._RUN.split(m[1])  # (the prefix around its numbers)
        if self.slots and len(parts) != len(self.slots):
            return None
        return [*parts, m[3]], {"type": m[4].decode(), "f": m[5].decode(), "value": None}

    @staticmethod
    def skipped(line: bytes) -> bool:
        """Whether :func:`harness.presentation.interop.parse_jepsen_log` skips this line (one
        line to it too: none of the other line breaks ``str.splitlines`` splits at)."""
        try:
            text = line.decode("utf-8")
        except UnicodeDecodeError:
            return False
        return not _LINE_BREAKS.search(text) and _op_fields(text) is None

    @staticmethod
    def strict(line: str, position: int) -> Op:
        """As :func:`harness.presentation.interop.parse_jepsen_log` reads this line."""
        payload = _op_fields(line)
        if payload is None:
            raise HistoryError("probe: not an op line")
        op = _log_op(payload, "probe", position)
        op["time"] = position
        return validate_op(op, "probe")


# ---------------------------------------------------------------------------------------------
# Shapes: the texts a file's lines have, digits aside


class _Shapes:
    """The shapes a file's lines have shown, each with where its numbers go and its codes of
    type, f and lock; and the reading of a block of lines of known shapes."""

    def __init__(self, layout: Any) -> None:
        self.layout = layout
        self.k = len(layout.slots) or None  # (a log's: known from the first shape learnt)
        self.named = np.array([x != "_" for x in layout.slots], bool)  # the numbers kept
        self.codes: dict[bytes, int] = {}  # shape -> its number
        self.offsets: list[list[int]] = []  # where each shape's numbers go, digits aside
        self.fields: list[tuple[int, int, int, bool]] = []  # type, f, lock codes; has value
        self.fs: dict[str, int] = {}
        self.locks: dict[Any, int] = {}  # lock names -> codes from 2 (0: absent, 1: null)
        self.told: tuple[int, ...] | None = None  # see tell()
        self._scratch = [np.empty(0, np.uint8)] * 3

    def learn(self, line: bytes, position: int) -> bool:
        """Learn the shape of ``line`` (the file's op at ``position``); False when the line is
        not a plain op of the layout, or the strict reader reads its shape otherwise."""
        got = self.layout.split(line)
        if got is None or len(self.codes) >= MAX_SHAPES:
            return False
        parts, fields = got
        if fields.get("value") is not None or type(fields.get("lock")) not in (str, type(None)):
            return False  # (columns hold a value of nil, a lock named or nil, nothing else)
        shape = b"".join(parts)
        if shape in self.codes:  # (its numbers were not where they go: a leading zero, ...)
            return False
        k = len(parts) - 1
        slots = self.layout.slots_for(k)
        if (self.k is not None and k != self.k) or len(slots) != k:
            return False
        numbers = [_PROBE[j % len(_PROBE)] for j in range(k)]
        probe = parts[0] + b"".join(b"%d%s" % (n, p)
                                    for n, p in zip(numbers, parts[1:], strict=True))
        want: dict[str, Any] = {"index": position, "time": position}
        want.update((s, v) for s, v in zip(slots, numbers, strict=True) if s != "_")
        want.update(fields)
        try:
            got_op = self.layout.strict(probe.decode("ascii"), position)
        except (HistoryError, UnicodeDecodeError):
            return False
        if got_op != want or any(type(got_op[k]) is not type(want[k]) for k in want):
            return False  # (a name read otherwise, an index not kept, a field more ...)
        lock = want.get("lock", LOCK_ABSENT)
        lock_code = (LOCK_ABSENT if "lock" not in want else LOCK_NULL if lock is None
                     else self.locks.setdefault(lock, len(self.locks) + 2))
        f_code = self.fs.setdefault(want["f"], len(self.fs))
        if self.k is None:
            self.k, self.layout.slots = k, slots
            self.named = np.array([x != "_" for x in slots])
        self.codes[shape] = len(self.offsets)
        offsets, at = [], 0
        for p in parts[:-1]:
            at += len(p)
            offsets.append(at)
        self.offsets.append(offsets)
        self.fields.append((TYPE_CODES[want["type"]], f_code, lock_code, "value" in want))
        return True

    def sift(self, block: bytes, n: int, at: int) -> tuple[bytes, int] | None:
        """The block's ``n`` lines (its first op the file's ``at``-th) with the shapes they
        show learnt, and the lines the strict reader reads no op from (a comment, a blank
        line, a log line that is no op's) left out, each looked at alone; None when a line is
        neither (a line not plain: the file is then the strict reader's). Python a line: for
        a block the array reading could not read (the file's first, a new name, ...)."""
        lines = block.split(b"\n")[:n]
        shapes = block.translate(None, _DIGITS).split(b"\n")[:n]
        known, tried = self.codes, {}
        keep: list[bytes] = []
        for line, shape in zip(lines, shapes, strict=True):
            if shape not in known:
                if shape not in tried:
                    tried[shape] = self.learn(line, at + len(keep))
                if not tried[shape]:
                    if self.layout.skipped(line):
                        continue
                    return None
            keep.append(line)
        if tried:
            self.tell()
        return (block if len(keep) == n else b"".join(x + b"\n" for x in keep)), len(keep)

    def tell(self) -> None:
        """Make ready to tell the known shapes apart by their length and a few bytes
        (:meth:`which`): the offsets that tell most apart, in turn, up to three."""
        shapes = list(self.codes)
        offsets = telling(shapes) if shapes else None
        self.told = offsets
        if offsets is None:
            return
        keys = np.array([line_key(x, offsets) for x in shapes], np.int64)
        self.key_order = np.argsort(keys)
        self.keys = keys[self.key_order]
        self.shape_list = shapes
        self.offset_rows = np.array(self.offsets, np.int64).reshape(-1, self.k)
        self.field_rows = np.array(self.fields, np.int64).reshape(-1, 4)

    def which(self, skeleton: bytes, n: int) -> tuple[np.ndarray, np.ndarray] | None:
        """Each of the ``n`` lines' shape number, and where each line begins in
        ``skeleton`` (the block's bytes that are not digits); None when a line is of no known
        shape. A line is told by its length and its bytes at a few offsets, and the lines
        told are then compared with the skeleton whole: what is told is only a guess, what is
        compared is exact."""
        if self.told is None:
            return None
        sk = np.frombuffer(skeleton, np.uint8)
        ends = np.flatnonzero(sk == 10)
        if len(ends) != n or ends[-1] != len(sk) - 1:
            return None
        begins = np.empty(n, np.int64)
        begins[0] = 0
        begins[1:] = ends[:-1] + 1
        key = keys_of(sk, begins, ends - begins, self.told)
        at = np.minimum(np.searchsorted(self.keys, key), len(self.keys) - 1)
        if not bool(np.all(self.keys[at] == key)):
            return None
        which = self.key_order[at]
        told = b"\n".join(map(self.shape_list.__getitem__, which.tolist())) + b"\n"
        return (which, begins) if told == skeleton else None

    def read(self, block: bytes, n: int) -> tuple[np.ndarray, tuple[np.ndarray, ...]] | None:
        """Each of the block's ``n`` lines' shape number (``n`` newlines, the last its last
        byte), and its numbers, one column per slot, when each line is exactly a known shape
        with a run of at most 18 digits, no leading zero, where each of its numbers goes;
        else None.

        The block's runs of digits are taken k to a line, in order. Each run's place among
        the block's bytes that are not digits (its start less the digits before it) must be
        its line's place there plus where its shape puts that number: then the skeleton (the
        known shapes, line after line, compared whole) with each run put back at its place
        is the block, every byte of it."""
        k = self.k
        if k is None:
            return None
        size = len(block)
        buf = np.frombuffer(block, np.uint8)
        scratch = self.scratch(size)
        digit = scratch[1]
        digit[0] = False
        np.less(np.subtract(buf, 48, out=scratch[0][:size]), 10, out=digit[1:size + 1])
        turns = np.flatnonzero(np.not_equal(digit[1:size + 1], digit[:size],
                                            out=scratch[2][:size]))
        if not n or len(turns) != 2 * k * n:
            return None
        starts = turns[0::2]
        length = turns[1::2] - starts
        if int(length.max()) > MAX_DIGITS or bool(np.any(
                ((length > 1) & (buf[starts] == 48)).reshape(n, k) & self.named)):
            return None  # (a leading zero: in a number read; a time stamp's is nobody's)
        skeleton = block.translate(None, _DIGITS)
        told = self.which(skeleton, n)
        del skeleton
        if told is None:
            return None
        which, begins = told
        before = np.empty(n * k, np.int64)  # the digits before each run
        before[0] = 0
        np.cumsum(length[:-1], out=before[1:])
        place = (starts - before).reshape(n, k)
        if not np.array_equal(place, begins[:, None] + self.offset_rows[which]):
            return None
        starts, length = starts.reshape(n, k), length.reshape(n, k)
        ends = starts + length
        return which, tuple(run_values(buf, ends[:, j], length[:, j]) if self.named[j]
                            else None for j in range(k))

    def scratch(self, size: int) -> list[np.ndarray]:
        """Byte arrays of at least ``size`` bytes kept from block to block (fresh ones each
        time cost a page fault every 4 KiB)."""
        if len(self._scratch[0]) < size:
            self._scratch = [np.empty(size, np.uint8), np.empty(size + 1, bool),
                             np.empty(size, bool)]
        return self._scratch


# ---------------------------------------------------------------------------------------------
# The file


def read_columns(path: str | os.PathLike[str],
                 progress: Callable[[int], None] | None = None,
                 smallest: int | None = None) -> Columns | None:
    """A big EDN history (``.edn``) or Jepsen log (``.log``, ``.txt``) of plain client ops,
    well-formed, in columns; None for a small file, another extension, or any file this
    module does not read whole (see the module's docstring): the caller then reads it with
    :func:`harness.presentation.interop.load_any`. ``progress`` and ``smallest`` as
    :func:`harness.core.history_file.read_columns` (which opens the file) takes them."""
    ext = os.path.splitext(os.fspath(path))[1].lower()
    if ext not in (".edn", ".log", ".txt"):
        return None
    return history_file.read_columns(path, progress, smallest,
                                     lambda fh, progress: _read(fh, ext == ".edn", progress))


def _read(fh: BinaryIO, edn: bool, progress: Callable[[int], None] | None) -> Columns | None:
    shapes: _Shapes | None = None
    store = ColumnStore.of(fh)
    at = 0  # ops read so far
    for block in blocks(fh):  # (the byte order mark left out)
        if not block.endswith(b"\n"):
            block += b"\n"  # the file's last line, with no newline after it
        if shapes is None:
            first = next((x for x in block.split(b"\n", 64) if not _Edn.skipped(x)), b"")
            shapes = _Shapes(_Edn(first) if edn else _Log())
            if edn and not shapes.k:  # (a first line of no layout: a vector, ...)
                return None
        n = len(block) - len(block.replace(b"\n", b""))  # (sooner than bytes.count)
        got = shapes.read(block, n)
        if got is None:  # a shape not known yet, a line to skip (or not plain: then no more)
            sifted = shapes.sift(block, n, at)
            if sifted is None:
                return None
            block, n = sifted
            got = shapes.read(block, n) if n else None
            if got is None:
                if n:
                    return None
                continue  # (no op in the block)
        which, numbers = got
        store.put(at, n, len(block), _columns(shapes, which, numbers, at, n))
        at += n
        if progress is not None:
            progress(fh.tell())
    if shapes is None:
        return None
    timed = "time" in shapes.layout.slots
    return store.history(at, list(shapes.fs), list(shapes.locks),
                         Columns if timed else PositionColumns)


class PositionColumns(Columns):
    """The columns of a file that has no times: each op's time is its position among the
    file's ops, as :class:`harness.presentation.interop.Positions`."""

    __slots__ = ()
    positions = True


def _columns(shapes: _Shapes, which: np.ndarray, numbers: tuple[np.ndarray, ...], at: int,
             n: int) -> tuple[Any, ...]:
    """A block's columns: index, time, process, type, f, lock, value."""
    got = {s: v for s, v in zip(shapes.layout.slots, numbers, strict=True) if s != "_"}
    position = np.arange(at, at + n, dtype=np.int64)
    fields = shapes.field_rows[which]
    return (got.get("index", position), got.get("time", position),
            got["process"], fields[:, 0], fields[:, 1], fields[:, 2], fields[:, 3])
