"""A clock jump lands inside a hold, not after the holder let go (seen in CI over SSH: the
holder picked at the fault's start released 9 ms before the move landed, the next grant was
made on the moved clock, and the run was VALID)."""

from __future__ import annotations

import random
import threading
import time
from types import SimpleNamespace
from typing import Any

import pytest

from nemesis import clock
from nemesis.clock import Clock, ClockJump

ClockBack, ClockStrobe = Clock.alias("clock-back"), Clock.alias("clock-strobe")


class Live:
    """Who holds the lock: ``holds`` (process -> since when) is replaced by the next entry of
    ``after_moves`` each time the clocks are moved, as if holds ended while a move was on its
    way."""

    def __init__(self, holds: dict[int, float], after_moves: list[dict[int, float]]) -> None:
        self.holds = holds
        self.after_moves = after_moves

    def moved(self) -> None:
        if self.after_moves:
            self.holds = self.after_moves.pop(0)

    def holders(self) -> list[int]:
        return sorted(self.holds, key=self.holds.__getitem__)

    def held_since(self, process: int) -> float | None:
        return self.holds.get(process)


class Nodes:
    """Node clocks as libfaketime would set them: ``set_clock`` moves, ``read_clock`` shows."""

    def __init__(self, live: Live) -> None:
        self.live = live
        self.offsets: dict[str, float] = {}
        self.moves: list[float] = []

    def set_clock(self, node: Any, offset: float, clock: str = "wall") -> None:
        self.offsets[node.name] = offset
        self.moves.append(offset)
        self.live.moved()

    def read_clock(self, node: Any) -> float:
        return time.time() + self.offsets.get(node.name, 0.0)


def context(live: Live) -> Any:
    nodes = Nodes(live)
    n1 = SimpleNamespace(name="n1")
    return SimpleNamespace(live=live, cluster=nodes, db=nodes, nodes=[n1], node=lambda _: n1,
                           options={}, rng=random.Random(1), finishing=threading.Event())


@pytest.fixture(autouse=True)
def no_waiting(monkeypatch: pytest.MonkeyPatch) -> None:
    """Who holds is asked once: nobody holding means None at once, not after 3 s."""
    monkeypatch.setattr(clock, "wait_for_holder",
                        lambda ctx: (ctx.live.holders() or [None])[0])


def jump(nem: ClockJump, ctx: Any) -> list[str]:
    targets = nem.select(ctx, None)
    assert targets == ["n1"]
    nem.start(ctx, targets)
    return targets


@pytest.mark.parametrize(("holds", "after_moves"), [
    # 3 holds since 2.80 at the pick; once moved, 3 has let go and 0 holds; 0 still holds after
    ({3: 2.80}, [{0: 2.88}, {0: 2.88}]),
    # 3 let go and took the lock again on the moved clock: the hold aimed at has ended too
    ({3: 1.00}, [{3: 1.05}, {3: 1.05}]),
], ids=["another-client", "a-new-hold-of-the-same-client"])
def test_a_move_that_landed_after_the_hold_ended_moves_again_for_the_next_hold(
        holds: dict[int, float], after_moves: list[dict[int, float]]) -> None:
    ctx = context(Live(holds, after_moves))
    nem = ClockJump()
    jump(nem, ctx)
    assert ctx.cluster.moves == [60.0, 120.0]
    detail = nem.detail()
    assert detail is not None and detail["offset"] == 120.0 and detail["missed"] == [3]
    assert abs(detail["observed"]["n1"] - 120.0) < clock.TOLERANCE


def test_a_hold_still_on_is_moved_once() -> None:
    live = Live({1: 0.50}, [{1: 0.50}])
    ctx = context(live)
    nem = ClockJump()
    jump(nem, ctx)
    assert ctx.cluster.moves == [60.0]
    assert nem.detail() is not None and "missed" not in nem.detail()  # type: ignore[operator]


def test_nobody_holding_after_a_miss_keeps_the_one_move() -> None:
    """The next grant is made on the moved clock: moving it again would hit nobody either."""
    live = Live({4: 0.10}, [{}])
    ctx = context(live)
    nem = ClockJump()
    jump(nem, ctx)
    assert ctx.cluster.moves == [60.0]
    detail = nem.detail()
    assert detail is not None and detail["missed"] == [4] and detail["offset"] == 60.0


def test_moving_again_is_bounded() -> None:
    """Every hold ends before the move lands: RETARGETS more moves, then it stops."""
    after = [{p + 1: float(p + 1)} for p in range(clock.RETARGETS + 3)]
    live = Live({0: 0.0}, after)
    ctx = context(live)
    nem = ClockJump()
    jump(nem, ctx)
    assert len(ctx.cluster.moves) == clock.RETARGETS + 1
    detail = nem.detail()
    assert detail is not None and len(detail["missed"]) == clock.RETARGETS
    assert detail["offset"] == 60.0 * (clock.RETARGETS + 1)


def test_a_jump_back_misses_and_moves_further_back() -> None:
    live = Live({3: 2.0}, [{1: 2.5}, {1: 2.5}])
    ctx = context(live)
    nem = ClockBack()
    jump(nem, ctx)
    assert ctx.cluster.moves == [-60.0, -120.0]


def test_healing_puts_the_clock_back_after_moves_added_up() -> None:
    live = Live({3: 2.0}, [{1: 2.5}, {1: 2.5}])
    ctx = context(live)
    nem = ClockJump()
    targets = jump(nem, ctx)
    nem.stop(ctx, targets)
    assert ctx.cluster.moves[-1] == 0.0
    assert nem.detail() is not None and abs(nem.detail()["observed"]["n1"]) < 1  # type: ignore[index]


def test_a_strobe_does_not_aim() -> None:
    """A strobe flips for as long as the fault lasts: whatever hold is on meets a flip."""
    live = Live({3: 2.0}, [{1: 2.5}, {1: 2.5}])
    ctx = context(live)
    ctx.options = {"clock-period": 10.0}
    nem = ClockStrobe()
    targets = jump(nem, ctx)
    assert ctx.cluster.moves == [60.0]
    nem.stop(ctx, targets)
