"""A fault schedule is data: steps at offsets, each a fault aimed at a target.

    [[step]]
    at = 3.1              # seconds after the load started (a step never starts before the
                          # previous one has healed: then it starts late, and says so)
    fault = "clock"       # a nemesis name
    target = "holder"     # whom it aims at, resolved when the step runs: holder, waiter, any,
                          # leader, minority, majority, all, node:n2, client:3 (omitted: the
                          # fault's own choice)
    duration = 4.0        # seconds the fault stays on (omitted: the fault's default)
    params = { clock-offset = 60 }   # the fault's options for this step
    background = true     # optional: a condition held while the other steps come and go
                          # (a slow or lossy network, replication lag); it does not wait for
                          # them, nor they for it

A run records its schedule in ``test.json``, so a run directory (or a TOML file of steps) can be
replayed step for step: targets are resolved at run time, so "pause the holder" pauses whoever
holds the lock then.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import tomli_w

from harness.core.errors import UsageError

MAX_STEPS = 10_000
MAX_SECONDS = 86_400.0  # a day: the longest run, and so the latest a step can be due
MAX_WAIT = 3_600.0  # an hour: the longest anything in a run waits, holds or stays on
SCALARS = (str, int, float, bool)


@dataclass(frozen=True)
class Step:
    at: float
    fault: str
    target: str | None = None
    duration: float | None = None
    params: dict[str, Any] = field(default_factory=dict)
    background: bool = False

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {"at": round(self.at, 3), "fault": self.fault}
        if self.target is not None:
            out["target"] = self.target
        if self.duration is not None:
            out["duration"] = round(self.duration, 3)
        if self.params:
            out["params"] = dict(self.params)
        if self.background:
            out["background"] = True
        return out

    def describe(self) -> str:
        target = f" on {self.target}" if self.target else ""
        dur = "" if self.duration is None else f" for {self.duration:g} s"
        params = "".join(f", {k}={v}" for k, v in self.params.items())
        under = " (background)" if self.background else ""
        return f"{self.fault}{target} at {self.at:g} s{dur}{params}{under}"


@dataclass(frozen=True)
class Schedule:
    steps: tuple[Step, ...] = ()

    def to_dict(self) -> dict[str, Any]:
        return {"steps": [s.to_dict() for s in self.steps]}

    def to_toml(self) -> str:
        """``[[step]]`` tables, one a step (tomli_w alone would inline short ones)."""
        if not self.steps:
            return "step = []  # no faults\n"
        chunks = []
        for step in self.steps:
            lines = ["[[step]]"]
            for key, value in step.to_dict().items():
                if key == "params":
                    inner = ", ".join(tomli_w.dumps({k: v}).strip() for k, v in value.items())
                    lines.append(f"params = {{ {inner} }}")
                else:
                    lines.append(tomli_w.dumps({key: value}).strip())
            chunks.append("\n".join(lines) + "\n")
        return "\n".join(chunks)

    @property
    def faults(self) -> list[str]:
        return sorted({s.fault for s in self.steps})

    def fault_order(self) -> list[str]:
        """The faults of the steps, each once, in the order they first appear."""
        return list(dict.fromkeys(s.fault for s in self.steps))

    def span(self) -> float:
        """Seconds from the start of the load to the planned end of the last step."""
        return max((s.at + (s.duration or 0.0) for s in self.steps), default=0.0)

    def key(self) -> str:
        """One string per distinct schedule (two that compare equal run the same steps)."""
        return json.dumps(self.to_dict(), sort_keys=True, separators=(",", ":"))

    def size(self) -> tuple[int, float, float]:
        """How big a schedule is, smaller first: fewer steps, then less time under faults,
        then an earlier end."""
        return (len(self.steps), round(sum(s.duration or 0.0 for s in self.steps), 3),
                round(self.span(), 3))

    def describe(self) -> str:
        if not self.steps:
            return "no faults"
        return "; ".join(s.describe() for s in self.steps)


def _number(value: Any, where: str, *, allow_none: bool = False) -> float | None:
    if value is None and allow_none:
        return None
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
        raise UsageError(f"{where} must be a finite number of seconds, got {value!r}")
    if not 0 <= value <= MAX_SECONDS:
        raise UsageError(f"{where} must be 0 to {MAX_SECONDS:g} seconds (a day), got {value!r}")
    return float(value)


def step_from_dict(data: Any, where: str) -> Step:
    if not isinstance(data, Mapping):
        raise UsageError(f"{where}: a step must be a table, got {type(data).__name__}")
    unknown = sorted(set(data) - {"at", "fault", "target", "duration", "params", "background"})
    if unknown:
        raise UsageError(f"{where}: unknown key {unknown[0]!r} (use at, fault, target, duration, "
                         "params, background)")
    background = data.get("background", False)
    if not isinstance(background, bool):
        raise UsageError(f"{where}: background must be true or false, got {background!r}")
    fault = data.get("fault")
    if not isinstance(fault, str) or not fault:
        raise UsageError(f"{where}: fault must be a nemesis name, got {fault!r}")
    target = data.get("target")
    if target is not None and (not isinstance(target, str) or not target or len(target) > 100):
        raise UsageError(f"{where}: target must be a word such as holder or node:n2, "
                         f"got {target!r}")
    params = data.get("params") or {}
    if not isinstance(params, Mapping) or not all(
            isinstance(k, str) and isinstance(v, SCALARS) for k, v in params.items()):
        raise UsageError(f"{where}: params must be a table of names to plain values")
    at = _number(data.get("at"), f"{where}: at")
    assert at is not None
    return Step(at, fault, target, _number(data.get("duration"), f"{where}: duration",
                                           allow_none=True), dict(params), background)


def from_dict(data: Any, where: str = "schedule") -> Schedule:
    """A schedule from ``{"steps": [...]}`` (test.json) or ``{"step": [...]}`` (TOML)."""
    if not isinstance(data, Mapping):
        raise UsageError(f"{where}: expected a table with steps")
    steps = data.get("steps", data.get("step"))
    if not isinstance(steps, list):
        raise UsageError(f"{where}: expected a list of steps ([[step]] tables)")
    if len(steps) > MAX_STEPS:
        raise UsageError(f"{where}: {len(steps)} steps; at most {MAX_STEPS}")
    parsed = [step_from_dict(s, f"{where} step {i + 1}") for i, s in enumerate(steps)]
    return Schedule(tuple(sorted(parsed, key=lambda s: s.at)))

