"""Linearizability checking, P-compositional: lock histories by the order of their critical
sections, anything else (and what that cannot decide) by the Wing & Gong search.

``check(history, model)`` decides whether the ops of a history can be put in one sequential
order that (1) respects real time: an op that completed before another was invoked comes
first, and (2) the model accepts (``checker.models``). It returns a dict, with a witness that a
person can read when the answer is no.

How, module by module:

- :mod:`checker.calls` pairs each invocation with its outcome (ok, a failure the model counts
  as an event, or unknown: ``info`` or never completed) and splits the history by lock (the
  op's ``lock`` field, else ``key``): a history is linearizable iff every part is
  (P-compositionality), and small parts are far cheaper. ``fail`` ops certainly did not happen
  and are left out; so are ops the model does not describe (writes, for a lock).
- :mod:`checker.lockorder` decides a part of a ``mutex`` or ``fenced-mutex`` history in
  O(n log n): each process's own order says when it held the lock, and the question is whether
  those critical sections can be put in one order. A valid verdict is certified by replaying
  the order through the model; where its premise does not hold (see there) the part goes to
- :mod:`checker.wgl`, the Wing & Gong search with Lowe's cache (as in Knossos and Porcupine),
  for every model, indeterminate ops never forced;
- :mod:`checker.witness` says why a part is not linearizable: the longest linearizable prefix
  found, the op that cannot follow it, the ops concurrent with it, in the model's words.

``result["methods"]`` counts the parts each way decided (``sections``, ``search``).

Pure: no I/O; the only clock is ``time.monotonic``, read for the time budget.
"""

from __future__ import annotations

import operator
import sys
from collections.abc import Sequence
from itertools import compress, repeat

from checker import lockorder
from checker.base import Checker
from checker.calls import Call, CallRows, Paired, Prepared, prepare
from checker.lives import crash_of
from checker.models import Model, get_model, mutex_step
from checker.wgl import INVALID, UNKNOWN, VALID, Budget, Part, PartResult
from checker.witness import jsonable
from harness.core.heap import gc_paused
from harness.core.history import NEMESIS, Op
from harness.core.history_parts import is_columns

TYPE_CHECKING = False  # see harness/core/history.py
if TYPE_CHECKING:
    from typing import Any


@gc_paused
def check(history: Sequence[Op], model: str | Model = "mutex", *,
          time_limit: float | None = None, max_states: int | None = None) -> dict[str, Any]:
    """Is ``history`` linearizable with respect to ``model``? A pure function.

    ``time_limit`` (seconds) and ``max_states`` (cache entries over all parts) bound the work:
    when either runs out the answer is ``"unknown"`` (unless a part was already found invalid:
    false wins over unknown). Returns ``{"valid": True|False|"unknown", "model", "parts",
    "ops", "indeterminate", "failed", "ignored", "states", ...}`` and, when invalid,
    ``"witness"`` for the smallest failing part (see :func:`checker.witness.make_witness`) and
    ``"invalid_parts"``; when unknown, ``"reason"`` and ``"unknown_parts"``.

    A history in columns is checked as arrays: a file's plain ops (:func:`_paired`), a run's
    merged history (:func:`_paired_run_columns`), and a big history of dicts, made at the
    entry the columns a run's merge gives (:func:`_as_columns`); a part the arrays do not
    decide as the calls of its rows made objects of its ops' dicts (the calls
    :func:`checker.calls.prepare` makes of the dicts: no dict made of any other op).
    """
    m = get_model(model)
    paired = (_paired(history, m) or _paired_run_columns(history, m)
              or _paired_run_columns(_as_columns(history, m), m))
    return _check(history, m, time_limit, max_states, paired)


def _check(history: Sequence[Op], m: Model, time_limit: float | None, max_states: int | None,
           paired: Paired | None) -> dict[str, Any]:
    """:func:`check`, the calls of ``paired`` when given."""
    if paired is not None:  # a history in columns: each part's calls are rows of arrays
        prepared = Prepared(parts=paired.parts())
        prepared.failed, prepared.ignored = paired.failed, paired.ignored
        crashes = getattr(paired, "crashes", None)
        if crashes:  # the parts of crashed processes: objects, with a release at each crash
            _crashed_parts(paired, prepared.parts, crashes)
    else:
        prepared = prepare(history, m)
    budget = Budget(time_limit, max_states)
    parts = sorted(prepared.parts.items(), key=lambda kv: (len(kv[1]), repr(kv[0])))
    results: list[PartResult] = []
    fast = lockorder.applies(m)
    if paired is not None:  # (numpy: imported only for a history held in arrays)
        from checker.lockorder_rows import check_rows
    for key, calls in parts:
        if budget.reason is not None:
            results.append(PartResult(UNKNOWN, key, CallRows(paired, calls)
                                      if paired and not isinstance(calls, list) else calls, 0))
            continue
        if paired is not None and isinstance(calls, list):
            pass  # (a part made objects already: a crashed process's)
        elif paired is not None:
            result = check_rows(key, paired, calls, m, budget) if fast else None
            if result is not None:
                results.append(result)
                continue
            calls = paired.calls(calls)  # as objects, checked as any other part's
        result = lockorder.check_part(key, calls, m, budget) if fast else None
        results.append(result if result is not None else Part(key, calls, m).search(budget))
    return _summarize(m, prepared, results, budget)


