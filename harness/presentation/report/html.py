"""report.html: one self-contained page a person reads at a glance (no network, opens from disk).

What is on it, top to bottom: a verdict banner with one chip per checker; a timeline (one lane
per client process, each op a bar from invoke to completion coloured ok / fail / info, info
running on to the end; lock-held spans; fault windows shaded across every lane and labelled
in their nemesis's words, shortened to fit; every violation outlined, flagged (no flag covers
another) and linked to its explanation; waiting acquires hollow; writes the resource rejected
crossed), with zoom, pan, hover, a clicked op's details kept in a panel that prints, and "save
as PNG" (``harness report RUN --png FILE``: :mod:`.png`); under it, on its time axis,
throughput and latency charts (:mod:`.charts`, drawn by ``assets/charts.js``); every violation
in words; the linearization of each witness (:mod:`.linearization`); the resource's order
beside the clients' (:mod:`.resource_order`); each checker's facts; the fault schedule; the
spec, seed and the command that replays it; links to the node logs and the raw files. Every
value is in words (:func:`.words.inline`), never JSON or a repr; a list or table longer than
10 rows shows 6 and a button that says how many there are.

The static parts are plain HTML, readable without JavaScript; the timeline and charts are drawn
on canvas from the JSON model of :mod:`harness.presentation.report.model`, which is where the
decisions that keep a 100,000-op report small and fast are made (and stated on the page). The
CSS and the script are real files (``assets/``), read with ``importlib.resources`` and inlined,
so the page needs nothing but itself: no CDN, no network, it opens from disk.
"""

from __future__ import annotations

import html
import json
import shlex
from functools import cache
from importlib import resources
from typing import Any

from harness.core.errors import UsageError
from harness.core.schedule import from_dict
from harness.core.text import verdict_word
from harness.presentation.report import model as report_model
from harness.presentation.report import narrative
from harness.presentation.report.incidents import Incident, frees_of, incidents
from harness.presentation.report.linearization import section as linearization_section
from harness.presentation.report.resource_order import section as resource_order_section
from harness.presentation.report.words import figure_words, inline

VERDICT_CLASS = {True: "v-true", False: "v-false"}
PAGE_BYTES = 1_950_000  # the page's ceiling: past it, fewer op pairs are embedded one by one
JSON_ITEMS = 20  # items of a list of a check's result the page shows (results.json has all)
JSON_CHARS = 40_000  # characters of one list of a check's result on the page
LINKS = 20  # an incident's links to its violations shown before "and N more" (opens the rest)

e = html.escape


@cache
def asset(name: str) -> str:
    """A file of ``assets/`` (the report's CSS and script), as text."""
    return resources.files("harness.presentation.report").joinpath("assets", name).read_text(
        encoding="utf-8")


def verdict_class(valid: Any) -> str:
    return VERDICT_CLASS.get(valid, "v-unknown")


def title_of(spec: dict[str, Any]) -> str:
    nem = "+".join(spec.get("nemesis") or []) or "none"
    return f"{spec.get('lock')} / {spec.get('workload')} / {nem}"


def replay_command(spec: dict[str, Any]) -> str:
    """The ``harness run`` line that repeats this test (same spec, same seed)."""
    args = ["harness", "run"]
    for key in ("db", "lock", "workload", "backend", "nodes", "clients", "time_limit", "ttl",
                "seed"):
        if spec.get(key) is not None:
            args += [f"--{key.replace('_', '-')}", f"{spec[key]:g}" if isinstance(
                spec[key], float) else str(spec[key])]
    args += ["--nemesis", ",".join(spec.get("nemesis") or []) or "none"]
    return shlex.join(args)


# sections -----------------------------------------------------------------------------------------
ENDED = {"starting": ("KILLED", "did not finish (killed, or its machine stopped)"),
         "interrupted": ("INTERRUPTED", "was interrupted before its end"),
         "error": ("ERRORED", "ended with an error")}


