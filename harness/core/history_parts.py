"""The few parts of a history that readers after the checks need beside its client ops: the
nemesis's ops and the last time. On a :class:`harness.core.run_history.ColumnHistory` they
come from its ``others`` and its time column (the nemesis's ops are never columns: their
process is no int), without making a dict of each client op; on a list of dicts, from a pass
over it, as before. Either way the same ops in the same order, the same time.

Pure: no I/O.
"""

from __future__ import annotations

import sys
from collections.abc import Sequence

from harness.core.history import NEMESIS, Op


def is_columns(history: object) -> bool:
    """Is ``history`` a :class:`harness.core.run_history.ColumnHistory`? (Told without
    importing numpy: no history is one unless that module was imported.)"""
    module = sys.modules.get("harness.core.run_history")
    return module is not None and isinstance(history, module.ColumnHistory)


def nemesis_ops(history: Sequence[Op]) -> list[Op]:
    """The nemesis's ops, in history order."""
    ops = history.others if is_columns(history) else history  # type: ignore[attr-defined]
    return [op for op in ops if op.get("process") == NEMESIS]


def last_time(history: Sequence[Op]) -> int:
    """``max(op["time"] for op in history)``, 0 for an empty history."""
    if is_columns(history):
        return history.horizon()  # type: ignore[attr-defined, no-any-return]
    return max((op["time"] for op in history), default=0)
