"""A run's journals merged into a :class:`harness.core.run_history.ColumnHistory`, a journal at
a time: what :func:`harness.core.run_history.merged_columns` makes of
:func:`harness.core.journal.merge_journals`, op for op, without ever holding every op as a dict.

Why a journal at a time: the dict merge holds one dict an op (~560 B) for the whole run, and
its columns would be built from those. Here each client's journal is read into columns by its
lines' layouts (:func:`harness.core.journal_layouts.read_columns`, no object a line), any other
journal decoded by the merge's own reader and put in columns when its ops fit, else kept as
dicts (the nemesis's, the final read's): the peak is the columns plus one journal. Then the
journals' columns are joined in history order (their codes of names, strings and layouts made
one) and numbered.

Pure but for reading the journals.
"""

from __future__ import annotations

from collections.abc import Iterable
from itertools import repeat
from operator import itemgetter
from pathlib import Path
from typing import Any

import numpy as np

from harness.core.columns import LOCK_NULL, Columns
from harness.core.history import Op
from harness.core.journal import merge_journals, read_journal, read_lines
from harness.core.journal_layouts import flat, read_columns, same_kinds
from harness.core.run_history import (
    STR,
    ColumnHistory,
    RunColumns,
    Shape,
    columns_of,
    merged_columns,
)

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
    parts: list[RunColumns] = []  # the journals' in columns
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
    joined = _joined(parts)
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
    joined = _reordered(joined, row[order[cols_at]])
    joined.index = cols_at.astype(np.int64)
    del row, cols_at
    other_at = np.flatnonzero(~is_col)
    other_row = (np.cumsum(~held) - 1)[order[other_at]]  # each one's place in others
    placed = [{"index": at, **others[k]}
              for at, k in zip(other_at.tolist(), other_row.tolist(), strict=True)]
    return ColumnHistory(joined, placed)


def _joined(parts: list[RunColumns]) -> RunColumns | None:
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
    base = Columns(_taken_from(parts, "time"), _taken_from(parts, "process"),
                   _taken_from(parts, "type"), _concatenated(f_parts), list(fs),
                   _concatenated(lock_parts), [None, None, *locks],
                   np.zeros(n, dtype=np.int64), np.zeros(n, dtype=bool))
    return RunColumns(base, _concatenated(shape_parts), list(shapes), fields, list(strings))


def _concatenated(arrays: list[np.ndarray]) -> np.ndarray:
    """The arrays one after another, the list emptied (each part freed once joined)."""
    out = np.concatenate(arrays)
    arrays.clear()
    return out


def _taken_from(parts: list[RunColumns], name: str) -> np.ndarray:
    """The parts' column ``name`` joined, each part's let go."""
    arrays = [getattr(cols, name) for cols in parts]
    for cols in parts:
        setattr(cols, name, None)
    return _concatenated(arrays)


def _reordered(cols: RunColumns, take: np.ndarray) -> RunColumns:
    """``cols``'s rows ``take``, in that order (each column replaced in turn: one column held
    twice at a time)."""
    for name in ("time", "process", "type", "f", "lock", "has_value", "shape"):
        setattr(cols, name, getattr(cols, name)[take])
    for name in list(cols.fields):
        cols.fields[name] = cols.fields[name][take]
    return cols
