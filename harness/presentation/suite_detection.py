"""The detection view of a suite run over several seeds (``harness suite FILE --seeds 1-20``):
per row (an entry but its seed), right in k of n seeds, the 95% Wilson score interval of that
rate, the median time to the first violation over the seeds that found one, and each seed that
was wrong with its one-line reason. The console, JUnit, the index page and summary.json all say
it with :meth:`Row.line` and :meth:`Row.record`.

A seed is *right* when its verdict is the one expected; a run the harness could not run counts
as wrong (it detected nothing). Skipped and interrupted runs are left out of n: they never ran.
"""

from __future__ import annotations

import math
import statistics
from dataclasses import dataclass, field
from typing import Any

from harness.presentation.suite import Outcome

Z95 = 1.959963984540054  # the standard normal quantile of 0.975
NOT_RUN = ("skipped", "interrupted")


def wilson(k: int, n: int, z: float = Z95) -> tuple[float, float]:
    """The Wilson score interval of a proportion k/n (95% by default); (0, 1) for n = 0."""
    if not 0 <= k <= n:
        raise ValueError(f"k = {k} of n = {n}: need 0 <= k <= n")
    if n == 0:
        return 0.0, 1.0
    p = k / n
    centre = p + z * z / (2 * n)
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n))
    scale = 1 + z * z / n  # at k = 0 and k = n the bound is exactly 0 or 1: no rounding
    lo = 0.0 if k == 0 else (centre - half) / scale
    return lo, 1.0 if k == n else (centre + half) / scale


def why_wrong(o: Outcome) -> str:
    """One line: what a seed that was not as expected did instead."""
    if o.verdict == "valid":
        return "VALID: no check found a violation"
    what = o.first_violation.splitlines()[0][:200] if o.first_violation else "no explanation"
    return f"{o.verdict.upper()}: {what}"


@dataclass
class Row:
    number: int
    label: str
    expect: str
    reason: str
    runs: list[Outcome] = field(default_factory=list)

    @property
    def ran(self) -> list[Outcome]:
        return [o for o in self.runs if o.verdict not in NOT_RUN]

    @property
    def n(self) -> int:
        return len(self.ran)

    @property
    def k(self) -> int:
        return sum(1 for o in self.ran if o.as_expected)

    @property
    def interval(self) -> tuple[float, float]:
        return wilson(self.k, self.n)

    @property
    def times(self) -> list[float]:
        return [o.violation_at for o in self.ran if o.violation_at is not None]

    @property
    def median_at(self) -> float | None:
        return statistics.median(self.times) if self.times else None

    @property
    def wrong(self) -> list[tuple[Any, str]]:
        return [(o.entry.options.get("seed"), why_wrong(o)) for o in self.ran
                if not o.as_expected]

    def first_violation(self) -> str:
        if self.median_at is None:
            return "untimed" if self.invalid else "-"
        return f"{self.median_at:.1f} s ({len(self.times)} of {self.invalid})"

    @property
    def invalid(self) -> int:
        return sum(1 for o in self.ran if o.verdict == "invalid")

    def rate(self) -> str:
        if not self.n:  # every seed skipped or interrupted: no rate, not a vacuous [0, 1]
            return f"not run ({len(self.runs)} seed(s) interrupted or skipped)"
        lo, hi = self.interval
        return f"{self.k}/{self.n} [{lo:.2f}, {hi:.2f}]"

    def line(self) -> str:
        """The row in one line, as JUnit's property and the console say it."""
        wrong = "; ".join(f"seed {s}: {w}" for s, w in self.wrong)
        first = self.first_violation()
        found = "no violation" if first == "-" else f"first violation median {first}"
        return f"right in {self.rate()} (95% Wilson), {found}" + (
            f"; wrong: {wrong}" if wrong else "")

    def record(self) -> dict[str, Any]:
        lo, hi = self.interval
        return {"row": self.number, "label": self.label, "expect": self.expect,
                "reason": self.reason, "right": self.k, "runs": self.n,
                "interval": [round(lo, 4), round(hi, 4)],
                "median-first-violation-s": self.median_at, "timed": len(self.times),
                "invalid": self.invalid,
                "wrong": [{"seed": s, "why": w} for s, w in self.wrong]}


def rows(outcomes: list[Outcome]) -> list[Row]:
    """The outcomes grouped by row, in the order of each row's first entry."""
    found: dict[str, Row] = {}
    for o in outcomes:
        key = o.entry.row()
        if key not in found:
            found[key] = Row(len(found) + 1, o.entry.label(seed=False), o.entry.expect,
                             o.entry.reason)
        found[key].runs.append(o)
    return list(found.values())


def table(found: list[Row]) -> list[str]:
    """The detection table for a terminal or a Markdown page: one line per row, then the
    wrong seeds under the table."""
    lines = ["| # | row | expect | right (95% interval) | first violation, median | reason |",
             "|---|---|---|---|---|---|"]
    lines += [f"| {r.number} | {r.label} | {r.expect} | {r.rate()} | {r.first_violation()} | "
              f"{r.reason or '-'} |" for r in found]
    wrong = [f"- #{r.number} {r.label}, seed {s}: {w}" for r in found for s, w in r.wrong]
    return lines + (["", "Wrong seeds:", *wrong] if wrong else [])