def status_badge(test: dict[str, Any], results: dict[str, Any]) -> str:
    """How the run ended when it did not complete (killed, interrupted, errored), whatever the
    verdict: a run cut short is never read as a whole one."""
    status = str(test.get("status") or results.get("status") or "complete")
    if status == "complete":
        return ""
    word, what = ENDED.get(status, (status.upper(), f"ended as {status}"))
    return (f'<span class="status" data-status="{e(status)}">{e(word)}: the run {e(what)}'
            "</span>")


def banner(spec: dict[str, Any], results: dict[str, Any],
           test: dict[str, Any] | None = None) -> str:
    valid = results.get("valid")
    chips = []
    for name, check in (results.get("checks") or {}).items():
        if not isinstance(check, dict):
            continue
        facts = figure_words(name, check)
        chips.append(f'<a class="chip {verdict_class(check.get("valid"))}" href="#check-{e(name)}"'
                     f'>{e(name)} {verdict_word(check.get("valid"))}'
                     f'{f" <span>· {e(facts)}</span>" if facts else ""}</a>')
    return (f'<header class="banner {verdict_class(valid)}"><span class="word">'
            f'{verdict_word(valid)}</span><span class="title">{e(title_of(spec))}</span>'
            f'<span>db {e(str(spec.get("db")))}</span>{status_badge(test or {}, results)}'
            '</header>'
            f'<nav class="chips">{"".join(chips)}</nav>')


STATUS_WORDS = {"complete": "complete", "interrupted": "interrupted",
                "error": "ended with an error", "starting": "did not finish (killed?)"}


def meta(spec: dict[str, Any], history: list[dict[str, Any]], test: dict[str, Any],
         results: dict[str, Any] | None = None) -> str:
    parts = [f"{spec.get('clients')} clients", f"{spec.get('nodes')} node(s)",
             f"{spec.get('time_limit')} s", f"ttl {spec.get('ttl')} s",
             f"seed {spec.get('seed')}", f"{len(history):,} ops"]
    status = test.get("status")
    if status:
        parts.append(f"status: {STATUS_WORDS.get(str(status), str(status))}")
    if test.get("run_id"):
        parts.append(f"run {test['run_id']}")
    out = f'<p class="meta">{e(" · ".join(parts))}</p>'
    if test.get("error"):
        out += f'<p class="note">The run ended with an error: {e(str(test["error"]))}</p>'
    for key, what in (("unfinished", "Did not finish"), ("could-not-test", "Could not test")):
        if (results or {}).get(key):
            out += f'<p class="note">{what}: {e(inline(results[key], 2000))}</p>'  # type: ignore[index]
    for name in (results or {}).get("crashed-checkers") or []:
        err = ((results or {}).get("checks") or {}).get(name, {}).get("error", "")
        out += f'<p class="note">Checker {e(name)} could not check: {e(inline(err, 2000))}</p>'
    return out


