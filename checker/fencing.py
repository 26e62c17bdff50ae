"""The fencing checker: did the protected resource ever accept a stale token?

- **stale accepted** (invalid): in the resource's order, an accepted write whose token is lower
  than one it accepted before, or a write accepted with no token at all.
- **tokens out of order** (invalid): a grant whose acquire began after another grant was
  complete, with a token not greater than that grant's; or two grants with the same token.
- **stale rejected** (the point of fencing): writes the resource refused. Counted.
- **late writes** (informational): writes a holder began after a newer holder had been granted
  the lock; the accepted ones happened before the newer holder's first write, which is safe in
  the resource's order.
"""

from __future__ import annotations

import bisect
from collections.abc import Sequence
from typing import Any

from checker.base import MAX_LISTED, Checker
from checker.lives import Lives
from checker.sessions import (
    Grant,
    by_lock,
    client_pairs,
    entries_by_lock,
    resource_log,
)
from harness.core.heap import gc_paused
from harness.core.history import OK, Op, seconds
from harness.core.text import line


def stale_acceptances(entries: list[Any]) -> tuple[list[dict[str, Any]], int]:
    out: list[dict[str, Any]] = []
    rejected = 0
    highest: Any = None
    for e in entries:
        if e.kind == "read":
            continue  # a read changes nothing: it has no token to check
        if not e.accepted:
            rejected += 1
            continue
        if e.token is None:
            out.append({"seq": e.seq, "process": e.process, "token": None,
                        "explanation": f"the resource accepted process {e.process}'s "
                                       f"{line(e.kind, 40)} (seq {e.seq}) with no token"})
            continue
        if highest is not None and e.token < highest[0]:
            out.append({
                "seq": e.seq, "process": e.process, "token": e.token, "highest": highest[0],
                "explanation": (
                    f"the resource accepted process {e.process}'s {line(e.kind, 40)} with token "
                    f"{e.token} (seq {e.seq}) after accepting token {highest[0]} from process "
                    f"{highest[1]} (seq {highest[2]})"),
            })
        if highest is None or e.token > highest[0]:
            highest = (e.token, e.process, e.seq)
    return out, rejected


def token_order(gs: list[Grant]) -> list[dict[str, Any]]:
    """Grants must be numbered in real-time order: a grant that began after another was
    complete must have a greater token. Equal tokens for two grants are never right."""
    out: list[dict[str, Any]] = []
    with_tokens = [g for g in gs if g.token is not None]
    seen: dict[int, Grant] = {}
    for g in with_tokens:
        if g.token in seen:
            h = seen[g.token]
            out.append({"processes": [h.process, g.process], "token": g.token,
                        "explanation": f"{h.describe()} and {g.describe()} got the same token"})
        else:
            seen[g.token] = g  # type: ignore[index]
    by_start = sorted(with_tokens, key=lambda g: g.start)
    best: Grant | None = None
    i = 0
    for g in sorted(with_tokens, key=lambda g: g.invoke):
        while i < len(by_start) and by_start[i].start < g.invoke:
            h = by_start[i]
            if best is None or h.token > best.token:  # type: ignore[operator]
                best = h
            i += 1
        if best is not None and best is not g and g.token < best.token:  # type: ignore[operator]
            out.append({
                "processes": [best.process, g.process], "tokens": [best.token, g.token],
                "explanation": (f"{g.describe()} began to acquire at {seconds(g.invoke):.2f} s, "
                                f"after {best.describe()} was granted, yet got a lower token"),
            })
    return out


def late_writes(history: Sequence[Op], gs: list[Grant]) -> dict[str, int]:
    """Writes a holder invoked after a grant with a higher token had completed."""
    grant_starts = sorted((g.start, g.token) for g in gs if g.token is not None)
    starts = [s for s, _ in grant_starts]
    best: list[int] = []  # best[i]: the highest token among the first i+1 grants
    for _, t in grant_starts:
        best.append(t if not best else max(best[-1], t))
    from checker.column_pairs import written_tokens

    out = {"accepted": 0, "rejected": 0, "unknown": 0}
    for t, tok, outcome in written_tokens(client_pairs(history)):  # (a write a call: no dict)
        i = bisect.bisect_left(starts, t)
        if i == 0 or best[i - 1] <= tok:
            continue
        out["unknown" if outcome in (None, "info") else
            "accepted" if outcome == OK else "rejected"] += 1
    return out


class FencingChecker(Checker):
    name = "fencing"
    summary = ("stale tokens accepted by the resource, tokens out of grant order, "
               "stale writes rejected")
    figures = {"writes-accepted": "accepted", "stale-rejected": "rejected (stale)",
               "stale-accepted-count": "stale-accepted",
               "token-order-violation-count": "token-order-violation"}
    violations = {"stale-accepted": ("stale write accepted", "stale writes accepted"),
                  "token-order-violations": ("token-order violation", "token-order violations")}

    @staticmethod
    @gc_paused
    def check(history: Sequence[Op]) -> dict[str, Any]:
        lives = Lives.of(history)
        entries, unknown = resource_log(history)
        stale, rejected = [], 0
        for keyed in entries_by_lock(entries):  # each lock's data has its own highest token
            found, refused = stale_acceptances(keyed)
            stale.extend(found)
            rejected += refused
        stale.sort(key=lambda s: s["seq"])
        all_grants = lives.grants
        disorder: list[dict[str, Any]] = []
        for gs in by_lock(all_grants).values():
            disorder.extend(token_order(gs))
        accepted = sum(1 for e in entries if e.accepted and e.kind != "read")
        if stale or disorder:
            valid: bool | str = False
        elif unknown or accepted == 0:
            valid = "unknown"
        else:
            valid = True
        result: dict[str, Any] = {
            "valid": valid,
            "writes-accepted": accepted,
            "stale-rejected": rejected,
            "stale-accepted-count": len(stale),
            "stale-accepted": stale[:MAX_LISTED],
            "token-order-violation-count": len(disorder),
            "token-order-violations": disorder[:MAX_LISTED],
            "late-writes": late_writes(history, all_grants),
            "indeterminate-writes": unknown,
        }
        if accepted == 0:
            result["note"] = "the resource accepted no write: nothing was protected, nothing tested"
        return result
