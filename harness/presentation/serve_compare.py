"""``harness serve``'s compare view: two runs side by side (the same test under two seeds, or
at two commits), field by field, with their verdicts, exit codes and incident counts, the rows
where they differ marked; under them each run's timeline and charts, one above the other on
one time scale, drawn by the report's own page (:func:`report_page`, opened at ``#compare``)
and zoomed and panned together.
"""

from __future__ import annotations

import contextlib
import html
import urllib.parse
from typing import Any

from harness.controller.checking import exit_code
from harness.controller.store import RunDir, Store
from harness.core.errors import HarnessError, UsageError
from harness.core.heap import collector_paused
from harness.core.history_file import read_history
from harness.core.schedule import from_dict
from harness.core.text import verdict_word
from harness.presentation.report.html import render, verdict_class
from harness.presentation.report.incidents import frees_of, incidents
from harness.presentation.report.words import figure_words

e = html.escape
SPEC_FIELDS = ("db", "lock", "workload", "nemesis", "backend", "nodes", "clients", "time_limit",
               "ttl", "seed", "commit")


def read_run(run: RunDir) -> tuple[dict[str, Any], dict[str, Any], list[Any]]:
    """A run's test.json, its results (empty: not checked) and history (empty: unreadable)."""
    test = run.load_test()
    results: dict[str, Any] = {}
    with contextlib.suppress(HarnessError):
        results = run.load_results()
    history: list[Any] = []
    with contextlib.suppress(HarnessError, OSError, ValueError):
        history = read_history(run.path / "history.jsonl")
    return test, results, history


def report_page(run: RunDir) -> bytes:
    """The run's report as the report's renderer draws it today (whatever report.html the run
    kept, if any): the compare view's timeline and charts of it."""
    test, results, history = read_run(run)
    with collector_paused():
        return render(test.get("spec") or {}, history, results, [], test).encode()


def side_of(store: Store, run: RunDir) -> dict[str, Any]:
    """What the compare view shows of one run (read from its directory)."""
    test, results, history = read_run(run)
    spec = test.get("spec") or {}
    try:
        schedule = from_dict(test["schedule"]) if isinstance(test.get("schedule"), dict) else None
    except UsageError:
        schedule = None
    found = incidents(history, results, schedule, frees=frees_of(spec)) if results else []
    checks = {name: c for name, c in (results.get("checks") or {}).items() if isinstance(c, dict)}
    span = history[-1]["time"] / 1e9 if history else None
    return {
        "path": store.relative(run),
        "spec": {k: ("+".join(spec.get(k) or []) or "none") if k == "nemesis" else spec.get(k)
                 for k in SPEC_FIELDS},
        "status": str(test.get("status") or ""),
        "valid": results.get("valid", "unknown") if results else None,
        "exit": exit_code(results) if results else None,
        "duration": None if span is None else f"{span:.1f} s",
        "end": history[-1]["time"] // 1000 if history else 0,  # us
        "ops": len(history),
        "incidents": [inc.title() for inc in found],
        "checks": {name: (c.get("valid"), figure_words(name, c)) for name, c in checks.items()},
        "report": run.report.exists(),
    }


def cell_verdict(valid: Any) -> str:
    if valid is None:
        return '<span class="muted">not checked</span>'
    return f'<span class="chip {verdict_class(valid)}">{verdict_word(valid)}</span>'


def compare_body(sides: list[dict[str, Any]]) -> str:
    a, b = sides
    rows: list[tuple[str, str, str, bool]] = []  # label, a, b, differ

    def add(label: str, x: Any, y: Any, html_x: str | None = None,
            html_y: str | None = None) -> None:
        rows.append((label, html_x if html_x is not None else e("" if x is None else str(x)),
                     html_y if html_y is not None else e("" if y is None else str(y)), x != y))

    q = urllib.parse.quote
    links = [(f'<a href="/runs/{q(s["path"])}/report.html">{e(s["path"])}</a>' if s["report"]
              else e(s["path"])) for s in sides]
    add("run", a["path"], b["path"], *links)
    add("verdict", a["valid"], b["valid"], cell_verdict(a["valid"]), cell_verdict(b["valid"]))
    add("exit", a["exit"], b["exit"])
    add("incidents", len(a["incidents"]), len(b["incidents"]))
    for key in SPEC_FIELDS:
        if a["spec"].get(key) is not None or b["spec"].get(key) is not None:
            add(key, a["spec"].get(key), b["spec"].get(key))
    add("status", a["status"], b["status"])
    add("duration", a["duration"], b["duration"])
    add("ops", a["ops"], b["ops"])
    for name in dict.fromkeys([*a["checks"], *b["checks"]]):
        x, y = a["checks"].get(name), b["checks"].get(name)
        add(f"check {name}", x, y, check_cell(x), check_cell(y))
    body = "".join(
        f'<tr class="{"differs" if differ else "same"}" data-field="{e(label)}"><th>{e(label)}'
        f"</th><td>{x}</td><td>{y}</td></tr>" for label, x, y, differ in rows)
    lists = "".join(
        f"<td><ol>{''.join(f'<li>{e(t)}</li>' for t in s['incidents'])}</ol></td>"
        if s["incidents"] else '<td class="muted">none</td>' for s in sides)
    return ('<p><a href="/">all runs</a> · rows where the two runs differ are marked</p>'
            '<style>tr.differs th{border-left:4px solid #bf8700;padding-left:.4em}'
            "tr.differs td{background:#fff8c5}</style>"
            f'<table id="compare-table"><thead><tr><th></th><th>A</th><th>B</th></tr></thead>'
            f"<tbody>{body}</tbody></table><h2>Incidents</h2><table id=\"compare-incidents\">"
            f"<thead><tr><th>A</th><th>B</th></tr></thead><tbody><tr>{lists}</tr></tbody>"
            f"</table>{timelines(sides)}")


RELAY = """addEventListener("message", function (ev) {  // a frame's height; its view to the other
  document.querySelectorAll("iframe.timeline").forEach(function (f) {
    if (f.contentWindow === ev.source) {
      if (ev.data.compareHeight) f.style.height = ev.data.compareHeight + "px";
    } else if (ev.data.compareView) f.contentWindow.postMessage(ev.data, "*");
  });
});"""


def timelines(sides: list[dict[str, Any]]) -> str:
    """Each run's timeline and charts (:func:`report_page`), A above B, on the time scale of
    the longer run: a second is at the same x in both."""
    end = max(int(s["end"]) for s in sides)
    frames = "".join(
        f'<h3>{k}: {e(s["path"])}</h3><iframe class="timeline" id="timeline-{k}" '
        f'title="{k}: {e(s["path"])}" src="/render/{urllib.parse.quote(s["path"])}'
        f'#compare={end}"></iframe>' for k, s in zip("AB", sides, strict=True))
    return (f'<h2 id="timelines">Timelines</h2><p>Both on one time scale, 0 to {end / 1e6:.1f} s '
            "(the longer run's end): zooming or panning either moves the other.</p>"
            '<style>iframe.timeline{display:block;width:100%;height:30em;border:0}</style>'
            f"{frames}<script>{RELAY}</script>")


def check_cell(value: tuple[Any, str] | None) -> str:
    if value is None:
        return '<span class="muted">not run</span>'
    valid, facts = value
    return cell_verdict(valid) + (f' <span class="muted">{e(facts)}</span>' if facts else "")