def timeline(model: dict[str, Any]) -> str:
    s = model["sampling"]
    if s["decimated"]:
        embedded = (f"This history has {s['pairs']:,} client op pairs; the page embeds "
                    f"{s['embedded']:,} of them one by one ({e(s['rule'])}) and draws the others "
                    "as density: per lane and column, which outcomes happened. The charts are "
                    "computed from every op.")
    else:
        embedded = f"All {s['pairs']:,} client op pairs are embedded."
    if s.get("detailsCut"):
        embedded += (f" {s['detailsCut']:,} of the embedded pairs have no hover detail (the "
                     "page keeps those nearest the violations and fault boundaries; "
                     "history.jsonl has every one).")
    rejected = model["rejected"]
    if rejected.get("total", 0) > len(rejected["seq"]):
        embedded += (f" The resource rejected {rejected['total']:,} writes; the first "
                     f"{len(rejected['seq']):,} are drawn.")
    marks = "".join(
        f'<a class="vmark" id="vm-{v["n"]}" href="#v-{v["n"]}" style="display:none" '
        f'title="violation {v["n"]}">{v["n"]}</a>'
        for v in model["violations"] if v["t0"] is not None and not v["info"])
    return f"""<section id="timeline"><h2>Timeline</h2>
<div class="controls"><button id="zoom-in" title="zoom in">+</button>
<button id="zoom-out" title="zoom out">−</button><button id="zoom-fit">fit</button>
<button id="pan-left" title="pan left">◀</button><button id="pan-right" title="pan right">▶</button>
<button id="save-png" title="the timeline and its charts as one image, to paste into an issue"
>save as PNG</button><span class="win" id="window"></span></div>
<div class="tl-wrap"><div id="markers">{marks}</div><div class="plot">
<canvas id="timeline-canvas"></canvas><div id="fault-labels"></div></div></div>
<noscript><p class="note">The timeline and the charts are drawn by the page's script; everything
else on the page reads without it.</p></noscript>
<div id="callout" hidden><div class="head"></div><div class="expl"></div>
<button class="prev">‹ previous</button> <button class="next">next ›</button>
<a class="list" href="#violations">in the list ↓</a></div>
<div id="op-panel" hidden><div class="head">Selected (click an op or a fault to show its
details here)</div><div class="lines"></div></div>
<div class="legend"><span><i style="background:var(--ok)"></i>ok</span>
<span><i style="background:var(--fail)"></i>fail</span>
<span><i style="background:var(--info)"></i>info: unknown outcome (dashed on to the end)</span>
<span><i style="background:var(--held)"></i>holds the lock (acquire ok → release invoked)</span>
<span><i style="border:2px dashed var(--ok)"></i>waiting to acquire</span>
<span><i style="background:var(--fault)"></i>fault window</span>
<span><b style="color:#82071e">✕</b> write the resource rejected (stale token)</span>
<span><i style="border:2px solid var(--bad);background:#cf222e22"></i>violation</span></div>
<p class="mode">Drag to pan, wheel to zoom, double-click to fit; hover for op details, click an
op to keep them under the timeline; click a red flag for its explanation. {embedded}
<span id="mode"></span></p></section>"""


def charts(model: dict[str, Any]) -> str:
    """The charts' section; drawn by ``assets/charts.js`` on the timeline's time axis."""
    bucket = model["series"]["width"] / 1e6
    if model.get("latencyGrid"):
        ops = ("each cell counts the ops invoked in it (the page does not embed this run op by "
               "op); the darker, the more")
    else:
        ops = "one point per op at its invocation"
    return f"""<section id="charts"><h2>Throughput and latency</h2>
<p class="mode">On the timeline's time axis: zooming or panning either moves both. Computed from
every op ({bucket:.3g} s buckets); faults shaded in their own colours; violations in red.</p>
<div class="chart"><div class="label">Throughput: completions per second, per f (colour) and
outcome (ok solid, fail dashed, info dotted)</div><canvas id="throughput-canvas"></canvas></div>
<div class="chart"><div class="label">Latency, log scale: {ops}, coloured ok / fail / info;
per f the p50 (solid), p95 (dashed) and p99 (dotted) of ok ops</div>
<canvas id="latency-canvas"></canvas></div>
<div class="legend" id="chart-legend"></div></section>"""


