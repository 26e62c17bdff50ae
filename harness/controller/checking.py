"""Checking a history: the workload names its checkers, the registry finds them, and
:func:`harness.core.checks.compose` runs each one safely. Then the run-level honesty rules,
which no single checker can see:

- a run that did not finish (killed, interrupted, errored) is checked on what it recorded, but
  its verdict can only be invalid (a violation found is real) or unknown, never valid;
- a run in which no acquire succeeded tested nothing: it "could not test" (exit 3), naming the
  most frequent error and its count, whatever a checker built from those errors (a "stuck
  lock" made of failed requests is no finding about the lock); so did a run in which a
  client's every request failed (three or more, each ended ``info`` with an error that is no
  timeout: it could not talk to the lock), unless the clients that worked showed a violation
  (it stands, exit 1, the reason beside it);
- a checker that crashed is "could not check" (exit 3), unless another found a violation.
"""

from __future__ import annotations

import importlib
import re
from collections import Counter
from collections.abc import Mapping, Sequence
from typing import Any

from harness.controller.registry import Check, Registry, default_registry
from harness.controller.store import RunDir
from harness.core.checks import TIME_ORDERED, WELL_FORMED, Shared, compose, is_columns
from harness.core.errors import EXIT_INVALID, EXIT_SETUP, exit_code_for
from harness.core.history import INFO, INVOKE, OK, Op
from harness.core.text import line
from harness.core.wellformed import require_checked

BUDGETED = ("time_limit", "max_states")  # limits a checker may take (``budgeted = True``)


# What the merge and the checks of a run's history import on first use (msgspec, numpy):
# imported by :func:`preload` while the load runs, not after it.
FIRST_USE = ("harness.core.history_bulk", "harness.core.columns", "numpy.ma",
             "harness.core.journal_columns", "harness.core.column_lines",
             "harness.core.run_history", "checker.sessions", "checker.lockorder_rows",
             "checker.column_pairs", "checker.intervals", "checker.process_ops",
             "harness.controller.checking_rows")


def preload() -> None:
    """Import :data:`FIRST_USE` now (the controller waits for the load anyway: 0.13 s of CPU
    less between the end of the load and the verdict)."""
    for name in FIRST_USE:
        importlib.import_module(name)


def plan(spec: Mapping[str, Any], registry: Registry | None = None,
         limits: Mapping[str, Any] | None = None) -> list[Check]:
    """The checks of a stored spec (``harness check`` of a run): its workload's, found by
    name."""
    reg = registry or default_registry()
    return checks_of(reg.load("workloads", str(spec.get("workload", "mutex"))), spec, reg,
                     limits)


def checks_of(workload: Any, spec: Mapping[str, Any], reg: Registry,
              limits: Mapping[str, Any] | None = None) -> list[Check]:
    """(entry, check function, parameters) for each checker the workload asks for;
    ``limits`` (time_limit, max_states) go to the checkers that declare ``budgeted``."""
    out = []
    for name, params in workload.checkers(spec):
        cls = reg.load("checkers", name)
        extra = {k: v for k, v in (limits or {}).items()
                 if v is not None and k in BUDGETED and getattr(cls, "budgeted", False)}
        out.append((reg.entry("checkers", name), cls.check, {**params, **extra}))
    return out


def check_history(history: Sequence[Op], spec: Mapping[str, Any],
                  registry: Registry | None = None, *, status: str = "complete",
                  limits: Mapping[str, Any] | None = None,
                  checks: Sequence[Check] | None = None, error: str | None = None
                  ) -> dict[str, Any]:
    """The verdict on ``history``: the ``checks`` a run resolved, else the stored spec's
    (``error``: why the run stopped, when it did not finish).
    ``history`` shared (:class:`~harness.core.checks.Shared`) keeps what the checkers derive
    from it for the summary and the report; one its reader found well-formed is not walked
    again."""
    history = Shared.of(history)
    if not history.derived.get(WELL_FORMED):
        # malformed: HistoryError (exit 3), and no checker runs
        ordered = bool(history.derived.get(TIME_ORDERED))
        if not (is_columns(history) and _columns_well_formed(history, ordered)):
            require_checked(history, ordered=ordered)  # (its words, where columns say no)
        history.derived[WELL_FORMED] = True
    if checks is None:
        checks = plan(spec, registry, limits)
    results = compose(history, [(e.name, fn, params) for e, fn, params in checks])
    if status != "complete" and results["valid"] is not False:  # unknown already, or true
        results["valid"] = "unknown"
        results["unfinished"] = (f"the run did not finish (status {status}): what it recorded "
                                 "shows no violation, but that is not a pass")
    elif status != "complete":  # said whatever the verdict: what was found stands, cut short
        results["unfinished"] = (f"the run did not finish (status {status}): the violations "
                                 "it recorded stand, and what it did not record is unchecked")
    if status != "complete":
        results["status"] = status
    reason, nothing, errored = untested(history)
    stopped = f"; the run stopped: {line(error, 300)}" if error else ""
    if reason is not None and nothing and not errored and results["valid"] is False:
        reason = ("no acquire succeeded and none came back, none ended in an error: the lock "
                  "never granted it, and what the checkers found of that (a stuck lock) stands"
                  + stopped)
    elif reason is not None and (nothing or results["valid"] is not False):
        reason += stopped
        if results["valid"] is False:
            reason += ("; the checkers' verdict (invalid) rests on those failed requests and "
                       "is no finding about the lock")
            withdraw(results)
        results["valid"] = "unknown"
    elif reason is not None:  # clients that worked showed a violation: it stands
        reason += stopped + "; the violation the other clients' ops show stands"
    if reason is not None:
        results["could-not-test"] = reason
    return results


