"""What ``harness suite`` leaves for CI and for people: JUnit XML, index.html, summary.json.

JUnit because every CI system reads it: one testcase per run (classname
``lock-harness.<db>.<lock>``, name ``<workload>/<nemesis> seed N expect V``), a ``failure`` when
the verdict differs from the expectation (with the report's path, and the first violation when
there was one), an ``error`` when the harness could not run the test at all. index.html is the
same table for a person, linking each run's report by a relative path, so it works from the
store on disk, from ``harness serve`` and from a downloaded CI artifact alike. summary.json is
the same again for scripts, and what ``harness suite merge`` rebuilds all three from: each
entry's identity (number, options, expectation, digest), its outcome, and the paths of its run
and log relative to the suite's directory (absolute paths die with the CI machine).
"""

from __future__ import annotations

import html
import os
import time
import xml.etree.ElementTree as ET
from pathlib import Path
from typing import Any

from harness.core.atomic import replacing, write_json, write_text
from harness.presentation.report.html import verdict_class
from harness.presentation.suite import Outcome, Suite, lock_of, numbers
from harness.presentation.suite_detection import Row
from harness.presentation.suite_detection import rows as detection_rows

e = html.escape
VALID_OF = {"valid": True, "invalid": False}


def testcase_name(o: Outcome) -> tuple[str, str]:
    opts = o.entry.options
    classname = f"lock-harness.{opts.get('db', 'redis')}.{lock_of(opts)}"
    seed = f" seed {opts['seed']}" if "seed" in opts else ""
    name = (f"#{o.entry.number} {opts.get('workload', 'mutex')}/{opts.get('nemesis', 'pause')}"
            f"{seed} expect {o.entry.expect}")
    return classname, name


def junit(suite: Suite, outcomes: list[Outcome], started: float) -> ET.ElementTree:
    failures = sum(1 for o in outcomes if not o.as_expected and o.verdict in (
        "valid", "invalid", "unknown"))
    skipped = sum(1 for o in outcomes if o.verdict == "skipped")
    errors = len(outcomes) - failures - skipped - sum(1 for o in outcomes if o.as_expected)
    total_s = f"{sum(o.seconds for o in outcomes):.3f}"
    attrs = {"name": suite.title, "tests": str(len(outcomes)), "failures": str(failures),
             "errors": str(errors), "skipped": str(skipped), "time": total_s}
    root = ET.Element("testsuites", attrs)
    ts = ET.SubElement(root, "testsuite", {
        **attrs, "timestamp": time.strftime("%Y-%m-%dT%H:%M:%S", time.localtime(started)),
        "file": str(suite.path)})
    found = detection_rows(outcomes)
    detection = ET.SubElement(ts, "properties")
    row_of: dict[int, Row] = {}
    for r in found:
        ET.SubElement(detection, "property", {"name": f"detection #{r.number} {r.label} "
                                              f"expect {r.expect}", "value": r.line()})
        row_of.update((o.entry.number, r) for o in r.runs)
    for o in outcomes:
        classname, name = testcase_name(o)
        tc = ET.SubElement(ts, "testcase", {"classname": classname, "name": name,
                                            "time": f"{o.seconds:.3f}"})
        report = str(o.report) if o.report else "no report"
        if o.verdict == "skipped":
            ET.SubElement(tc, "skipped", {"message": "the suite was interrupted"})
        elif o.verdict in ("error", "interrupted"):
            err = ET.SubElement(tc, "error", {
                "message": f"the harness could not run the test (exit {o.exit_code}): "
                           f"{o.first_violation}"[:500], "type": o.verdict})
            err.text = f"report: {report}\nlog: {o.log}"
        elif not o.as_expected:
            fail = ET.SubElement(tc, "failure", {
                "message": f"expected {o.entry.expect}, got {o.verdict}; report: {report}",
                "type": "verdict"})
            lines = [f"report: {report}", f"replay: {o.entry.command()}"]
            if o.first_violation:
                lines.append(f"first violation: {o.first_violation}")
            fail.text = "\n".join(lines)
        if o.output:
            ET.SubElement(tc, "system-out").text = o.output[-20_000:]
        props = ET.SubElement(tc, "properties")
        ET.SubElement(props, "property", {"name": "report", "value": report})
        ET.SubElement(props, "property", {"name": "verdict", "value": o.verdict})
        ET.SubElement(props, "property", {"name": "detection",
                                          "value": row_of[o.entry.number].line()})
    ET.indent(root)
    return ET.ElementTree(root)


