"""report.html: one self-contained page per run (see :mod:`.html` and :mod:`.model`)."""

from __future__ import annotations

from os.path import relpath
from pathlib import Path
from typing import Any

from harness.controller.store import RunDir
from harness.core.atomic import write_text
from harness.core.heap import collector_paused
from harness.presentation.report.html import render, verdict_class, verdict_word


def write_report(run: RunDir, spec: dict[str, Any], history: list[dict[str, Any]],
                 results: dict[str, Any], to: RunDir | None = None) -> Path:
    """Render the run's report.html from what is stored (and these) and write it: in the run,
    or as ``to``'s report (a re-check's, :meth:`RunDir.recheck`), its links to the run's
    files relative to it."""
    to = to or run
    try:
        test = run.load_test()
    except Exception:  # a report of what there is, even beside a broken test.json
        test = {}
    # The model is built in passes over every op, allocating as it goes: with the cyclic
    # collector on, it would walk the whole history again and again (see harness.core.heap).
    with collector_paused():
        page = render(spec, history, results,
                      [relpath(run.logs / n, to.path) for n in run.log_names()], test,
                      [relpath(run.path / n, to.path) for n in run.raw_files()])
    write_text(to.report, page)
    return to.report


__all__ = ["verdict_class", "verdict_word", "write_report"]
