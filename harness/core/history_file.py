"""A history file read from disk: its lines bounded (one huge line never has to fit in memory
whole), parsed (:func:`harness.core.history.parse_lines`), and held to the well-formedness rules
(:mod:`harness.core.wellformed`) before anything reads it; an error names the file and line.

A big file of plain client ops can be read into columns instead (:func:`read_columns`:
:mod:`harness.core.columns`, a few bytes an op where a dict is about 330), which the lock
checkers read as they are (``harness check``); any other file is read as ops, as always."""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator
from itertools import repeat

from harness.core.heap import collector_paused
from harness.core.history import MAX_LINE, HistoryError, Op, parse_lines
from harness.core.wellformed import require

TYPE_CHECKING = False  # `typing` for type checkers only, as in harness.core.history
if TYPE_CHECKING:
    from typing import Any

_BOM = b"\xef\xbb\xbf"
PROGRESS_LINES = 1 << 16  # lines between two calls of a reader's progress callback
# From this size on a file is read in blocks, decoded in C (harness.core.history_bulk); a
# smaller one line by line, which spares a short `harness check` the decoder's import (~40 ms).
BULK_BYTES = 4 << 20


def _bounded_lines(fh: Any, progress: Callable[[int], None] | None = None
                   ) -> Iterator[bytes]:
    """The file's lines, as bytes (orjson reads UTF-8 itself); a line longer than MAX_LINE is
    cut there (and then refused), so one huge line never has to fit in memory whole.
    ``progress`` is told the bytes read so far every :data:`PROGRESS_LINES` lines."""
    count = 0
    while True:
        line = fh.readline(MAX_LINE + 1)
        if not line:
            return
        if count == 0 and line.startswith(_BOM):
            line = line[len(_BOM):]  # a byte order mark some editors write: not part of a line
        yield line
        if len(line) > MAX_LINE and not line.endswith(b"\n"):
            return
        count += 1
        if progress is not None and count % PROGRESS_LINES == 0:
            progress(fh.tell())


def read_history(path: str | os.PathLike[str], progress: Callable[[int], None] | None = None
                 ) -> list[Op]:
    """Read ``history.jsonl``. Raises HistoryError naming the line that is wrong.
    ``progress``: told the bytes read so far, now and then (a large file takes seconds)."""
    p = os.fspath(path)
    try:
        with open(p, "rb") as fh, collector_paused():  # millions of dicts, no cycles among them
            if os.fstat(fh.fileno()).st_size >= BULK_BYTES:
                from harness.core.history_bulk import read_blocks

                ops = read_blocks(fh, str(p), progress)
            else:
                ops = parse_lines(_bounded_lines(fh, progress), str(p))
    except IsADirectoryError:
        raise HistoryError(f"{p}: is a directory, not a history file") from None
    except OSError as e:
        raise HistoryError(f"{p}: cannot read ({e.strerror})") from None
    except UnicodeDecodeError:
        raise HistoryError(f"{p}: not UTF-8 text; is this a history.jsonl?") from None
    if not all(map(dict.__contains__, ops, repeat("index"))):  # (a pass in C: they usually do)
        for i, op in enumerate(ops):
            op.setdefault("index", i)
    require(ops, lambda i: f"{p} line {_line_of(p, i)}", ordered=True)  # parse_lines saw times
    return ops


def _line_of(path: str, position: int) -> int:
    """The line of a JSONL file that holds its ``position``-th op (blank lines hold none);
    read again only to name the line of an error."""
    with open(path, "rb") as fh:
        seen = -1
        for lineno, line in enumerate(fh, 1):
            if (line[len(_BOM):] if lineno == 1 and line.startswith(_BOM) else line).strip():
                seen += 1
                if seen == position:
                    return lineno
    return position + 1


def read_columns(path: str | os.PathLike[str], progress: Callable[[int], None] | None = None,
                 smallest: int | None = None, read: Callable[..., Any] | None = None) -> Any:
    """A big ``history.jsonl`` of plain client ops, well-formed, as
    :class:`harness.core.columns.Columns` (a few bytes an op, where :func:`read_history` makes
    a dict of each); None for a small file, one with any other op, or anything
    :func:`read_history` would refuse or read otherwise: read it with that, for its ops or its
    error. ``smallest``: the size from which a file is read in columns (a test's: any; else
    :data:`BULK_BYTES`: a smaller one is read sooner than numpy is imported). ``read``: what
    reads the open file (and ``progress``) into columns or None, for another format
    (:mod:`harness.presentation.interop_bulk`); JSON lines' by default."""
    p = os.fspath(path)
    try:
        with open(p, "rb") as fh:
            if os.fstat(fh.fileno()).st_size < (BULK_BYTES if smallest is None else smallest):
                return None
            from harness.core.columns import well_formed

            if read is None:
                from harness.core.history_bulk import read_columns as read
            cols = read(fh, progress)
    except OSError:
        return None
    return cols if cols is not None and well_formed(cols) else None
