"""Each client process's ops, for readers that look at a few short stretches of them (the
faults checker's windows): the rows of each process in the history's columns
(:func:`checker.column_pairs.as_columns`) with their times, a dict made only for an op inside
a stretch asked for (a process whose times go back: its dicts). Either way ``between`` and
``last_at`` give what a walk over the process's dicts gives.

Pure: no I/O.
"""

from __future__ import annotations

from collections.abc import Sequence
from itertools import pairwise
from typing import Any

from harness.core.history import Op

ProcessOps = Any  # list[Op] | Rows: what by_process gives for one process


class Rows:
    """One process's ops in columns: their rows in history order and their times (never
    decreasing: else the caller keeps the dicts, see :func:`by_process`)."""

    __slots__ = ("cols", "rows", "times")

    def __init__(self, cols: Any, rows: Any) -> None:
        self.cols = cols
        self.rows = rows
        self.times = cols.time[rows]

    def __len__(self) -> int:
        return len(self.rows)

    def ops(self, a: int, b: int) -> list[Op]:
        """Ops ``a`` to ``b`` (positions in this process) as dicts."""
        op = self.cols.op
        return [op(r) for r in self.rows[a:b].tolist()]

    def span(self, lo: int, hi: int) -> tuple[int, int]:
        """Positions of the ops with ``lo < time < hi``."""
        import numpy as np

        return (int(np.searchsorted(self.times, lo, "right")),
                int(np.searchsorted(self.times, hi, "left")))


def by_process(history: Sequence[Op]) -> tuple[dict[int, ProcessOps], list[Op]]:
    """Each client process (an int ``process``) with its ops (a :class:`Rows`, or its dicts
    when their times go back), and the nemesis's ops."""
    import numpy as np

    from checker.column_pairs import as_columns
    from harness.core.history import NEMESIS

    h = as_columns(history)
    cols = h.clients
    out: dict[int, ProcessOps] = {}
    if len(cols):
        order = cols.by_process()
        p = cols.process[order]
        cuts = [0, *(np.flatnonzero(p[1:] != p[:-1]) + 1).tolist(), len(order)]
        for a, b in pairwise(cuts):
            rows = order[a:b]
            proc = Rows(cols, rows)
            t = proc.times
            out[int(p[a])] = proc if bool(np.all(t[1:] >= t[:-1])) else proc.ops(0, len(rows))
    return out, [op for op in h.others if op.get("process") == NEMESIS]


def between(ops: ProcessOps, lo: int, hi: int) -> list[Op]:
    """What a walk over the ops for those that end in ``(lo, hi)`` must see: every op with
    ``lo < time < hi`` and the one before them (an invocation whose completion is inside);
    all of ``ops`` when they are dicts."""
    if not isinstance(ops, Rows):
        return ops  # type: ignore[no-any-return]
    a, b = ops.span(lo, hi)
    return ops.ops(max(0, a - 1), b) if b > a else []


def inside(ops: ProcessOps, lo: int, hi: int) -> tuple[int, Op | None]:
    """How many ops have ``lo < time < hi``, and the first of them."""
    if not isinstance(ops, Rows):
        ran = [op for op in ops if lo < op["time"] < hi]
        return len(ran), (ran[0] if ran else None)
    a, b = ops.span(lo, hi)
    return max(0, b - a), (ops.ops(a, a + 1)[0] if b > a else None)


def last_at(ops: ProcessOps, at: int) -> Op | None:
    """The op a walk stopping at the first op later than ``at`` saw last."""
    if isinstance(ops, Rows):
        import numpy as np

        k = int(np.searchsorted(ops.times, at, "right"))
        return ops.ops(k - 1, k)[0] if k else None
    last: Op | None = None
    for op in ops:
        if op["time"] > at:
            break
        last = op
    return last
