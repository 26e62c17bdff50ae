"""The linearization view of report.html: for each linearizability witness, the prefix the
search found, in order, with the model's state after each op; then the op that cannot be
placed after it; then the ops concurrent with that op (Porcupine draws the same story).

Static HTML from the checker's witness (:mod:`checker.witness`): readable without the script.
"""

from __future__ import annotations

import html
from typing import Any

from harness.presentation.report.model import explained_items
from harness.presentation.report.words import inline

e = html.escape
VALUE_CHARS = 80


def witnesses(results: dict[str, Any]) -> list[tuple[int, str, dict[str, Any]]]:
    """(violation number, check, witness) of every witness that lists its linearization."""
    return [(x.n, x.check, x.item) for x in explained_items(results)
            if x.kind == "witness" and isinstance(x.item.get("linearization"), list)]


def short(value: Any) -> str:
    return "" if value is None else inline(value, VALUE_CHARS)


def when(op: dict[str, Any]) -> str:
    done = op.get("completed_s")
    end = "unknown" if done is None else f"{done:.3f}"
    return f"{op.get('invoked_s', 0):.3f} – {end} s"


def row(cls: str, position: str, op: dict[str, Any], state: str) -> str:
    outcome = str(op.get("type", ""))
    if op.get("output") is not None:
        outcome += f" {short(op['output'])}"
    return (f'<tr class="{cls}" data-index="{e(str(op.get("index")))}"><td>{e(position)}</td>'
            f"<td>p{e(str(op.get('process')))}</td><td>{e(str(op.get('f')))} "
            f"{e(short(op.get('value')))}</td><td>{e(outcome)}</td><td>{e(when(op))}</td>"
            f"<td>{e(str(op.get('index')))}</td><td>{e(state)}</td></tr>")


def one(n: int, check: str, w: dict[str, Any]) -> str:
    rows: list[str] = []
    first = int(w.get("linearization_from") or 0)
    prefix_len = first + len(w["linearization"])
    if first:
        rows.append(f'<tr class="lin-skipped"><td colspan="7">… the first {first:,} ops of the '
                    "prefix are not listed</td></tr>")
    for k, op in enumerate(w["linearization"]):
        rows.append(row("lin-prefix", str(first + k + 1), op, str(op.get("state", ""))))
    blocked = w.get("blocked_op")
    if isinstance(blocked, dict):
        rows.append(row("lin-blocked", "✗", blocked,
                        f"cannot be placed when {w.get('prefix_state', '?')}"))
    concurrent = w.get("concurrent_ops") or []
    for op in concurrent:
        rows.append(row("lin-concurrent", "‖", op, "concurrent: could go first, does not help"))
    more = len(w.get("concurrent") or []) - len(concurrent)
    older = int(w.get("older_indeterminate") or 0)
    notes = []
    if more > 0:
        notes.append(f"{more} more concurrent ops are not listed")
    if older:
        notes.append(f"{older} older ops with unknown outcomes were pending all along")
    note = f'<p class="note">{e("; ".join(notes))}.</p>' if notes else ""
    lock = f" on lock {short(w['lock'])}" if w.get("lock") is not None else ""
    return (f'<h3>{e(check)}{e(lock)}: <a href="#violation-{n}">violation {n}</a></h3>'
            f"<p>The longest linearizable prefix the search found ({prefix_len:,} of "
            f"{w.get('part_ops', '?')} ops), in the order it placed them, with the model's "
            "state after each; then the op no order can place after it (✗) and the ops "
            "concurrent with that op (‖).</p>"
            '<table class="linearization"><thead><tr><th>#</th><th>process</th><th>op</th>'
            "<th>outcome</th><th>invoked – completed</th><th>index</th><th>state after</th>"
            f"</tr></thead><tbody>{''.join(rows)}</tbody></table>{note}")


def section(results: dict[str, Any]) -> str:
    found = witnesses(results)
    if not found:
        return ""
    return ('<section id="linearization"><h2>Linearization</h2>'
            + "".join(one(n, check, w) for n, check, w in found) + "</section>")