def _crashed_parts(paired: Paired, parts: dict[Any, Any], crashes: dict[Any, int]) -> None:
    """The parts in which a crashed process took part, made calls (objects), each ended by
    a release of unknown outcome at the crash, as :func:`checker.calls.prepare` ends them
    (its :func:`checker.calls._release_at_crashes`, numbered across the parts in their
    order, after every call)."""
    import numpy as np

    from checker.calls import _release_at_crashes

    who = np.array(sorted(p for p in crashes if type(p) is int), dtype=np.int64)
    made = {key: paired.calls(rows) for key, rows in parts.items()
            if bool(np.isin(paired.process[rows], who).any())}
    if made:
        _release_at_crashes(made, crashes, len(paired.cols))
        parts.update(made)


def _paired(history: Any, model: Model) -> Paired | None:
    """A history in columns (:class:`harness.core.columns.Columns`) paired as arrays."""
    columns = sys.modules.get("harness.core.columns")  # not imported: no history is in columns
    if columns is None or not isinstance(history, columns.Columns):
        return None
    return Paired(history, model)


ROWS_FROM = 5000  # ops: a history of dicts this long is checked in columns


def _as_columns(history: Sequence[Op], model: Model) -> Any:
    """A big history of dicts (``ROWS_FROM`` ops or more, each op's ``index`` its place) as
    the columns a run's merge gives (:func:`harness.core.run_history.merged_columns`: the
    client ops whose every field fits, the others dicts), for the ``mutex`` model
    (:func:`_paired_run_columns`); else None."""
    if model.step is not mutex_step or len(history) < ROWS_FROM or is_columns(history):
        return None
    try:
        if list(map(dict.get, history, repeat("index"))) != list(range(len(history))):
            return None
        processes = list(map(dict.get, history, repeat("process")))
    except TypeError:  # not dicts
        return None
    from harness.core.run_history import ColumnHistory, columns_of, merged_columns

    client, others = history, []
    if set(map(type, processes)) != {int}:
        client = list(compress(history, map(int.__instancecheck__, processes)))
        others = [history[i] for i, p in enumerate(processes) if type(p) is not int]
    cols = _plain(client, others) or columns_of(client)
    if cols is None:  # (some process's ops do not fit: those stay dicts)
        return merged_columns(history)
    return ColumnHistory(cols, others)


_PLAIN = frozenset(("index", "time", "process", "type", "f", "value", "lock"))


def _plain(ops: Sequence[Op], others: list[Op]) -> Any:
    """Client ops of the plain shape (a lock client's, ``value`` null or not there: the
    benchmark's and a Jepsen lock history's; ``others``: the history's other ops) in the
    columns of plain ops a file's are (their layouts made of ``has_value`` and ``lock``,
    :data:`harness.core.columns.PLAIN_SHAPES`): a few passes in C,
    much sooner than :func:`~harness.core.run_history.columns_of`, which groups ops by
    layout; else None."""
    import numpy as np

    from harness.core.columns import from_ops

    keys = set().union(*map(dict.keys, ops))
    if not _PLAIN.issuperset(keys) or any(
            map(operator.is_not, map(dict.get, ops, repeat("value")), repeat(None))):
        return None
    cols = from_ops(ops)
    if cols is None:
        return None
    if others:  # (else each op's index is its place among them, as from_ops numbers them)
        cols.index = np.fromiter(map(operator.itemgetter("index"), ops), np.int64, len(ops))
    if "value" in keys:  # (every op has every key when each has as many: usually)
        cols.has_value = np.ones(len(ops), dtype=bool) if set(map(len, ops)) == {len(keys)} \
            else np.fromiter(map(operator.contains, ops, repeat("value")), bool, len(ops))
    return cols