def write_junit(path: Path, tree: ET.ElementTree) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    with replacing(path) as tmp:
        tree.write(tmp, encoding="UTF-8", xml_declaration=True)


def tally(outcomes: list[Outcome]) -> str:
    """``5 of 6 as expected, 1 differ``: of the runs that ran to a verdict; an interrupted
    run and an entry never started are named as such, never counted as differing."""
    gone = {v: sum(1 for o in outcomes if o.verdict == v) for v in ("interrupted", "skipped")}
    ran = [o for o in outcomes if o.verdict not in gone]
    differ = sum(1 for o in ran if not o.as_expected)
    return (f"{len(ran) - differ} of {len(ran)} as expected"
            + (f", {differ} differ" if differ else "")
            + (f", {gone['interrupted']} interrupted" if gone["interrupted"] else "")
            + (f", {gone['skipped']} not run" if gone["skipped"] else ""))


def summary(suite: Suite, outcomes: list[Outcome], started: float,
            out_dir: Path | None = None) -> dict[str, Any]:
    def rel(path: Path | None) -> str | None:
        return None if path is None or out_dir is None else os.path.relpath(path, out_dir)

    return {
        "name": suite.name,
        "file": str(suite.path),
        "started": time.strftime("%Y-%m-%dT%H:%M:%S", time.localtime(started)),
        "started_epoch": started,
        "total": len(outcomes),
        "as_expected": sum(1 for o in outcomes if o.as_expected),
        "differ": sum(1 for o in outcomes if not o.as_expected),
        "suite": {"entries": suite.total, "fingerprint": suite.fingerprint()},
        "shard": str(suite.shard) if suite.shard else None,
        "elsewhere": [e.number for e in suite.elsewhere],
        "merged": suite.merged,
        "runs": [{"number": o.entry.number, "options": o.entry.options,
                  "expect": o.entry.expect, "source": o.entry.source,
                  "digest": o.entry.digest(), "verdict": o.verdict,
                  "as_expected": o.as_expected, "exit_code": o.exit_code,
                  "seconds": round(o.seconds, 3),
                  "run_dir": str(o.run_dir.path) if o.run_dir else None,
                  "report": str(o.report) if o.report else None,
                  "run_dir_relative": rel(o.run_dir.path if o.run_dir else None),
                  "log_relative": rel(o.log),
                  "first_violation": o.first_violation, "violation_at": o.violation_at,
                  "reason": o.entry.reason} for o in outcomes],
        "detection": [r.record() for r in detection_rows(outcomes)],
    }


def scope_note(suite: Suite) -> str:
    """One line saying what part of the suite this is (empty for a whole suite run)."""
    if suite.shard:
        return (f"Shard {suite.shard}: {len(suite.entries)} of the suite's {suite.total} "
                f"entries; the others ({numbers(suite.elsewhere) or 'none'}) run in the other "
                f"shards. <code>harness suite merge</code> puts the shards together.")
    if suite.merged:
        return f"Merged from {len(suite.merged)} shard(s): {', '.join(suite.merged)}."
    return ""


