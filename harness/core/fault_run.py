"""One fault as it ran, the value both its nemesis (which words it in a report) and the report
read: what ran (``f``), on whom, from when to when, and what the nemesis recorded of it.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

PEOPLE = ("holder", "waiter")  # roles worth naming beside the client they resolved to


@dataclass(frozen=True)
class FaultRun:
    """One fault as it ran: from the moment it was on to the moment it was healed."""

    f: str
    step: int | None
    role: str | None
    targets: tuple[str, ...]
    start: float  # seconds since the load started
    stop: float | None  # None: never healed before the history ends
    detail: Mapping[str, Any] | None = None
    began: float | None = None  # its start's invocation: it was being injected from then

    @property
    def since(self) -> float:
        """From when it may have been on: its start's invocation when known (a kill's SIGKILL
        goes out before the record that the node is down), else its start."""
        return self.start if self.began is None else min(self.began, self.start)

    @property
    def held(self) -> float | None:
        return None if self.stop is None else max(0.0, self.stop - self.start)

    def on(self, t: float, after: float = 0.0) -> bool:
        """Was it on at ``t`` (or had it ended at most ``after`` seconds before)?"""
        return self.start <= t and (self.stop is None or t <= self.stop + after)

    def who(self) -> str:
        """``c0 (the holder)``, ``n1,n2``, or ``nothing``."""
        names = ",".join(self.targets) or "nothing"
        return f"{names} (the {self.role})" if self.role in PEOPLE else names

    def when(self) -> str:
        """``at 3.1 s for 2.5 s`` (``at 3.1 s`` when it was never healed)."""
        return f"at {self.start:.1f} s" + ("" if self.held is None else f" for {self.held:.1f} s")


def generic_words(run: FaultRun) -> str:
    """What any fault is called when its nemesis says nothing of its own (or is not installed
    here, for a history from elsewhere): ``delay on c0 (the holder) at 1.2 s for 4.2 s``."""
    return f"{run.f} on {run.who()} {run.when()}"
