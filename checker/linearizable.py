"""Linearizability checking: the Wing & Gong search with Lowe's cache, P-compositional.

``check(history, model)`` decides whether the ops of a history can be put in one sequential
order that (1) respects real time: an op that completed before another was invoked comes
first, and (2) the model accepts (``checker.models``). It returns a dict, with a witness that a
person can read when the answer is no.

How (the algorithm of Wing & Gong, with Lowe's improvements, as in Knossos and Porcupine):

- The history is split by lock (the op's ``lock`` field, else ``key``): a history is
  linearizable iff every part is (P-compositionality), and small parts are far cheaper.
- Each op with a known outcome becomes a call entry and a return entry in a doubly linked list
  ordered by time (calls before returns at equal times: equal times are concurrent). The search
  walks the list from its head: a call entry met before any return entry may be linearized now
  (its op is removed from the list, "lifted"); meeting a return entry means that op should
  already have been linearized, so the search backtracks (undoes its latest choice).
- A cache of the configurations already explored, (set of linearized ops, model state), prunes
  every path that reaches one again: that is what makes the search practical.

Indeterminate ops (``info``, or invoked and never completed) may have taken effect at any
time after their invocation, or never. They have no return entry: nothing ever forces them,
the search may linearize one whenever it is stuck on a return entry, and the history is
linearizable as soon as every op with a known outcome is linearized, whatever the
indeterminate ones did. (Never "forcing" them is what keeps an acquire that timed out, and
never happened, from holding the lock forever in the model.) Three things keep them cheap:

- they are tried only after the ops with a known outcome (a valid history is usually found
  without ever touching them);
- two pending indeterminate ops that look the same to the model (same f, value and process) are
  interchangeable, so only the earliest of them is ever tried;
- a model may declare a state hopeless (``Model.stuck``: a lock held by a process that never
  releases again, while other processes still need it); the search does not enter it.

The set of linearized ops is kept compactly: ops with a known outcome are numbered in call
order, and the set is (the lowest op not yet linearized, bitmask of the linearized ops above
it): a window as wide as the ops concurrent with that op, not as the whole history. Indeterminate
ops have a bitmask of their own. The cache key is that pair with the model state, exact (no
hashing of states into fingerprints, so no false "already seen").

Pure: no I/O; the only clock is ``time.monotonic``, read for the time budget.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, ClassVar

from checker import lockorder
from checker.calls import Prepared, prepare
from checker.models import Model, get_model
from checker.wgl import INVALID, UNKNOWN, VALID, Budget, Part, PartResult
from checker.witness import jsonable
from harness.core.heap import gc_paused
from harness.core.history import Op


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
    """
    m = get_model(model)
    prepared = prepare(history, m)
    budget = Budget(time_limit, max_states)
    parts = sorted(prepared.parts.items(), key=lambda kv: (len(kv[1]), repr(kv[0])))
    results: list[PartResult] = []
    fast = lockorder.applies(m)
    for key, calls in parts:
        if budget.reason is not None:
            results.append(PartResult(UNKNOWN, key, calls, 0))
            continue
        result = lockorder.check_part(key, calls, m, budget) if fast else None
        results.append(result if result is not None else Part(key, calls, m).search(budget))
    return _summarize(m, prepared, results, budget)


def _summarize(model: Model, prepared: Prepared, results: list[PartResult],
               budget: Budget) -> dict[str, Any]:
    all_calls = [c for r in results for c in r.calls]
    out: dict[str, Any] = {
        "valid": VALID,
        "model": model.name,
        "parts": len(results),
        "ops": len(all_calls),
        "indeterminate": sum(1 for c in all_calls if not c.known),
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
    if not all_calls:
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


LOCK_BUDGET_S = 60.0


def check_lock(history: Sequence[Op], *, model: str = "mutex", informational: bool = False,
               time_limit: float = LOCK_BUDGET_S, max_states: int | None = None
               ) -> dict[str, Any]:
    """Is the lock itself linearizable (as ``model``)? ``informational``: the resource protects
    itself (the fenced workload), so, like lock overlaps, the lock's own verdict is reported
    but does not decide the run's. So it is when every write went through the lock's own
    transaction: they commit with the lock or not at all."""
    from checker.sessions import writes_in_lock_transaction  # not on `harness check FILE`'s way

    result = check(history, model, time_limit=time_limit, max_states=max_states)
    informational = informational or writes_in_lock_transaction(history)
    if informational and result["valid"] is not True:
        result = {**result, "lock-valid": result["valid"], "valid": True, "informational": True}
    return result


class LinearizableChecker:
    budgeted: ClassVar[bool] = True  # takes time_limit (and max_states) from the run
    name: ClassVar[str] = "linearizable"
    summary: ClassVar[str] = ("the lock's history against a sequential model (mutex, "
                              "fenced-mutex): Wing & Gong search, P-compositional")
    check = staticmethod(check_lock)
