"""The lost-update checker: serial increments pass, colliding ones are counted and named."""

from __future__ import annotations

from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from checker import lost_updates

MS = 1_000_000


def history(increments: list[tuple[int, int, str]]) -> list[dict[str, Any]]:
    """(process, read value, outcome) per increment, in the resource's order."""
    ops: list[dict[str, Any]] = []
    log = []
    t = 0
    for seq, (p, read, outcome) in enumerate(increments, 1):
        value = {"kind": "increment", "session": seq, "from": read, "to": read + 1}
        t += MS
        ops.append({"time": t, "process": p, "type": "invoke", "f": "write", "value": value})
        t += MS
        ops.append({"time": t, "process": p, "type": outcome, "f": "write",
                    "value": {**value, "seq": seq}})
        log.append({"seq": seq, "process": p, "session": seq, "kind": "increment",
                    "from": read, "to": read + 1, "accepted": True})
    ops.append({"time": t + MS, "process": 99, "type": "invoke", "f": "read"})
    ops.append({"time": t + 2 * MS, "process": 99, "type": "ok", "f": "read", "value": log})
    return [{"index": i, **o} for i, o in enumerate(ops)]


outcomes = st.sampled_from(["ok", "ok", "ok", "info"])


@settings(max_examples=200, deadline=None)
@given(st.lists(st.tuples(st.integers(0, 4), outcomes), min_size=1, max_size=30))
def test_serial_increments_lose_nothing(steps: list[tuple[int, str]]) -> None:
    h = history([(p, i, outcome) for i, (p, outcome) in enumerate(steps)])
    r = lost_updates.LostUpdatesChecker.check(h)
    assert r["valid"] is True and r["lost-update-count"] == 0
    assert r["final-value"] == len(steps)


@settings(max_examples=200, deadline=None)
@given(st.lists(st.tuples(st.integers(0, 4), outcomes), min_size=2, max_size=30), st.data())
def test_two_clients_reading_the_same_value_lose_one(
        steps: list[tuple[int, str]], data: st.DataObject) -> None:
    k = data.draw(st.integers(1, len(steps) - 1))
    reads = list(range(len(steps)))
    # from k on, every client read one less: increment k collided with increment k-1
    incs = [(p, reads[i] - (1 if i >= k else 0), outcome) for i, (p, outcome) in enumerate(steps)]
    r = lost_updates.LostUpdatesChecker.check(history(incs))
    assert r["valid"] is False
    assert r["lost-update-count"] == 1
    assert r["lost-updates"][0]["seq"] == k + 1
    assert "stayed at" in r["lost-updates"][0]["explanation"]


def test_without_the_final_read_it_is_unknown() -> None:
    h = history([(0, 0, "ok")])[:-2]
    assert lost_updates.LostUpdatesChecker.check(h)["valid"] == "unknown"
