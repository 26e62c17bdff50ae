"""The clock family's patterns on node clocks that do what they are told (or do not), no
servers: a rate moves the offset continuously and keeps it at its end, a node whose clock does
not move fails the fault, the old names preset the pattern and refuse another."""

from __future__ import annotations

import itertools
import random
import threading
import time
from types import SimpleNamespace
from typing import Any

import pytest

from dbs.redis import RedisDB
from harness.controller.registry import Registry
from nemesis import base, clock
from nemesis.clock import Clock, observed_rate

ClockBack, ClockStrobe = Clock.alias("clock-back"), Clock.alias("clock-strobe")


class Nodes:
    """Node clocks as libfaketime sets them; ``deaf`` nodes ignore every move."""

    def __init__(self, deaf: tuple[str, ...] = ()) -> None:
        self.offsets: dict[str, float] = {}
        self.moves: list[tuple[str, float, str]] = []
        self.deaf = deaf
        self.lock = threading.Lock()

    def set_clock(self, node: Any, offset: float, clock: str = "wall") -> None:
        with self.lock:
            self.moves.append((node.name, offset, clock))
            if node.name not in self.deaf:
                self.offsets[node.name] = offset

    def read_clock(self, node: Any) -> float:
        return time.time() + self.offsets.get(node.name, 0.0)


def context(options: dict[str, Any], deaf: tuple[str, ...] = ()) -> Any:
    nodes = Nodes(deaf)
    named = {n: SimpleNamespace(name=n) for n in ("n1", "n2", "n3")}
    live = SimpleNamespace(holders=lambda: [], held_since=lambda p: None, holds=dict)
    return SimpleNamespace(live=live, cluster=nodes, db=nodes, nodes=list(named.values()),
                           node=named.__getitem__, options=options, rng=random.Random(1),
                           finishing=threading.Event())


