"""The lost-update checker for the ``counter`` workload: the damage a broken lock does.

Every increment the resource applied carries the value it was computed from (``from``) and the
value it wrote (``to``). Serialised by a working lock, the applied increments form one chain
0 -> 1 -> 2 -> ...; each time two clients were inside at once, both read the same value and
wrote the same successor, and one increment vanished. Lost updates = increments applied minus
the final value. Acknowledged increments (the client saw ok) missing from the final value are
the ones a user would notice. Pure.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence
from typing import Any

from checker.sessions import client_ops, final_read
from harness.history import INFO, OK, Op, pairs

MAX_LISTED = 50


def check(history: Sequence[Op], spec: dict[str, Any] | None = None) -> dict[str, Any]:
    acked = unknown = 0
    for inv, done in pairs(client_ops(history)):
        if inv["f"] != "write" or (inv.get("value") or {}).get("kind") != "increment":
            continue
        if done is not None and done["type"] == OK:
            acked += 1
        elif done is None or done["type"] == INFO:
            unknown += 1
    log = final_read(history)
    if log is None:
        return {"valid": "unknown", "acknowledged": acked, "indeterminate": unknown,
                "note": "the resource was never read back (the run was cut short)"}
    applied = sorted((e for e in log if e.get("kind") == "increment" and e.get("accepted")),
                     key=lambda e: e["seq"])
    final = applied[-1]["to"] if applied else 0
    by_target: dict[int, list[dict[str, Any]]] = defaultdict(list)
    for e in applied:
        by_target[e["to"]].append(e)
    collisions = [
        {"value": to, "processes": [e["process"] for e in es], "seqs": [e["seq"] for e in es],
         "explanation": (f"processes {', '.join(str(e['process']) for e in es)} all read "
                         f"{to - 1} and wrote {to}: {len(es) - 1} increment(s) lost")}
        for to, es in sorted(by_target.items()) if len(es) > 1
    ]
    lost = len(applied) - final
    return {
        "valid": lost == 0,
        "final-value": final,
        "increments-applied": len(applied),
        "acknowledged": acked,
        "indeterminate": unknown,
        "lost-update-count": lost,
        "acknowledged-missing": max(0, acked - final),
        "lost-updates": collisions[:MAX_LISTED],
    }
