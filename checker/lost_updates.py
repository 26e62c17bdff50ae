"""The lost-update checker for the ``counter`` workload: the damage a broken lock does.

Every increment the resource applied carries the value it was computed from (``from``) and the
value it wrote (``to``). Serialised by a working lock, the applied increments form one chain
0 -> 1 -> 2 -> ..., each starting where the previous one ended; each time a client wrote from a
value it read before another client's increments, the chain breaks and those increments
vanish (two clients inside at once). Lost updates = increments applied minus
the final value. Acknowledged increments (the client saw ok) missing from the final value are
the ones a user would notice. Pure.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from checker.base import MAX_LISTED, Checker
from checker.lives import Lives
from checker.sessions import final_read
from harness.core.history import Op


def moved(before: int, after: int) -> str:
    if after == before:
        return f"stayed at {before}"
    return f"went {'back' if after < before else 'forward'} by {abs(after - before)}"


class LostUpdatesChecker(Checker):
    name = "lost-updates"
    summary = "increments of the counter workload lost to overlapping holders"
    figures = {"lost-update-count": "lost-update"}
    violations = {"lost-updates": ("lost update", "lost updates")}

    @staticmethod
    def check(history: Sequence[Op]) -> dict[str, Any]:
        from checker.column_pairs import increments

        acked, unknown = increments(Lives.of(history).paired)
        log = final_read(history)
        if log is None:
            return {"valid": "unknown", "acknowledged": acked, "indeterminate": unknown,
                    "note": "the resource was never read back (the run was cut short)"}
        applied = sorted((e for e in log if e.get("kind") == "increment" and e.get("accepted")),
                         key=lambda e: e["seq"])
        finals: dict[str, int] = {}  # each lock's counter: its last increment's result
        breaks = []
        for e in applied:  # serialised, each increment starts from the previous one's result
            key = str(e.get("lock", "lock"))
            counter = finals.get(key, 0)
            if e["from"] != counter:
                lost_here = counter - e["from"]
                breaks.append({
                    "seq": e["seq"], "process": e["process"], "read": e["from"], "over": counter,
                    "lost": lost_here,
                    "explanation": (f"process {e['process']} wrote {e['to']} (seq {e['seq']}), "
                                    f"computed from {e['from']} it had read earlier, over "
                                    f"{counter}: the counter {moved(counter, e['to'])} instead of "
                                    "going up by 1"),
                })
            finals[key] = e["to"]
        final = sum(finals.values())
        lost = len(applied) - final
        return {
            "valid": lost == 0,
            "final-value": final,
            "increments-applied": len(applied),
            "acknowledged": acked,
            "indeterminate": unknown,
            "lost-update-count": lost,
            "acknowledged-missing": max(0, acked - final),
            "lost-updates": breaks[:MAX_LISTED],
        }
