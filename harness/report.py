"""report.html: one self-contained page a person reads at a glance (no network, opens from disk).

This is the first cut: the verdict, each check with its violations in words, the spec and the
fault schedule, links to the node logs.
"""

from __future__ import annotations

import html
import json
from pathlib import Path
from typing import Any

COLOURS = {True: "#1a7f37", False: "#cf222e", "unknown": "#9a6700"}
WORDS = {True: "VALID", False: "INVALID", "unknown": "UNKNOWN"}


def verdict_word(valid: Any) -> str:
    return WORDS.get(valid, "UNKNOWN")


def _badge(valid: Any) -> str:
    colour = COLOURS.get(valid, COLOURS["unknown"])
    return f'<span class="badge" style="background:{colour}">{verdict_word(valid)}</span>'


def _explanations(check: dict[str, Any]) -> list[str]:
    out = []
    for key, items in check.items():
        if isinstance(items, list) and items and isinstance(items[0], dict):
            out.extend(f"{key}: {i['explanation']}" for i in items if "explanation" in i)
    return out


def render(spec: dict[str, Any], history: list[dict[str, Any]], results: dict[str, Any],
           logs: list[str]) -> str:
    e = html.escape
    rows = []
    for name, check in results.get("checks", {}).items():
        facts = {k: v for k, v in check.items()
                 if not isinstance(v, list | dict) and k != "valid"}
        expl = "".join(f'<li class="violation">{e(x)}</li>' for x in _explanations(check)[:50])
        rows.append(f"<section><h2>{e(name)} {_badge(check.get('valid'))}</h2>"
                    f"<pre>{e(json.dumps(facts, indent=1, sort_keys=True))}</pre>"
                    f"<ul>{expl}</ul></section>")
    faults = [op for op in history if op.get("process") == "nemesis" and op["type"] == "info"]
    fault_rows = "".join(
        f"<tr><td>{op['time'] / 1e9:.2f} s</td><td>{e(op['f'])}</td><td>{e(str(op['value']))}"
        f"</td><td>{e(', '.join(op.get('targets') or []))}</td><td>{e(op.get('error', ''))}"
        f"</td></tr>" for op in faults)
    log_links = " ".join(f'<a href="logs/{e(n)}">{e(n)}</a>' for n in logs)
    title = f"{spec.get('lock')} / {spec.get('workload')} / {'+'.join(spec.get('nemesis') or [])}"
    return f"""<!doctype html><html><head><meta charset="utf-8"><title>{e(title)}</title>
<style>body{{font:14px system-ui,sans-serif;margin:2em;max-width:70em}}
.badge{{color:#fff;padding:.1em .5em;border-radius:.3em;font-weight:bold}}
.banner{{font-size:1.6em}} .violation{{color:#cf222e}} td,th{{padding:0 1em 0 0;text-align:left}}
pre{{background:#f6f8fa;padding:.5em}}</style></head><body>
<div class="banner">{_badge(results.get('valid'))} {e(title)}</div>
<p>db {e(str(spec.get('db')))}, {e(str(spec.get('clients')))} clients,
{e(str(spec.get('time_limit')))} s, seed {e(str(spec.get('seed')))},
{len(history)} ops</p>
{''.join(rows)}
<h2>Faults</h2><table><tr><th>time</th><th>fault</th><th></th><th>targets</th><th>error</th>
</tr>{fault_rows}</table>
<h2>Spec</h2><pre>{e(json.dumps(spec, indent=1, sort_keys=True))}</pre>
<p>Logs: {log_links}</p></body></html>
"""


def write_report(run_dir: Path, spec: dict[str, Any], history: list[dict[str, Any]],
                 results: dict[str, Any]) -> Path:
    logs = sorted(p.name for p in (run_dir / "logs").glob("*.log")) if (
        run_dir / "logs").is_dir() else []
    path = run_dir / "report.html"
    path.write_text(render(spec, history, results, logs), encoding="utf-8")
    return path