@pytest.fixture(autouse=True)
def nobody_holds(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(base, "wait_for_fresh_hold", lambda ctx, timeout=0.0, at_end=False: None)
    monkeypatch.setattr(base, "wait_for_holder", lambda ctx, timeout=0.0: None)


def offsets_of(ctx: Any, name: str) -> list[float]:
    return [o for n, o, _ in ctx.cluster.moves if n == name]


def ran_on_n1(options: dict[str, Any], seconds: float) -> tuple[Any, Clock, dict[str, Any]]:
    """A clock fault of ``options`` on n1 for ``seconds``: (context, nemesis, its detail at
    the stop)."""
    ctx = context(options)
    nem = Clock()
    nem.start(ctx, ["n1"])
    time.sleep(seconds)
    nem.stop(ctx, ["n1"])
    done = nem.detail()
    assert done is not None
    return ctx, nem, done


def test_a_rate_moves_the_clock_in_small_steps_and_keeps_the_offset_at_its_end() -> None:
    ctx = context({"clock-pattern": "rate", "clock-rate": 3.0, "clock-id": "both"})
    nem = Clock()
    nem.start(ctx, ["n1", "n2"])
    started = nem.detail()
    time.sleep(1.0)
    nem.stop(ctx, ["n1", "n2"])
    done = nem.detail()
    assert started is not None and done is not None
    assert started["pattern"] == "rate" and started["clock"] == "both" and started["rate"] == 3.0
    assert {c for _, _, c in ctx.cluster.moves} == {"both"}
    steps = offsets_of(ctx, "n1")
    assert steps[0] == 0.0  # no jump at its start
    assert steps == sorted(steps)  # a fast clock only gains
    assert max(b - a for a, b in itertools.pairwise(steps)) < 0.5  # small steps
    assert 1.9 <= done["offset"] <= 2.0 * (done["seconds"] + 0.01)
    assert steps[-1] == pytest.approx(done["offset"], abs=1e-3)  # no jump at its end either
    assert ctx.cluster.offsets["n1"] == pytest.approx(done["offset"], abs=1e-3)
    for name in ("n1", "n2"):
        assert done["observed-rate"][name] == pytest.approx(3.0, abs=0.1)
        assert abs(done["observed"][name] - done["offset"]) < clock.TOLERANCE
    assert done["steps"] >= 10
    nem.teardown(ctx)  # a monotonic clock is never set back, not even at the run's end
    assert ctx.cluster.offsets["n1"] == pytest.approx(done["offset"], abs=1e-3)


def test_a_jump_after_a_rate_is_healed_to_where_the_rate_left_the_clock() -> None:
    ctx, nem, done = ran_on_n1({"clock-pattern": "rate", "clock-rate": 5.0}, 0.3)
    gained = done["offset"]
    ctx.options = {"clock-pattern": "jump", "clock-offset": 30.0}
    nem.start(ctx, ["n1"])
    assert ctx.cluster.offsets["n1"] == pytest.approx(gained + 30.0, abs=1e-3)
    jumped = nem.detail()
    assert jumped is not None and jumped["offset"] == 30.0
    assert jumped["asked"]["n1"] == pytest.approx(gained + 30.0, abs=1e-3)
    assert abs(jumped["observed"]["n1"] - jumped["asked"]["n1"]) < clock.TOLERANCE
    nem.stop(ctx, ["n1"])
    assert ctx.cluster.offsets["n1"] == pytest.approx(gained, abs=1e-3)
    nem.teardown(ctx)  # the wall clock alone is put back at the run's end
    assert ctx.cluster.offsets == {"n1": 0.0, "n2": 0.0, "n3": 0.0}


def test_a_node_whose_clock_does_not_move_fails_the_fault() -> None:
    ctx = context({"clock-pattern": "jump"}, deaf=("n2",))
    with pytest.raises(RuntimeError, match="n2: clock offset is"):
        Clock().start(ctx, ["n1", "n2"])


def test_a_rate_on_a_node_whose_clock_stops_following_fails_at_stop() -> None:
    ctx = context({"clock-pattern": "rate", "clock-rate": 4.0})
    nem = Clock()
    nem.start(ctx, ["n1", "n2"])
    ctx.cluster.deaf = ("n2",)  # n2 stays at +0 while the rate should take it to +1.5 s
    time.sleep(0.6)
    with pytest.raises(RuntimeError, match="n2: clock offset is"):
        nem.stop(ctx, ["n1", "n2"])


def test_a_strobe_flips_between_the_offset_and_the_true_time() -> None:
    ctx, _, done = ran_on_n1({"clock-pattern": "strobe", "clock-period": 0.05,
                              "clock-offset": 20.0}, 0.4)
    assert done["flips"] >= 4
    assert done["observed-range"]["n1"][0] == pytest.approx(0.0, abs=0.5)
    assert done["observed-range"]["n1"][1] == pytest.approx(20.0, abs=0.5)
    assert set(offsets_of(ctx, "n1")) == {0.0, 20.0}


@pytest.mark.parametrize(("name", "pattern", "offset"), [
    ("clock", "jump", 60.0), ("clock-back", "back", -60.0), ("clock-strobe", "strobe", 60.0)])
def test_the_old_names_preset_the_pattern(name: str, pattern: str, offset: float) -> None:
    cls = Registry().load("nemeses", name)
    assert issubclass(cls, Clock) and cls.pattern({}) == pattern
    assert cls().offset(context({})) == offset
    assert cls.refuse(RedisDB(), {}, 2.0, None) is None


@pytest.mark.parametrize(("cls", "options", "says"), [
    (ClockBack, {"clock-pattern": "rate"}, "clock-back is clock-pattern back, not rate"),
    (ClockStrobe, {"clock-pattern": "jump"}, "clock-strobe is clock-pattern strobe"),
    (Clock, {"clock-rate": 3.0}, "clock-rate is for clock-pattern rate, not jump"),
    (Clock, {"clock-pattern": "rate", "clock-rate": 0.5, "clock-id": "both"},
     "a rate below 1 on the monotonic clock"),
    (Clock, {"clock-id": "monotonic"}, "cannot move the monotonic clock alone"),
    (ClockStrobe, {"clock-id": "both"}, "sets the monotonic clock back"),
    (ClockBack, {"clock-id": "both"}, "sets the monotonic clock back"),
    (Clock, {"clock-id": "both", "clock-offset": -5.0}, "sets the monotonic clock back"),
])
def test_data_that_contradicts_itself_is_refused(cls: type[Clock], options: dict[str, Any],
                                                 says: str) -> None:
    reason = cls.refuse(RedisDB(), options, 2.0, None)
    assert reason is not None and says in reason


def test_a_slow_wall_clock_is_a_rate() -> None:
    assert Clock.refuse(RedisDB(), {"clock-pattern": "rate", "clock-rate": 0.5}, 2.0,
                        None) is None


def test_observed_rate_is_the_slope_of_the_read_backs() -> None:
    assert observed_rate([(0.0, 0.0), (1.0, 2.0), (2.0, 4.0)]) == 3.0
    assert observed_rate([(0.0, 1.0), (1.0, 1.0)]) == 1.0
    assert observed_rate([(0.0, 1.0)]) is None


def monotonic_jump(clock: str) -> tuple[Any, Clock]:
    """A +30 s jump of clock id ``clock`` on n1 of nodes that report their monotonic clock
    (as ZooKeeper's cons does); with the monotonic clock alone their wall clock stays."""
    ctx = context({"clock-pattern": "jump", "clock-id": clock, "clock-offset": 30.0})
    nodes = ctx.cluster
    if clock == "monotonic":
        nodes.read_clock = lambda node: time.time()
    # libfaketime gives a faked monotonic clock a base of its own: only its changes count
    nodes.read_monotonic = lambda node: (time.monotonic() + 1.8e9
                                         + nodes.offsets.get(node.name, 0.0))
    nem = Clock()
    nem.setup(ctx)
    nem.start(ctx, ["n1"])
    return ctx, nem


def test_a_move_of_the_monotonic_clock_is_read_back_where_the_db_reports_it() -> None:
    ctx, nem = monotonic_jump("both")
    started = nem.detail()
    assert started is not None and started["observed-monotonic"]["n1"] == pytest.approx(30.0,
                                                                                        abs=0.1)
    nem.stop(ctx, ["n1"])  # a monotonic clock never goes back: it runs on from +30 s
    stopped = nem.detail()
    assert stopped is not None and stopped["kept"] is True
    assert stopped["observed-monotonic"]["n1"] == pytest.approx(30.0, abs=0.1)
    assert ctx.cluster.offsets["n1"] == 30.0
    ctx.options = {"clock-pattern": "jump", "clock-id": "wall"}
    nem.start(ctx, ["n1"])
    assert "observed-monotonic" not in nem.detail()  # type: ignore[operator]


def test_the_monotonic_clock_alone_is_read_back_from_it_and_the_wall_clock_is_not_moved(
        ) -> None:
    ctx, nem = monotonic_jump("monotonic")
    nodes = ctx.cluster
    started = nem.detail()
    assert started is not None and nodes.moves[-1] == ("n1", 30.0, "monotonic")
    assert started["observed"]["n1"] == pytest.approx(30.0, abs=0.1)
    assert started["observed-monotonic"]["n1"] == pytest.approx(30.0, abs=0.1)
    assert started["observed-wall"]["n1"] == pytest.approx(0.0, abs=0.1)
    nodes.deaf = ("n2",)  # a server the move does not reach: its monotonic clock stays
    with pytest.raises(RuntimeError, match=r"n2: clock offset is [-+]0.00 s, not \+30.00 s"):
        nem.start(ctx, ["n2"])


def test_a_slow_rate_sets_the_wall_clock_behind_steadily() -> None:
    ctx, _, done = ran_on_n1({"clock-pattern": "rate", "clock-rate": 0.5}, 1.0)
    assert -0.55 * done["seconds"] <= done["offset"] <= -0.45
    steps = offsets_of(ctx, "n1")
    assert steps == sorted(steps, reverse=True)  # a slow clock only loses
    assert done["observed-rate"]["n1"] == pytest.approx(0.5, abs=0.1)


def test_a_node_that_cannot_report_its_clock_fails_the_fault_in_one_line() -> None:
    ctx = context({"clock-pattern": "jump"})

    def gone(node: Any) -> float:
        raise ConnectionError("Error 111 connecting to 127.0.0.2:16379.\nConnection refused.")
    ctx.cluster.read_clock = gone
    with pytest.raises(RuntimeError) as e:
        Clock().start(ctx, ["n1"])
    assert str(e.value) == ("n1: cannot read its clock back: Error 111 connecting to "
                            "127.0.0.2:16379. Connection refused.")
