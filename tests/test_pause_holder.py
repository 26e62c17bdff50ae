"""The pause nemesis freezes a holder, not a client that let go in the milliseconds between the
pick and the signal (seen in CI: a pause meant to outlive the lease froze a client that had
just released, and the run was VALID)."""

from __future__ import annotations

import threading
from types import SimpleNamespace
from typing import Any

from nemesis import process_faults
from nemesis.process_faults import PauseHolder


class Clients:
    def __init__(self) -> None:
        self.calls: list[tuple[str, int]] = []

    def pause(self, p: int) -> bool:
        self.calls.append(("pause", p))
        return True

    def resume(self, p: int) -> bool:
        self.calls.append(("resume", p))
        return True


class Live:
    """holders() answers from a script, one answer a call (the last one repeats)."""

    def __init__(self, *answers: list[int]) -> None:
        self.answers = list(answers)

    def holders(self) -> list[int]:
        return self.answers.pop(0) if len(self.answers) > 1 else self.answers[0]


def context(live: Live) -> Any:
    return SimpleNamespace(live=live, clients=Clients(), finishing=threading.Event())


def test_a_holder_that_let_go_before_it_froze_is_woken_and_the_new_holder_frozen(
        monkeypatch: Any) -> None:
    monkeypatch.setattr(process_faults, "SETTLE", 0)
    # picked: 4; frozen, 4 had released; the new holder is 1; 1 still holds once frozen
    ctx = context(Live([4], [], [1], [1]))
    nem = PauseHolder()
    targets = nem.select(ctx, None)
    assert targets == ["c4"]
    nem.start(ctx, targets)
    assert ctx.clients.calls == [("pause", 4), ("resume", 4), ("pause", 1)]
    assert targets == ["c1"] and nem.detail() == {"missed": ["c4"]}
    assert nem.expect(ctx, targets) == {"frozen": [1]}


def test_a_holder_still_holding_is_frozen_once(monkeypatch: Any) -> None:
    monkeypatch.setattr(process_faults, "SETTLE", 0)
    ctx = context(Live([2]))
    nem = PauseHolder()
    targets = nem.select(ctx, None)
    nem.start(ctx, targets)
    assert ctx.clients.calls == [("pause", 2)] and nem.detail() is None


def test_a_named_client_is_frozen_whatever_it_holds(monkeypatch: Any) -> None:
    monkeypatch.setattr(process_faults, "SETTLE", 0)
    ctx = context(Live([]))
    ctx.clients.processes = [0, 1, 2, 3]
    nem = PauseHolder()
    targets = nem.select(ctx, "client:3")
    nem.start(ctx, targets)
    assert ctx.clients.calls == [("pause", 3)] and targets == ["c3"]


def test_retargeting_is_bounded(monkeypatch: Any) -> None:
    """A holder that always lets go first: RETARGETS misses, then the last pick stays frozen."""
    monkeypatch.setattr(process_faults, "SETTLE", 0)
    answers: list[list[int]] = []
    for p in range(process_faults.RETARGETS + 1):
        answers += [[p], []]  # pick p; p has let go once frozen
    ctx = context(Live(*answers))
    nem = PauseHolder()
    targets = nem.select(ctx, None)
    nem.start(ctx, targets)
    assert len(nem.missed) == process_faults.RETARGETS
    assert ctx.clients.calls[-1] == ("pause", process_faults.RETARGETS)