def index_html(out_dir: Path, suite: Suite, outcomes: list[Outcome], started: float) -> str:
    s = summary(suite, outcomes, started, out_dir)
    note = scope_note(suite)
    rows = []
    for o in outcomes:
        opts = o.entry.options
        link = (f'<a href="{e(os.path.relpath(o.report, out_dir))}">report</a>' if o.report
                else (f'<a href="{e(os.path.relpath(o.log, out_dir))}">log</a>' if o.log
                      else ""))
        verdict = VALID_OF.get(o.verdict, "unknown")
        rows.append(
            f'<tr class="{"ok" if o.as_expected else "bad"}"><td>{o.entry.number}</td>'
            f"<td>{e(str(opts.get('db', 'redis')))}</td>"
            f"<td>{e(lock_of(opts))}</td>"
            f"<td>{e(str(opts.get('workload', 'mutex')))}</td>"
            f"<td>{e(str(opts.get('nemesis', 'pause')))}</td>"
            f"<td>{e(str(opts.get('seed', '')))}</td><td>{e(o.entry.expect)}</td>"
            f'<td><span class="chip {verdict_class(verdict)}">{e(o.verdict.upper())}</span>'
            f"</td><td>{'as expected' if o.as_expected else '<b>DIFFERS</b>'}</td>"
            f"<td>{o.seconds:.1f} s</td><td>{link}</td>"
            f'<td class="muted">{e(o.first_violation[:240])}</td></tr>')
    detection = "".join(
        f'<tr class="{"ok" if r.k == r.n else "bad"}"><td>{r.number}</td><td>{e(r.label)}</td>'
        f"<td>{e(r.expect)}</td><td>{e(r.rate())}</td><td>{e(r.first_violation())}</td>"
        f'<td class="muted">{e(r.reason)}</td><td class="muted">'
        f'{"<br>".join(e(f"seed {seed}: {why}") for seed, why in r.wrong)}</td></tr>'
        for r in detection_rows(outcomes))
    ok = s["differ"] == 0
    return f"""<!doctype html><html lang="en"><head><meta charset="utf-8">
<title>suite {e(suite.title)}: {e(tally(outcomes))}</title>
<style>body{{font:14px/1.45 system-ui,sans-serif;margin:0;color:#1f2328}}
header{{padding:.8em 1.5em;color:#fff;font-size:1.3em;background:{'#1a7f37' if ok else
'#cf222e'}}} main{{padding:.5em 1.5em 3em}} a{{color:#0969da}}
table{{border-collapse:collapse;width:100%}} td,th{{padding:.25em .7em .25em 0;text-align:left}}
td:not(:last-child){{white-space:nowrap}}
th{{border-bottom:1px solid #d0d7de}} tr.bad{{background:#ffebe9}}
.chip{{border-radius:2em;padding:.05em .7em;color:#fff;font-weight:600;font-size:.9em}}
.v-true{{background:#1a7f37}} .v-false{{background:#cf222e}} .v-unknown{{background:#9a6700}}
.muted{{color:#656d76;font-size:.92em}}</style></head><body>
<header>suite {e(suite.title)}: {e(tally(outcomes))}</header><main>
<p class="muted">{e(str(suite.path))} · started {e(s['started'])} ·
{sum(o.seconds for o in outcomes) / 60:.1f} min · <a href="junit.xml">junit.xml</a> ·
<a href="summary.json">summary.json</a></p>
{f'<p class="muted">{note}</p>' if note else ""}
<p>An entry expected <b>invalid</b> is a lock known to be unsafe under that fault: it passes
when the harness catches it.</p>
<h2>Detection</h2><p class="muted">Per row (an entry but its seed): right in k of n seeds
[95% Wilson score interval], the median time to the first violation (of the invalid runs whose
checkers time it), the seeds that were wrong.</p>
<table><thead><tr><th>#</th><th>row</th><th>expect</th><th>right</th><th>first violation</th>
<th>reason</th><th>wrong seeds</th></tr></thead><tbody>{detection}</tbody></table>
<h2>Runs</h2>
<table><thead><tr><th>#</th><th>db</th><th>lock</th><th>workload</th><th>nemesis</th>
<th>seed</th><th>expect</th><th>verdict</th><th></th><th>time</th><th></th><th>first violation
</th></tr></thead><tbody>{''.join(rows)}</tbody></table></main></body></html>
"""


def write_outputs(out_dir: Path, junit_path: Path, suite: Suite, outcomes: list[Outcome],
                  started: float) -> None:
    tree = junit(suite, outcomes, started)
    write_junit(junit_path, tree)
    if junit_path.resolve() != (out_dir / "junit.xml").resolve():
        write_junit(out_dir / "junit.xml", tree)
    write_json(out_dir / "summary.json", summary(suite, outcomes, started, out_dir), indent=1)
    write_text(out_dir / "index.html", index_html(out_dir, suite, outcomes, started))