def withdraw(results: dict[str, Any]) -> None:
    """Each check's invalid verdict withdrawn (a run that tested nothing): unknown, with why;
    what it listed stays, as a withdrawn check's (never an incident, never a violation)."""
    for check in (results.get("checks") or {}).values():
        if isinstance(check, dict) and check.get("valid") is False:
            check["valid"] = "unknown"
            check["withdrawn"] = True
            check["note"] = ("withdrawn: built from the failed requests of a run that could "
                             "not test, no finding about the lock")


def _columns_well_formed(history: Any, ordered: bool) -> bool:
    from harness.controller.checking_rows import columns_well_formed

    return columns_well_formed(history, ordered)


MIN_FAILED = 3  # one or two unanswered requests are what a fault or the run's end can do
TIMED_OUT = re.compile(r"time[ds]?[ -]?out", re.IGNORECASE)


def failed(op: Op) -> bool:
    """A request that failed: it ended ``info`` with an error that is no timeout (a timeout
    is what a fault does to any client; an exception on every request is a client that could
    not talk to the lock: a broken plugin, a wrong address)."""
    error = op.get("error")
    return op["type"] == INFO and bool(error) and not TIMED_OUT.search(str(error))


def untested(history: Sequence[Op]) -> tuple[str | None, bool, bool]:
    """Why the history tested nothing, or not through some client (the most frequent error and
    its count); whether it tested nothing at all (no acquire succeeded); whether a request it
    counts ended in an error. A client "could not test": its ``MIN_FAILED`` or more all failed."""
    if _tested(history):
        return None, False, False
    return _untested(history)


def _tested(history: Sequence[Op]) -> bool:
    """Some acquire succeeded and no client "could not test": the usual run, told from the
    client op pairs the checkers derived already (:func:`checker.sessions.client_pairs`), the
    completions only, by rows. False: :func:`_untested` says why, from the history op by op."""
    from checker.sessions import client_pairs
    from harness.controller.checking_rows import completions

    acquired, made = completions(client_pairs(history), failed_words)
    return acquired and all(n < MIN_FAILED for n in made.values())


def failed_words(error: Any) -> bool:
    """Whether an ``info`` completion with this error is a failed request (:func:`failed`)."""
    return bool(error) and not TIMED_OUT.search(str(error))


def _untested(history: Sequence[Op]) -> tuple[str | None, bool, bool]:
    """:func:`untested` op by op (a history in columns: its ops as dicts, made one by one: a
    run that tested nothing, the rare case)."""
    acquired = False
    ended: dict[int, list[Op]] = {}
    for op in history:
        p = op.get("process")
        if not isinstance(p, int) or isinstance(p, bool) or op.get("type") == INVOKE:
            continue
        ended.setdefault(p, []).append(op)
        acquired = acquired or (op.get("f") == "acquire" and op.get("type") == OK)
    if not acquired:
        errors = [op for ops in ended.values() for op in ops if op.get("error")]
        return ("no acquire succeeded: the run tested nothing" + most_frequent(errors), True,
                bool(errors))
    broken = sorted(p for p, ops in ended.items()
                    if len(ops) >= MIN_FAILED and all(map(failed, ops)))
    if not broken:
        return None, False, False
    ops = [op for p in broken for op in ended[p]]
    errors = [op for op in ops if op.get("error")]
    return (f"client(s) {', '.join(map(str, broken))} never had an answer: all {len(ops)} of "
            "their requests failed (none ok), so the run did not test the lock through them"
            + most_frequent(errors)), False, bool(errors)


def most_frequent(errors: Sequence[Op]) -> str:
    """``; the most frequent client error, N of M: ...`` (with where it was first seen)."""
    if not errors:
        return "; no request ended in an error"
    counts = Counter(line(str(op["error"]), 300) for op in errors)
    text, n = counts.most_common(1)[0]
    first = next(op for op in errors if line(str(op["error"]), 300) == text)
    return (f"; the most frequent client error, {n} of {len(errors)} (first: process "
            f"{first['process']}, {first['f']}): {text}")


def check_run(run: RunDir, spec: Mapping[str, Any], history: Sequence[Op],
              registry: Registry | None = None, *, status: str = "complete",
              limits: Mapping[str, Any] | None = None,
              checks: Sequence[Check] | None = None, error: str | None = None
              ) -> dict[str, Any]:
    """Check a run's history and save ``results.json``."""
    results = check_history(history, spec, registry, status=status, limits=limits,
                            checks=checks, error=error)
    run.save_results(results)
    return results


def exit_code(results: Mapping[str, Any]) -> int:
    """0 valid, 1 invalid, 2 unknown; 3 when the run tested nothing or a checker crashed (and
    nothing else found a violation: a violation found is real whatever else broke)."""
    valid = results.get("valid")
    if valid is False:
        return EXIT_INVALID
    if results.get("could-not-test") or results.get("crashed-checkers"):
        return EXIT_SETUP
    return exit_code_for(valid)
