"""How often a failover loses the lock: for each ``failover`` fault in the given runs, was the
lock held when the primary was cut off granted to somebody else while its lease still ran?

    .venv/bin/python bench/failover_loss.py RUN_DIR... [--json]

Per failover, from the history alone: the grant that was in force when the cut began (its holder
is the client the nemesis kept with the old primary), the end of its lease, and the first grant
to another client after the cut. The lease was *broken* (the lock lost by the service, not
outlived by its holder) when that grant came before the lease's end. The history bounds that
end: the server set the lease after the acquire was invoked and before it returned, so it ends
between ``invoke + validity`` (**lost**: certainly broken) and ``ok + validity``
(**lost-likely**: broken if the lease was set when the acquire returned, as it nearly is for a
lock that polls: its successful attempt is its last, a round trip before it returns). An
acquire that waited long makes the two far apart. Also per run: the mutex checker's overlaps and
broken leases (which count the split brain too: the holder goes on taking the lock on the old
primary while the others take it on the new one).
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

NS = 1_000_000_000


def load(run_dir: Path) -> list[dict[str, Any]]:
    return [json.loads(x) for x in (run_dir / "history.jsonl").read_text().splitlines()]


def grants(history: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Acquires that completed ok: process, invoked, granted, released (None: never)."""
    out, invoked, holding = [], {}, {}
    for op in history:
        p = op.get("process")
        if not isinstance(p, int):
            continue
        if op["f"] == "acquire" and op["type"] == "invoke":
            invoked[p] = op["time"]
        elif op["f"] == "acquire" and op["type"] == "ok":
            value = op.get("value") or {}
            g = {"process": p, "invoked": invoked.get(p, op["time"]), "granted": op["time"],
                 "released": None, "validity": value.get("validity")}
            out.append(g)
            holding[p] = g
        elif op["f"] == "release" and op["type"] == "invoke" and p in holding:
            holding.pop(p)["released"] = op["time"]
    return out


def failovers(run_dir: Path) -> list[dict[str, Any]]:
    history = load(run_dir)
    gs = grants(history)
    out = []
    for op in history:
        if not (op.get("process") == "nemesis" and op["f"] == "failover"
                and op["type"] == "info" and op["value"] == "start" and not op.get("error")):
            continue
        cut = op["time"]
        kept = [int(x[1:]) for x in (op.get("detail") or {}).get("kept-with-it", [])]
        held = [g for g in gs if g["granted"] <= cut and (g["released"] is None
                                                          or g["released"] > cut)
                and g["process"] in kept]
        row: dict[str, Any] = {"at-s": round(cut / NS, 3), "holder": kept}
        if not held or held[-1]["validity"] is None:
            row["held-at-cut"] = False
            out.append(row)
            continue
        g = held[-1]
        lease_end = g["invoked"] + int(float(g["validity"]) * NS)
        likely_end = g["granted"] + int(float(g["validity"]) * NS)
        nxt = next((h for h in gs if h["granted"] > cut and h["process"] != g["process"]),
                   None)
        row.update({"held-at-cut": True, "lease-ends-s": [round(lease_end / NS, 3),
                                                           round(likely_end / NS, 3)],
                    "next-grant-s": None if nxt is None else round(nxt["granted"] / NS, 3),
                    "lost": nxt is not None and nxt["granted"] < lease_end,
                    "lost-likely": nxt is not None and nxt["granted"] < likely_end})
        out.append(row)
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("runs", nargs="+", type=Path)
    ap.add_argument("--json", action="store_true")
    a = ap.parse_args()
    rows = []
    for run_dir in a.runs:
        results = json.loads((run_dir / "results.json").read_text())
        mutex = results["checks"]["mutex"]
        fos = failovers(run_dir)
        rows.append({"run": str(run_dir), "valid": results["valid"], "failovers": len(fos),
                     "held-at-cut": sum(1 for f in fos if f.get("held-at-cut")),
                     "lost-at-failover": sum(1 for f in fos if f.get("lost")),
                     "lost-likely": sum(1 for f in fos if f.get("lost-likely")),
                     "overlaps": mutex["lock-overlap-count"],
                     "lease-broken": mutex.get("lease-broken-count"), "detail": fos})
    if a.json:
        print(json.dumps(rows, indent=1))
    else:
        for r in rows:
            print(f"{r['run']}: valid={r['valid']} failovers={r['failovers']} "
                  f"held-at-cut={r['held-at-cut']} lost-at-failover={r['lost-at-failover']} "
                  f"lost-likely={r['lost-likely']} "
                  f"overlaps={r['overlaps']} lease-broken={r['lease-broken']}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
