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

from nemesis import base, clock
from nemesis.clock import Clock, ClockJump

ClockBack, ClockStrobe = Clock.alias("clock-back"), Clock.alias("clock-strobe")


class Live:
    """Who holds the lock: ``held`` (process -> since when) is replaced by the next entry of
    ``after_moves`` each time the clocks are moved, as if holds ended while a move was on its
    way."""

    def __init__(self, holds: dict[int, float], after_moves: list[dict[int, float]],
                 waiting: tuple[list[int], ...] = ([9],),
                 granted: dict[int, float] | None = None) -> None:
        self.held = holds
        self.granted = granted  # the holds once the first look has seen ``holds``
        self.after_moves = after_moves
        self.waiting = list(waiting)  # who waits, one answer a look (the last one repeats)
        self.looks = 0

    def waiters(self) -> list[int]:
        self.looks += 1
        return self.waiting.pop(0) if len(self.waiting) > 1 else self.waiting[0]

    def moved(self) -> None:
        if self.after_moves:
            self.held = self.after_moves.pop(0)

    def holders(self) -> list[int]:
        return sorted(self.held, key=self.held.__getitem__)

    def held_since(self, process: int) -> float | None:
        return self.held.get(process)

    def holds(self) -> dict[int, float]:
        out = dict(self.held)
        if self.granted is not None:
            self.held, self.granted = self.granted, None
        return out


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
    """Who holds is asked once: nobody holding means None at once, not after 3 s. A hold
    beginning is the newest one (what :func:`nemesis.base.wait_for_fresh_grant` would find,
    the test's holds never changing while it waits)."""
    monkeypatch.setattr(base, "wait_for_holder",
                        lambda ctx, timeout=0.0: (ctx.live.holders() or [None])[0])
    monkeypatch.setattr(base, "wait_for_fresh_hold", newest)
    monkeypatch.setattr(base, "HOLDER_WAIT", 0.1)  # for a fresh hold with a waiter: 10 looks


def newest(ctx: Any, timeout: float = 0.0, at_end: bool = False) -> tuple[int, float] | None:
    """The hold that began last, as if it were the one beginning while the fault waited."""
    holds = ctx.live.holds()
    return max(((p, s) for p, s in holds.items()), key=lambda h: h[1], default=None)


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


def test_a_jump_waits_for_a_fresh_hold_and_a_waiter_asking_for_it() -> None:
    """A lease expired with nobody asking is let go by its holder unharmed (clock@redis, a
    race before): the jump waits for a hold that begins once it is due (its whole hold left
    for a waiter to ask in) while another client is blocked in an acquire."""
    live = Live({}, [], waiting=([], [1], [1, 3]), granted={1: 0.50})  # none; the holder; 3
    nem = ClockJump()
    nem.select(context(live))
    assert nem._aim == (1, 0.50) and live.looks == 3
    live = Live({1: 0.50}, [], waiting=([4],), granted={1: 0.50, 3: 0.90})
    nem.select(context(live))
    assert nem._aim == (3, 0.90)  # not 1's hold, half done when the jump was due


def test_no_waiter_in_the_wait_aims_at_the_hold_as_it_is() -> None:
    live = Live({1: 0.50, 2: 0.70}, [], waiting=([],))
    nem = ClockJump()
    nem.select(context(live))
    assert nem._aim == (2, 0.70) and live.looks > 2


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


def test_the_heal_of_a_jump_back_is_aimed_at_a_hold_and_notes_a_miss(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """Healing a jump back is a jump ahead, the move that breaks a lease (CI: the run's last
    heal, aimed at nobody, expired a lease 22 ms before its holder let go, and no waiter asked
    in between). It is aimed at the run's end too: the clients run until it is done."""
    live = Live({3: 2.0}, [{3: 2.0}])
    ctx = context(live)
    nem = ClockBack()
    targets = jump(nem, ctx)
    asked = []
    monkeypatch.setattr(base, "wait_for_fresh_hold",
                        lambda ctx, timeout=0.0, at_end=False: asked.append(at_end) or (3, 2.0))
    ctx.finishing.set()
    nem.stop(ctx, targets)
    assert asked == [True], "the heal at the run's end did not wait for a hold to begin"
    monkeypatch.setattr(base, "wait_for_fresh_hold", newest)
    monkeypatch.setattr(base, "HOLDER_WAIT", 0.1)  # for a fresh hold with a waiter: 10 looks
    assert ctx.cluster.moves[-1] == 0.0 and "missed" not in nem.detail()  # type: ignore[operator]
    # a hold that ended while the heal was on its way is noted, and the clock still healed
    ctx = context(Live({3: 2.0}, [{3: 2.0}, {}]))
    nem = ClockBack()
    targets = jump(nem, ctx)
    nem.stop(ctx, targets)
    assert ctx.cluster.moves[-1] == 0.0
    assert nem.detail()["missed"] == [3]  # type: ignore[index]


def test_healing_a_jump_ahead_aims_at_nothing() -> None:
    """Putting a clock back makes leases there last longer: no hold to aim at, no miss."""
    ctx = context(Live({3: 2.0}, [{3: 2.0}, {}]))
    nem = ClockJump()
    targets = jump(nem, ctx)
    nem.stop(ctx, targets)
    assert ctx.cluster.moves[-1] == 0.0 and "missed" not in nem.detail()  # type: ignore[operator]
