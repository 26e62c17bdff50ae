"""Checking a history: the workload names its checkers, the registry finds them, and
:func:`harness.core.checks.compose` runs each one safely. Then the run-level honesty rules,
which no single checker can see:

- a run that did not finish (killed, interrupted, errored) is checked on what it recorded, but
  its verdict can only be invalid (a violation found is real) or unknown, never valid;
- a run in which no acquire succeeded tested nothing: it "could not test" (exit 3), with the
  clients' last error;
- a checker that crashed is "could not check" (exit 3), unless another found a violation.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from harness.controller.registry import Entry, Registry, default_registry
from harness.controller.store import RunDir
from harness.core.checks import compose
from harness.core.errors import EXIT_INVALID, EXIT_SETUP, exit_code_for
from harness.core.history import OK, Op
from harness.core.text import line

BUDGETED = ("time_limit", "max_states")  # limits a checker may take (``budgeted = True``)


def plan(spec: Mapping[str, Any], registry: Registry | None = None,
         limits: Mapping[str, Any] | None = None) -> list[tuple[Entry, Any, dict[str, Any]]]:
    """(entry, check function, parameters) for each checker the spec's workload asks for;
    ``limits`` (time_limit, max_states) go to the checkers that declare ``budgeted``."""
    reg = registry or default_registry()
    workload = reg.load("workloads", str(spec.get("workload", "mutex")))
    out = []
    for name, params in workload.checkers(spec):
        cls = reg.load("checkers", name)
        extra = {k: v for k, v in (limits or {}).items()
                 if v is not None and k in BUDGETED and getattr(cls, "budgeted", False)}
        out.append((reg.entry("checkers", name), cls.check, {**params, **extra}))
    return out


def check_history(history: Sequence[Op], spec: Mapping[str, Any],
                  registry: Registry | None = None, *, status: str = "complete",
                  limits: Mapping[str, Any] | None = None) -> dict[str, Any]:
    results = compose(history, [(e.name, fn, params)
                                for e, fn, params in plan(spec, registry, limits)])
    if status != "complete" and results["valid"] is True:
        results["valid"] = "unknown"
        results["unfinished"] = (f"the run did not finish (status {status}): what it recorded "
                                 "shows no violation, but that is not a pass")
    if status != "complete":
        results["status"] = status
    reason = untested(history)
    if reason is not None and results["valid"] is not False:
        results["valid"] = "unknown"
        results["could-not-test"] = reason
    return results


def untested(history: Sequence[Op]) -> str | None:
    """Why the history tested nothing (no acquire succeeded), with the last client error."""
    last_error = None
    for op in history:
        if op.get("f") == "acquire" and op.get("type") == OK:
            return None
        if isinstance(op.get("process"), int) and op.get("error"):
            last_error = op
    why = "no acquire succeeded: the run tested nothing"
    if last_error is not None:
        why += (f"; the last client error (process {last_error['process']}, "
                f"{last_error['f']}): {line(str(last_error['error']), 300)}")
    return why


def check_run(run: RunDir, spec: Mapping[str, Any], history: Sequence[Op],
              registry: Registry | None = None, *, status: str = "complete",
              limits: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """Check a run's history and save ``results.json``."""
    results = check_history(history, spec, registry, status=status, limits=limits)
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
