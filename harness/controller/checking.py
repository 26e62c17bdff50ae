"""Checking a history: the workload names its checkers, the registry finds them, and
:func:`harness.core.checks.compose` runs each one safely."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from harness.controller.registry import Entry, Registry, default_registry
from harness.controller.store import RunDir
from harness.core.checks import compose
from harness.core.history import Op


def plan(spec: Mapping[str, Any], registry: Registry | None = None
         ) -> list[tuple[Entry, Any, dict[str, Any]]]:
    """(entry, check function, parameters) for each checker the spec's workload asks for."""
    reg = registry or default_registry()
    workload = reg.load("workloads", str(spec.get("workload", "mutex")))
    out = []
    for name, params in workload.checkers(spec):
        out.append((reg.entry("checkers", name), reg.load("checkers", name).check, dict(params)))
    return out


def check_history(history: Sequence[Op], spec: Mapping[str, Any],
                  registry: Registry | None = None) -> dict[str, Any]:
    return compose(history, [(e.name, fn, params) for e, fn, params in plan(spec, registry)])


def check_run(run: RunDir, spec: Mapping[str, Any], history: Sequence[Op],
              registry: Registry | None = None) -> dict[str, Any]:
    """Check a run's history and save ``results.json``."""
    results = check_history(history, spec, registry)
    run.save_results(results)
    return results