def violations(model: dict[str, Any], results: dict[str, Any]) -> str:
    vs = model["violations"]
    if not any(not v["info"] for v in vs):
        none = "<p>None: no checker found an anomaly.</p>"
        if not vs:
            return f'<section id="violations"><h2>Violations</h2>{none}</section>'
    else:
        none = ""
    groups: dict[tuple[str, str], list[dict[str, Any]]] = {}
    for v in vs:
        groups.setdefault((v["check"], v["kind"]), []).append(v)
    out = ['<section id="violations"><h2>Violations</h2>', none]
    for (check, kind), items in groups.items():
        total = items[0]["total"]
        listed = "" if total == len(items) else f", the first {len(items)} listed"
        info = (f" — informational: {e(check)} judges these harmless to its verdict"
                if items[0]["info"] else "")
        out.append(f"<h3>{e(check)}: {e(kind)} ({total}{listed}){info}</h3>"
                   f'<ol class="violations" start="{items[0]["n"]}">')
        for v in items:
            if v["t0"] is None:
                when = "no time recorded"
                link = ""
            else:
                when = f'{v["t0"] / 1e6:.3f} – {v["t1"] / 1e6:.3f} s'
                link = f' <a class="show" href="#v-{v["n"]}">show on timeline</a>'
            procs = f' · processes {", ".join(map(str, v["procs"]))}' if v["procs"] else ""
            cls = "violation info" if v["info"] else "violation"
            out.append(f'<li class="{cls}" id="violation-{v["n"]}"><span class="expl">'
                       f'{e(v["explanation"])}</span> <span class="when">{when}{procs}</span>'
                       f"{link}</li>")
        out.append("</ol>")
    note_checks = [(n, c["note"]) for n, c in (results.get("checks") or {}).items()
                   if isinstance(c, dict) and c.get("note")]
    out.extend(f'<p class="note">{e(n)}: {e(str(t))}</p>' for n, t in note_checks)
    out.append("</section>")
    return "".join(out)


def incidents_section(found: list[Incident]) -> str:
    """The violations grouped by cause, each group folded (its violations link to the list)."""
    if not found:
        return ""
    out = [f'<section id="incidents"><h2>Incidents ({len(found)})</h2>'
           "<p>Violations grouped by cause: one per stale holder (a client that still held the "
           "lock when others got it), else per fault window, each naming the fault that opened "
           "it.</p><ol class=\"incidents\">"]
    for inc in found:
        links = " ".join(f'<a href="#violation-{v.n}">{v.n}</a>' for v in inc.violations[:LINKS])
        if len(inc.violations) > LINKS:  # the rest one click away, never left out
            rest = " ".join(f'<a href="#violation-{v.n}">{v.n}</a>'
                            for v in inc.violations[LINKS:])
            links += (f' <details class="more"><summary>and {len(inc.violations) - LINKS:,} '
                      f"more</summary>{rest}</details>")
        out.append(f"<li><details><summary>{e(inc.title())} <span class=\"when\">"
                   f"({e(inc.folded())})</span></summary><div>Violations: {links}</div>"
                   "</details></li>")
    out.append("</ol></section>")
    return "".join(out)


def explore_note(test: dict[str, Any]) -> str:
    """For a run ``harness explore`` shrank a failure to: what shrinking removed, and how
    often the schedule reproduces."""
    found = test.get("explore")
    if not isinstance(found, dict):
        return ""
    if found.get("role") == "first-failure":
        return ('<p class="note explore">harness explore found this failure first, then shrank '
                f'it: the minimal failing run is <code>{e(str(found.get("minimal")))}</code>.'
                "</p>")
    if found.get("role") != "minimal":
        return ""
    first = found.get("first-failure") or {}
    if found.get("same-run"):
        rate = found.get("reproduced")
        return ('<p class="note explore">harness explore found this failure and could not '
                "shrink it further within its budget"
                + (f"; it failed again in {e(str(rate))}" if rate else "") + ".</p>")
    text = narrative.removed([narrative.from_record(r) for r in first.get("faults") or []
                              if isinstance(r, dict)],
                             [narrative.from_record(r) for r in test.get("faults") or []
                              if isinstance(r, dict)],
                             int(first.get("skipped") or 0))
    rate = found.get("reproduced")
    again = f" It failed again in {rate}." if rate else ""
    return (f'<p class="note explore">Shrunk by harness explore: {e(text)}.{e(again)} '
            f'First failure: <code>{e(str(first.get("run", "?")))}</code>.</p>')


