"""The run-level rules of :mod:`harness.controller.checking` on a history held in columns
(:class:`harness.core.run_history.ColumnHistory`): well-formedness, and whether the run
tested the lock, by array operations over the columns and op by op over the few others.

Imported only for a history in columns (numpy).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from checker.column_pairs import ColumnPairs, values
from harness.core.columns import TYPE_CODES, Columns, well_formed
from harness.core.history import INFO, INVOKE, OK
from harness.core.run_history import ColumnHistory
from harness.core.wellformed import crashed_clients, problem


def columns_well_formed(h: ColumnHistory, ordered: bool) -> bool:
    """Whether :func:`harness.core.wellformed.problem` finds nothing in ``h`` (False: the
    caller asks it, for its words). The others alone (their processes have no op in the
    columns), the columns by arrays: alternation, f and lock (:func:`harness.core.columns.
    well_formed`), times per process (unless ``ordered``), no op after its process's crash;
    indexes are places (unique) in a ColumnHistory."""
    try:
        if problem(h.others, ordered=ordered) is not None:
            return False
        cols = h.clients
        if not well_formed(cols):
            return False
        if not ordered and len(cols) > 1:
            order = cols.by_process()
            p, t = cols.process[order], cols.time[order]
            if bool(np.any((p[1:] == p[:-1]) & (t[1:] < t[:-1]))):
                return False
        dead: dict[int, int] = {}
        for op in h.others:
            if type(op.get("process")) is int:
                continue
            detail = op.get("detail")
            if type(detail) is dict and detail.get("crashed") is True and op["type"] != INVOKE:
                for c in crashed_clients(op):
                    dead.setdefault(c, int(op["index"]))
        for c, at in dead.items():
            if bool(np.any((cols.process == c) & (cols.index > at))):
                return False
    except Exception:
        return False
    return True


def completions(paired: ColumnPairs, failed_words: Callable[[Any], bool]
                ) -> tuple[bool, dict[int, int]]:
    """:func:`harness.controller.checking._completions` of the column pairs: whether some
    acquire succeeded, and each client whose every completion failed, with how many."""
    cols = paired.cols
    done = paired.done[paired.done >= 0]
    acquired = "acquire" in cols.fs and bool(np.any(
        (cols.type[done] == TYPE_CODES[OK]) & (cols.f[done] == cols.fs.index("acquire"))))
    bad = _failed(cols, done, failed_words)
    procs, inverse = np.unique(cols.process[done], return_inverse=True)
    worked = np.bincount(inverse, weights=~bad, minlength=len(procs))
    fails = np.bincount(inverse, weights=bad, minlength=len(procs))
    keep = worked == 0
    return acquired, dict(zip(procs[keep].tolist(), fails[keep].astype(int).tolist(),
                              strict=True))


def _failed(cols: Columns, rows: np.ndarray, failed_words: Callable[[Any], bool]
            ) -> np.ndarray:
    """Per completion at ``rows``, whether it is a failed request: ``info`` with an error
    that is no timeout."""
    out = np.zeros(len(rows), dtype=bool)
    info = np.flatnonzero(cols.type[rows] == TYPE_CODES[INFO])
    if len(info):
        errors = values(cols, "error", rows[info], None)
        out[info] = [failed_words(e) for e in errors]
    return out