def _paired_run_columns(history: Any, model: Model) -> Paired | None:
    """A run's merged history in columns (:class:`harness.core.run_history.ColumnHistory`)
    paired as arrays, where :func:`prepare` of the whole history would give the same calls:
    the ``mutex`` model (its step reads an op's process, f and outcome, which columns hold; not
    its token, which ``fenced-mutex`` compares), well-formed columns, no crash recorded, no
    call of the model among the ops held as dicts (the final read's is none: it is counted
    ignored, as prepare counts it), and every call on a named lock or none where no op has a
    ``key``. The calls are made of the ops' dicts (each made when asked), as prepare's."""
    if not is_columns(history) or model.step is not mutex_step:
        return None
    from checker.sessions import columns_of_history

    cols = columns_of_history(history)
    if cols is None:
        return None
    crashes: dict[Any, int] = {}
    for op in history.others:
        if op.get("process") == NEMESIS:
            for q in crash_of(op):
                crashes.setdefault(q, op["time"])
    if crashes and any(type(p) is not int for p in crashes):
        return None
    extra = prepare([op for op in history.others if op.get("process") != NEMESIS], model)
    if extra.parts or extra.unmatched:
        return None
    from checker.column_pairs import has_field
    from harness.core.columns import LOCK_NULL, NULL

    # (plain ops, no field but the core's and a null value: a row holds all there is to read)
    plain = not cols.fields and all(kind == NULL for shape in cols.shapes
                                    for key, kind in shape if key == "value")
    paired = Paired(cols, model, full=not plain)
    if bool((paired.lock <= LOCK_NULL).any()) and _keyed(cols, has_field):
        return None  # a call on no named lock: its part's key may be its "key" field
    paired.failed += extra.failed
    for f, n in extra.ignored.items():
        paired.ignored[f] = paired.ignored.get(f, 0) + n
    paired.crashes = crashes if "release" in model.fs else {}  # type: ignore[attr-defined]
    return paired


def _keyed(cols: Any, has_field: Any) -> bool:
    """Does some op of the columns have a ``key`` that is not null?"""
    from checker.column_pairs import values

    rows = has_field(cols, "key").nonzero()[0]
    return any(v is not None for v in values(cols, "key", rows))


def _summarize(model: Model, prepared: Prepared, results: list[PartResult],
               budget: Budget) -> dict[str, Any]:
    ops = sum(len(r.calls) for r in results)
    out: dict[str, Any] = {
        "valid": VALID,
        "model": model.name,
        "parts": len(results),
        "ops": ops,
        "indeterminate": sum(_unknown(r.calls) for r in results),
        "failed": prepared.failed,
        "ignored": dict(sorted(prepared.ignored.items())),
        "states": sum(r.states for r in results),
    }
    methods: dict[str, int] = {}
    for r in results:
        methods[r.method] = methods.get(r.method, 0) + 1
    out["methods"] = methods  # parts decided by each: "sections" (lockorder), "search" (wgl)
    if prepared.unmatched:
        out["unmatched_completions"] = prepared.unmatched
    invalid = [r for r in results if r.valid is INVALID]
    unknown = [r for r in results if r.valid == UNKNOWN]
    if not ops:
        out["valid"] = UNKNOWN
        left = ", ".join(f"{n} {f}" for f, n in sorted(prepared.ignored.items())) or "none"
        out["reason"] = (f"no op of the {model.name} model ({', '.join(sorted(model.fs))}) to "
                         f"check: nothing was tested (ops left out: {left})")
        return out
    if invalid:
        smallest = min(invalid, key=lambda r: len(r.calls))
        out["valid"] = INVALID
        out["invalid_parts"] = [jsonable(r.key) for r in invalid]
        out["witness"] = smallest.witness
    elif unknown:
        out["valid"] = UNKNOWN
        out["reason"] = budget.reason or "search budget exhausted"
    if unknown:
        out["unknown_parts"] = [jsonable(r.key) for r in unknown]
    return out


def _unknown(calls: Sequence[Call]) -> int:
    """How many of ``calls`` have an unknown outcome."""
    if isinstance(calls, CallRows):
        return calls.unknown
    return sum(1 for c in calls if not c.known)


LOCK_BUDGET_S = 60.0


class LinearizableChecker(Checker):
    name = "linearizable"
    summary = ("the lock's history against a sequential model (mutex, fenced-mutex): its "
               "critical sections in one order, else the Wing & Gong search; P-compositional")
    violations = {"witness": ("linearizability witness", "linearizability witnesses")}
    budgeted = True  # takes time_limit (and max_states) from the run

    @staticmethod
    def check(history: Sequence[Op], *, model: str = "mutex", informational: bool = False,
              time_limit: float = LOCK_BUDGET_S, max_states: int | None = None
              ) -> dict[str, Any]:
        """Is the lock itself linearizable (as ``model``: the module's :func:`check`)?
        ``informational``: the resource protects itself (the fenced workload), so, like lock
        overlaps, the lock's own verdict is reported but does not decide the run's. So it is
        when every write went through the lock's own transaction: they commit with the lock or
        not at all."""
        from checker.sessions import writes_in_lock_transaction  # not on `harness check FILE`

        result = check(history, model, time_limit=time_limit, max_states=max_states)
        informational = informational or writes_in_lock_transaction(history)
        if informational and result["valid"] is not True:
            result = {**result, "lock-valid": result["valid"], "valid": True,
                      "informational": True}
        return result