def schedule_section(test: dict[str, Any]) -> str:
    """The schedule as planned, step by step: what each step resolved to and when it ran, or
    why it was skipped."""
    outcomes = narrative.step_outcomes(test)
    if not outcomes:
        return ""
    rows = []
    for i, step, outcome in outcomes:
        duration = step.get("duration")
        rows.append(f"<tr><td>{i + 1}</td><td>{e(str(step.get('at')))} s</td><td>"
                    f"{e(str(step.get('fault')))}</td><td>"
                    f"{e(inline(step.get('target') or 'its own choice'))}</td><td>"
                    f"{'default' if duration is None else e(f'{duration} s')}</td>"
                    f"<td>{e(inline(step.get('params'))) if step.get('params') else ''}</td>"
                    f"<td>{e(outcome)}</td></tr>")
    return ('<section id="schedule"><h2>Schedule</h2><p>Each step as planned (its target is a '
            "role, resolved when the step runs) and what it became.</p><table><thead><tr><th>"
            "step</th><th>planned at</th><th>fault</th><th>target</th><th>for</th><th>params"
            f"</th><th>outcome</th></tr></thead><tbody>{''.join(rows)}</tbody></table></section>")


def checks(results: dict[str, Any]) -> str:
    """Each check's facts in words, side by side: figures in a table, counts by kind as a grid;
    under them its lists (its violations, a witness's ops), folded under their count."""
    cards, lists = [], []
    for name, check in (results.get("checks") or {}).items():
        if not isinstance(check, dict):
            continue
        rows = "".join(f"<tr><th>{e(k)}</th><td>{e(inline(v))}</td></tr>"
                       for k, v in check.items() if not isinstance(v, list | dict))
        parts = [(k, part(k, v)) for k, v in check.items() if isinstance(v, list | dict)]
        inner = "".join(p for _, p in parts if not p.startswith("<details>"))
        wide = ' class="wide"' if "<td><table>" in inner else ""  # tables in a grid: wide
        cards.append(f'<div{wide}><h3 id="check-{e(name)}">{e(name)} <span class="chip '
                     f'{verdict_class(check.get("valid"))}">{verdict_word(check.get("valid"))}'
                     f"</span></h3><table>{rows}</table>{inner}</div>")
        lists.extend(p.replace("<summary>", f"<summary>{e(name)}: ", 1) for _, p in parts
                     if p.startswith("<details>"))
    return (f'<section id="checks"><h2>Checkers</h2><div class="checks">{"".join(cards)}</div>'
            f'{"".join(lists)}</section>')


def part(key: str, value: list[Any] | dict[str, Any]) -> str:
    """A list or mapping of a check's result: short ones inline, the others folded under
    their key and count."""
    count = f"{len(value):,} {'items' if isinstance(value, list) else 'keys'}"
    if isinstance(value, dict) and value and all(isinstance(v, dict) for v in value.values()):
        return f"<h4>{e(key)}</h4>{formatted(value)}"  # counts by f and type: a grid
    text = inline(value, JSON_CHARS)
    if len(value) <= 3 and len(text) <= 160:
        return f"<p><b>{e(key)}</b>: {e(text)}</p>"
    return (f"<details><summary><b>{e(key)}</b> ({count})</summary>{formatted(value)}"
            "</details>")


