"""The resource's own order beside the clients' view, for report.html: around each write a
checker named (an interleaving, a stale write accepted) and each write the resource rejected,
the writes in the order the resource numbered them (its ``seq``), one column per client, each
with when its client saw it complete.

Static HTML from the history and the results (the resource log read back at the end, as the
checkers read it: :func:`checker.sessions.resource_log`).
"""

from __future__ import annotations

import html
from collections.abc import Sequence
from typing import Any

from checker.sessions import Entry, resource_log
from harness.core.history import Op
from harness.presentation.report.model import explained_items, places_of, walk

e = html.escape
AROUND = 3  # writes shown before and after each one of interest
MAX_ROWS = 300


def named_seqs(results: dict[str, Any]) -> dict[int, int]:
    """Resource seq -> the number of the (first) violation that names it."""
    out: dict[int, int] = {}
    for x in explained_items(results):
        for key, value in [("seq", x.item.get("seq")), *walk(x.item)]:
            if key in ("seq", "seqs"):
                for s in value if isinstance(value, list) else [value]:
                    if isinstance(s, int) and not isinstance(s, bool):
                        out.setdefault(s, x.n)
    return out


def rows_of(entries: list[Entry], focus: set[int]) -> list[int | None]:
    """Positions in ``entries`` to show (None: a gap), around the focused seqs."""
    keep: set[int] = set()
    for k, entry in enumerate(entries):
        if entry.seq in focus:
            keep.update(range(max(0, k - AROUND), min(len(entries), k + AROUND + 1)))
    out: list[int | None] = []
    for k in sorted(keep):
        if out and out[-1] is not None and k != out[-1] + 1:
            out.append(None)
        out.append(k)
        if len(out) >= MAX_ROWS:
            break
    return out


def section(history: Sequence[Op], results: dict[str, Any]) -> str:
    entries, _unknown = resource_log(history)
    entries = [x for x in entries if x.kind != "read"]
    if not entries:
        return ""
    named = named_seqs(results)
    rejected = {x.seq for x in entries if not x.accepted}
    focus = set(named) | rejected
    if not focus:
        return ""
    times = places_of(history).writes  # write_times of the client pairs, kept
    procs = sorted({x.process for x in entries})
    head = "".join(f"<th>p{p}</th>" for p in procs)
    rows: list[str] = []
    shown = rows_of(entries, focus)
    for k in shown:
        if k is None:
            rows.append(f'<tr class="gap"><td colspan="{len(procs) + 2}">…</td></tr>')
            continue
        x = entries[k]
        seen = times.get(x.seq)
        done = None if seen is None else seen[1]
        note = []
        if x.seq in named:
            n = named[x.seq]
            note.append(f'<a href="#violation-{n}">violation {n}</a>')
        if not x.accepted:
            note.append("rejected: stale token")
        tok = "" if x.token is None else f" token {x.token}"
        what = f"{x.kind}{tok}" + ("" if x.accepted else " ✕")
        when = "" if done is None else f" <small>{done / 1e6:.3f} s</small>"
        cells = "".join(
            f'<td class="{"rej" if not x.accepted else "acc"}">{e(what)}{when}</td>'
            if p == x.process else "<td></td>" for p in procs)
        cls = "named" if x.seq in named else "rejected" if not x.accepted else ""
        rows.append(f'<tr class="{cls}" data-seq="{x.seq}"><td>{x.seq}</td>{cells}'
                    f"<td>{'; '.join(note)}</td></tr>")
    return ('<section id="resource-order"><h2>Resource order</h2><p>The writes around each '
            "one a checker names and each one the resource rejected, in the resource's own "
            "order (its sequence number, top to bottom), one column per client, with when the "
            "client saw the write complete: the clients' view beside the resource's.</p>"
            '<table class="resource-order"><thead><tr><th>seq</th>'
            f"{head}<th></th></tr></thead><tbody>{''.join(rows)}</tbody></table></section>")
