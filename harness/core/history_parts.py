"""The few parts of a history that readers after the checks need beside its client ops: the
nemesis's ops and the last time. On a :class:`harness.core.run_history.ColumnHistory` they
come from its ``others`` and its time column (the nemesis's ops are never columns: their
process is no int), without making a dict of each client op; on a list of dicts, from a pass
over it, as before. Either way the same ops in the same order, the same time.

Pure: no I/O.
"""

from __future__ import annotations

from collections.abc import Sequence

from harness.core.history import NEMESIS, Op


def column_history(history: Sequence[Op]) -> object | None:
    """``history`` when it is a ColumnHistory, else None (numpy is imported only for one)."""
    if type(history).__name__ != "ColumnHistory":
        return None
    from harness.core.run_history import ColumnHistory

    return history if isinstance(history, ColumnHistory) else None


def nemesis_ops(history: Sequence[Op]) -> list[Op]:
    """The nemesis's ops, in history order."""
    h = column_history(history)
    ops = h.others if h is not None else history  # type: ignore[attr-defined]
    return [op for op in ops if op.get("process") == NEMESIS]


def last_time(history: Sequence[Op]) -> int:
    """``max(op["time"] for op in history)``, 0 for an empty history."""
    h = column_history(history)
    if h is None:
        return max((op["time"] for op in history), default=0)
    times = [op["time"] for op in h.others]  # type: ignore[attr-defined]
    clients = h.clients  # type: ignore[attr-defined]
    if len(clients):
        times.append(clients.time.max().item())
    return max(times, default=0)
