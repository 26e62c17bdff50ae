"""Hypothesis histories of lock clients under faults, for the differential tests of the readers
that have a columnar path (a ColumnHistory must read as its dicts): fault windows that claim
what they should show (a pause's ``frozen``, a partition's ``cut-off``, a delay's ``slowed``,
a stall, ``completes``, a power loss's ``dropped``, a client clock's ``clock-moved``, and
what the stop's detail read back or counted), starts that failed, heals, crashes of
clients (``detail.crashed``), pending ops, fails and infos with errors, several locks, tokens,
writes, and the final read (a list value: never columns)."""

from __future__ import annotations

from typing import Any

from hypothesis import strategies as st

MS = 1_000_000
EXPECTS = ("frozen", "cut-off", "slowed", "stalled", "completes", "dropped", "clock-moved",
           None)
# what a nemesis read back or counted, in its stop's detail: a client's clock, a stall's grants
DETAILS = ({}, {"observed": dict.fromkeys("0123", 4.0)}, {"observed": {"0": 0.0}},
           {"observed-rate": dict.fromkeys("0123", 5.0)}, {"observed-rate": {"1": 1.0}},
           {"late-grants": {"delivered": 0, "dropped": 1}, "grant-held-s": 3.0},
           {"late-grants": {"delivered": 1, "dropped": 0}, "grant-held-s": 0.001})


def _expect(draw: Any, kind: str | None, p: int) -> dict[str, Any]:
    if kind is None:
        return {}
    if kind in ("frozen", "cut-off", "completes"):
        return {kind: [p]}
    if kind == "slowed":
        return {kind: {"processes": [p], "at-least": draw(st.sampled_from([0.002, 0.02]))}}
    if kind == "stalled":
        return {kind: {"processes": [p], "seconds": draw(st.sampled_from([0.004, 0.05]))}}
    if kind == "clock-moved":
        return {kind: {"processes": [p], **draw(st.sampled_from([{"offset": 4.0},
                                                                 {"rate": 5.0}]))}}
    return {"dropped": draw(st.sampled_from([0, 10]))}


@st.composite
def fault_histories(draw: Any, max_steps: int = 60) -> list[dict[str, Any]]:
    """A merged history (in time order, each op's ``index`` its place)."""
    unit = draw(st.sampled_from([MS, 400 * MS]))  # ms: windows and grace; 0.4 s: stuck locks
    clients = draw(st.integers(1, 4))
    ops: list[dict[str, Any]] = []
    t = 0
    open_: dict[int, dict[str, Any]] = {}  # process -> its pending invoke
    crashed: set[int] = set()
    faults: dict[str, dict[str, Any]] = {}  # f -> its start's info
    seq = 0
    tokens = 0
    locks = draw(st.sampled_from([["lock"], ["lock", "b"], [None]]))
    for _ in range(draw(st.integers(0, max_steps))):
        t += draw(st.integers(0, 6)) * unit // 2
        kind = draw(st.integers(0, 11))
        if kind == 0:  # a fault starts (or fails to)
            f = draw(st.sampled_from(["pause", "partition", "delay", "stall", "power"]))
            if f in faults:
                continue
            p = draw(st.integers(0, clients - 1))
            targets = draw(st.sampled_from([[f"c{p}"], ["n1"], []]))
            step = draw(st.sampled_from([0, 1, None]))
            ops.append({"time": t, "process": "nemesis", "type": "invoke", "f": f,
                        "value": "start", "step": step, "targets": targets})
            info = {"time": t + draw(st.integers(0, 2)) * MS, "process": "nemesis",
                    "type": "info", "f": f, "value": "start", "step": step,
                    "targets": targets, "expect": _expect(draw, draw(st.sampled_from(EXPECTS)),
                                                          p)}
            if draw(st.integers(0, 7)) == 0:
                info["error"] = "could not"
            else:
                faults[f] = info
            t = info["time"]
            ops.append(info)
        elif kind == 1 and faults:  # a fault stops, or everything heals
            f = draw(st.sampled_from(sorted(faults)))
            start = faults.pop(f)
            if draw(st.integers(0, 4)) == 0:
                ops.append({"time": t, "process": "nemesis", "type": "info", "f": f,
                            "value": "heal"})
                continue
            for ty in ("invoke", "info"):
                ops.append({"time": t, "process": "nemesis", "type": ty, "f": f,
                            "value": "stop", "step": start["step"],
                            "targets": start["targets"]})
            ops[-1]["detail"] = draw(st.sampled_from(DETAILS))
        elif kind == 2 and draw(st.integers(0, 2)) == 0:  # a client crashes
            p = draw(st.integers(0, clients - 1))
            if p in crashed:
                continue
            crashed.add(p)
            ops.append({"time": t, "process": "nemesis", "type": "info", "f": "crash-client",
                        "value": "start", "targets": [f"c{p}"],
                        "detail": {"crashed": True}})
        else:  # a client op
            p = draw(st.integers(0, clients - 1))
            if p in crashed:
                continue
            op: dict[str, Any] = {"time": t, "process": p}
            inv = open_.pop(p, None)
            if inv is None:
                f = draw(st.sampled_from(["acquire", "acquire", "release", "extend", "write"]))
                op |= {"type": "invoke", "f": f}
                if f == "acquire":
                    op["value"] = draw(st.sampled_from([None, {"timeout": 0.01},
                                                        {"timeout": 2.0}]))
                else:
                    op["value"] = None
                lock = draw(st.sampled_from(locks))
                if lock is not None:
                    op["lock"] = lock
                open_[p] = op
            else:
                ty = draw(st.sampled_from(["ok", "ok", "ok", "fail", "info"]))
                op |= {"type": ty, "f": inv["f"]}
                if inv["f"] == "acquire" and ty == "ok":
                    tokens += 1
                    op["value"] = {"session": tokens, "validity": 1.5}
                    op["token"] = tokens
                elif inv["f"] == "write" and ty in ("ok", "fail"):
                    seq += 1
                    op["value"] = {"seq": seq, "kind": "write", "session": tokens}
                else:
                    op["value"] = None
                if "lock" in inv:
                    op["lock"] = inv["lock"]
                if ty != "ok":
                    op["error"] = draw(st.sampled_from(["timeout", "refused", "x" * 40]))
            ops.append(op)
    if draw(st.booleans()):  # the final read, by process ``clients``
        t += unit
        log = [{"seq": s, "process": 0, "kind": "write", "token": s, "accepted": s % 3 != 0,
                "lock": "lock"} for s in range(1, seq + 1)]
        ops.append({"time": t, "process": clients, "type": "invoke", "f": "read",
                    "value": None})
        ops.append({"time": t + MS, "process": clients, "type": "ok", "f": "read",
                    "value": log})
    ops.sort(key=lambda o: o["time"])  # as the merge: stable, by time
    return [{"index": i, **o} for i, o in enumerate(ops)]