def formatted(value: Any, depth: int = 0) -> str:
    """A value of a result as HTML: a mapping of mappings a grid, a list of mappings a table,
    a mapping a two-column table, anything else in words (:func:`.words.inline`); lists cut
    to their first :data:`JSON_ITEMS` with how many more results.json has."""
    if isinstance(value, list | tuple) and value and depth < 2:
        items = list(value[:JSON_ITEMS])
        more = (f'<p class="more">… {len(value) - JSON_ITEMS:,} more in results.json</p>'
                if len(value) > JSON_ITEMS else "")
        if all(isinstance(v, dict) for v in items):
            return grid(dict(enumerate(items, 1)), depth) + more
        return e(inline(items, JSON_CHARS // 4)) + more
    if isinstance(value, dict) and value and depth < 2:
        if all(isinstance(v, dict) for v in value.values()):
            return grid(value, depth)
        return "<table>" + "".join(f"<tr><th>{e(str(k))}</th><td>{formatted(v, depth + 1)}"
                                   "</td></tr>" for k, v in value.items()) + "</table>"
    return e(inline(value, JSON_CHARS // 4))


def grid(rows: dict[Any, dict[str, Any]], depth: int) -> str:
    """Mappings as one table: a row each, a column per key any of them has."""
    cols: list[str] = []
    for v in rows.values():
        cols.extend(c for c in v if c not in cols)
    head = "".join(f"<th>{e(str(c))}</th>" for c in cols)
    body = "".join(f"<tr><th>{e(str(k))}</th>" + "".join(
        f"<td>{formatted(v[c], depth + 1) if c in v else ''}</td>" for c in cols) + "</tr>"
        for k, v in rows.items())
    return f"<table><thead><tr><th></th>{head}</tr></thead><tbody>{body}</tbody></table>"


def faults(model: dict[str, Any], test: dict[str, Any]) -> str:
    """Each fault from when it took effect; its planned time and the targets it missed before
    it struck said as such."""
    rows = []
    steps = (test.get("schedule") or {}).get("steps") or []
    for f in model["faults"]:
        state = ("failed: " + str(f["error"]) if f.get("error") else
                 "never stopped" if f.get("open") else "healed at the end" if f.get("healed")
                 else "")
        step = f.get("step")
        planned = (steps[step].get("at") if isinstance(step, int) and 0 <= step < len(steps)
                   and isinstance(steps[step], dict) else None)
        missed = (f"missed {','.join(f['missed'])} (aimed at {f['aimed'] / 1e6:.3f} s)"
                  if f.get("missed") else "")
        state = ", ".join(x for x in ("in the background" if f.get("background") else "",
                                      missed, state) if x)
        detail = inline(f["detail"], 400) if f.get("detail") else ""
        params = inline(f.get("params") or {}, 400) if f.get("params") else ""
        planned_at = f"{planned} s (step {step + 1})" if planned is not None else ""
        rows.append(f"<tr><td>{e(planned_at)}</td><td>{f['start'] / 1e6:.3f} s</td>"
                    f"<td>{f['stop'] / 1e6:.3f} s</td>"
                    f"<td>{(f['stop'] - f['start']) / 1e6:.3f} s</td><td>{e(f['f'])}</td>"
                    f"<td>{e(', '.join(f['targets']))}</td><td>{e(f['label'])}</td>"
                    f"<td>{e(params)}</td><td>{e(state)}</td><td>{e(detail)}</td></tr>")
    errors = "".join(f"<li>{e(str(x))}</li>" for x in test.get("nemesis-errors") or [])
    body = ("<table><thead><tr><th>planned at</th><th>took effect</th><th>stop</th><th>for"
            "</th><th>fault</th><th>targets</th><th>what it did</th><th>parameters</th><th></th>"
            "<th>detail</th></tr></thead><tbody>"
            f"{''.join(rows)}</tbody></table>") if rows else "<p>No faults were injected.</p>"
    if errors:
        body += f"<p>Nemesis errors:</p><ul>{errors}</ul>"
    return f'<section id="faults"><h2>Fault windows</h2>{body}</section>'


def spec_section(spec: dict[str, Any], test: dict[str, Any]) -> str:
    rows = "".join(f"<tr><th>{e(k)}</th><td>{e(inline(v, 2000))}</td></tr>"
                   for k, v in sorted(spec.items()))
    nodes = test.get("nodes") or []
    node_text = ", ".join(f"{n.get('name')} {n.get('host')}:{n.get('port')}" for n in nodes
                          if isinstance(n, dict))
    extra = f"<p>Nodes: {e(node_text)}</p>" if node_text else ""
    again = ""
    if isinstance(test.get("schedule"), dict) and test.get("run_id"):
        run_dir = f"{spec.get('store') or 'results'}/{test['run_id']}"
        again = ("<p>Replay this fault schedule step for step (roles resolved again at run "
                 f"time): <code>{e(shlex.join(['harness', 'run', '--replay', run_dir]))}"
                 "</code></p>")
    if spec.get("schedule") and again:  # its own schedule: --nemesis would draw another
        same = ""
    else:
        same = f"<p>Replay: <code>{e(replay_command(spec))}</code></p>"
    return (f'<section id="spec"><h2>Test spec</h2>{same}{again}<table>{rows}</table>{extra}'
            "</section>")


def files(logs: list[str], present: list[str]) -> str:
    """Links to the run's logs and files, each by its path from the page, named by its name."""
    def link(href: str) -> str:
        return f'<a href="{e(href)}">{e(href.rsplit("/", 1)[-1])}</a>'

    log_links = " ".join(map(link, logs)) or "none"
    file_links = " ".join(map(link, present))
    return (f'<section id="files"><h2>Files</h2><p>Node and client logs: {log_links}</p>'
            f"<p>Run: {file_links}</p></section>")


# the page -------------------------------------------------------------------------------------
def render(spec: dict[str, Any], history: list[dict[str, Any]], results: dict[str, Any],
           logs: list[str], test: dict[str, Any] | None = None,
           present: list[str] | None = None) -> str:
    """The page, at most :data:`PAGE_BYTES` (UTF-8) whatever the run: what grows with a run is
    bounded in the model (:mod:`.model`, :mod:`.sampling`) and the sections; should the page
    still come out bigger (many faults, long explanations), it is built again with fewer op
    pairs embedded one by one, in proportion to the bytes over."""
    test = test or {}
    grounds = report_model.grounds(history)  # the model's and the incidents': one pass
    try:
        schedule = from_dict(test["schedule"]) if isinstance(test.get("schedule"), dict) else None
    except UsageError:
        schedule = None
    found = incidents(history, results, schedule, grounds.places, frees=frees_of(spec))
    max_pairs = None
    for _ in range(6):
        model = report_model.build(spec, history, results, grounds, max_pairs)
        page = page_of(spec, history, results, logs, test, present, model, found)
        over = len(page.encode()) - PAGE_BYTES
        embedded = model["sampling"]["embedded"]
        if over <= 0 or embedded == 0:
            return page
        ops = len(json.dumps([model["ops"], model["spans"]], separators=(",", ":"),
                             default=str))
        max_pairs = max(0, min(int(embedded * 0.8),
                               int(embedded * (1 - 1.1 * over / max(ops, 1))) - 100))
    return page  # what is not op pairs (every fault window, say) is more than the ceiling


def page_of(spec: dict[str, Any], history: list[dict[str, Any]], results: dict[str, Any],
            logs: list[str], test: dict[str, Any], present: list[str] | None,
            model: dict[str, Any], found: list[Incident]) -> str:
    # each violation's explanation is on the page once, in the list; the script reads it there
    lean = {**model, "violations": [{k: x for k, x in v.items() if k != "explanation"}
                                    for v in model["violations"]]}
    data = json.dumps(lean, separators=(",", ":"), default=str).replace("</", "<\\/")
    return f"""<!doctype html>
<html lang="en"><head><meta charset="utf-8">
<meta name="viewport" content="width=device-width,initial-scale=1">
<title>{verdict_word(results.get("valid"))} · {e(title_of(spec))}</title>
<style>{asset("report.css")}</style></head>
<body>{banner(spec, results, test)}<main>{meta(spec, history, test, results)}
{explore_note(test)}
{timeline(model)}
{charts(model)}
{incidents_section(found)}
{violations(model, results)}
{linearization_section(results)}
{resource_order_section(history, results)}
{checks(results)}
{schedule_section(test)}
{faults(model, test)}
{spec_section(spec, test)}
{files(logs, present or [])}
<footer>lock-harness report · <span id="drawn"></span></footer></main>
<div id="tip" hidden></div>
<script type="application/json" id="report-data">{data}</script>
<script>{asset("charts.js")}</script>
<script>{asset("report.js")}</script>
</body></html>
"""
