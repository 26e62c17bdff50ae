"""How long a run's report.html takes to open and draw in headless Chromium (a script, not a
test; issue 30's "opens in under 1 s").

    .venv/bin/python bench/bench_report_open.py results/latest/report.html [more.html] [--reps 5]

Each page is opened ``--reps`` times in a fresh headless Chromium profile (``--dump-dom``), and
what the page itself says is read from its ``<body>``: ``data-render-ms``, the page's
``performance.now()`` once its script has drawn everything (from the navigation's start: the
HTML parsed, the data decoded, the timeline and charts drawn), and ``data-ready``. A page that
did not draw (no ``data-ready``, or a ``data-error``) fails the script. Printed: each page's
size, its render times and their median, and the whole Chromium process's wall time (start-up
included, which is the browser's, not the page's).
"""

from __future__ import annotations

import argparse
import html
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
         "--disable-background-networking", "--disable-component-update", "--disable-sync",
         "--hide-scrollbars", "--window-size=1400,1400", "--virtual-time-budget=3000",
         "--dump-dom"]


def open_once(browser: str, page: Path) -> tuple[int, float]:
    """(the page's own render ms, Chromium's wall seconds) of one opening."""
    with tempfile.TemporaryDirectory(prefix="bench-report-open-") as profile:
        started = time.monotonic()
        proc = subprocess.run([browser, *FLAGS, f"--user-data-dir={profile}", page.as_uri()],
                              capture_output=True, text=True, timeout=120, check=False)
        took = time.monotonic() - started
    m = re.search(r"<body([^>]*)>", proc.stdout)
    attrs = {k: html.unescape(v) for k, v in re.findall(r'([\w-]+)="([^"]*)"', m[1])} if m else {}
    if proc.returncode != 0 or attrs.get("data-ready") != "1" or "data-error" in attrs:
        raise SystemExit(f"{page}: the page did not draw (exit {proc.returncode}, "
                         f"{attrs.get('data-error') or proc.stderr[-300:]})")
    return int(attrs["data-render-ms"]), took


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("pages", nargs="+", type=Path)
    ap.add_argument("--reps", type=int, default=5)
    args = ap.parse_args()
    browser = next(filter(None, map(shutil.which, ("chromium", "chromium-browser",
                                                   "google-chrome"))), None)
    if browser is None:
        print("no chromium on PATH (bash setup.sh installs Debian's)", file=sys.stderr)
        return 3
    for page in args.pages:
        runs = [open_once(browser, page.resolve()) for _ in range(args.reps)]
        ms = [r for r, _ in runs]
        print(f"{page} ({page.stat().st_size / 2**20:.2f} MiB): drawn in "
              f"{statistics.median(ms)} ms median ({', '.join(map(str, ms))}); Chromium's "
              f"whole process {statistics.median(t for _, t in runs):.2f} s median")
    return 0


if __name__ == "__main__":
    sys.exit(main())
