"""The pause nemesis freezes a holder, not a client that let go in the milliseconds between the
pick and the signal (seen in CI: a pause meant to outlive the lease froze a client that had
just released, and the run was VALID)."""

from __future__ import annotations

import threading
import time
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
    """Who holds, from a script, one answer a look (the last one repeats): each holder between
    two writes."""

    def __init__(self, *answers: list[int]) -> None:
        self.answers = list(answers)
        self.last: list[int] = []

    def holders(self) -> list[int]:
        self.last = self.answers.pop(0) if len(self.answers) > 1 else self.answers[0]
        return self.last

    def holds(self) -> dict[int, float]:
        return {p: float(p) for p in self.holders()}

    def writes(self) -> dict[int, bool]:
        return dict.fromkeys(self.last, False)


class Writes(Live):
    """One holder, 1 (since 0.5 s); ``writes()`` answers from a script, one answer a look."""

    def __init__(self, *writes: dict[int, bool]) -> None:
        super().__init__([1])
        self.script = list(writes)
        self.looks = 0

    def writes(self) -> dict[int, bool]:
        self.looks += 1
        return self.script.pop(0) if len(self.script) > 1 else self.script[0]


def context(live: Live, **options: Any) -> Any:
    return SimpleNamespace(live=live, clients=Clients(), finishing=threading.Event(),
                           options=options)


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


def test_the_holder_is_paused_between_two_writes_not_inside_one(monkeypatch: Any) -> None:
    """The default moment: CI froze a pg-advisory holder inside a write twice, and the next
    holder's writes could not land between its two."""
    monkeypatch.setattr(process_faults, "SETTLE", 0)
    live = Writes({1: True}, {1: True}, {1: False})
    ctx = context(live)
    nem = PauseHolder()
    targets = nem.select(ctx, None)
    assert targets == ["c1"] and live.looks == 3  # it waited for the write to complete
    nem.start(ctx, targets)
    assert ctx.clients.calls == [("pause", 1)] and nem.detail() is None


def test_a_holder_that_began_a_write_as_it_froze_is_woken_and_paused_again(
        monkeypatch: Any) -> None:
    monkeypatch.setattr(process_faults, "SETTLE", 0)
    ctx = context(Writes({1: False}, {1: True}, {1: False}, {1: False}))
    nem = PauseHolder()
    targets = nem.select(ctx, None)
    nem.start(ctx, targets)
    assert ctx.clients.calls == [("pause", 1), ("resume", 1), ("pause", 1)]
    assert nem.detail() == {"missed": ["c1"]}


def test_in_write_pauses_the_holder_while_a_write_is_in_flight(monkeypatch: Any) -> None:
    """``pause-at in-write``, the separate row: frozen with its write sent (or about to be),
    checked once frozen; a write that completed first is a miss, and it tries again."""
    monkeypatch.setattr(process_faults, "SETTLE", 0)
    live = Writes({1: False}, {1: True}, {1: False}, {1: True}, {1: True})
    ctx = context(live, **{"pause-at": "in-write"})
    nem = PauseHolder()
    targets = nem.select(ctx, None)
    assert targets == ["c1"] and live.looks == 2
    nem.start(ctx, targets)
    assert ctx.clients.calls == [("pause", 1), ("resume", 1), ("pause", 1)]
    assert nem.detail() == {"missed": ["c1"]}
    assert PauseHolder.options["pause-at"].choices == process_faults.MOMENTS


def test_a_holder_that_writes_nothing_is_paused_after_the_grace(monkeypatch: Any) -> None:
    """A workload that holds without writing (lock-only) is paused as it holds, once its
    holder has written nothing for GRACE seconds; ``hold`` pauses any holder at once."""
    monkeypatch.setattr(process_faults, "SETTLE", 0)
    monkeypatch.setattr(process_faults, "GRACE", 0.05)
    live = Writes({})
    started = time.monotonic()
    assert PauseHolder().select(context(live), None) == ["c1"]
    assert time.monotonic() - started >= 0.05 and live.looks > 1
    live = Writes({1: True})
    assert PauseHolder().select(context(live, **{"pause-at": "hold"}), None) == ["c1"]
    assert live.looks == 0
