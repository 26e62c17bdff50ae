"""``harness report RUN --png FILE``: the report's timeline with its flags, fault labels and
charts, under its verdict banner, as a PNG that reads pasted into an issue (``PNG_WIDTH`` px).

Headless Chromium draws the page opened at ``#png`` (the page then shows only the banner, the
timeline and the charts, :file:`assets/report.css`): once to read how tall that is (the page
puts it on ``<body data-height>``), once to take the screenshot at that height.
"""

from __future__ import annotations

import os
import re
import shutil
import signal
import subprocess
import tempfile
from pathlib import Path

from harness.core.errors import HarnessError

PNG_WIDTH = 1200
BROWSERS = ("chromium", "chromium-browser", "google-chrome")
FLAGS = ("--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
         "--disable-background-networking", "--disable-component-update", "--disable-sync",
         "--hide-scrollbars", "--virtual-time-budget=3000")
TIMEOUT = 90.0


def browser() -> str:
    for name in BROWSERS:
        found = shutil.which(name)
        if found:
            return found
    raise HarnessError("--png needs headless Chromium: apt-get install chromium (or bash setup.sh)")


def chromium(url: str, *extra: str) -> str:
    """Run headless Chromium on ``url`` in a profile of its own; its stdout. Past
    :data:`TIMEOUT` its process group is killed and the run refused."""
    with tempfile.TemporaryDirectory(prefix="harness-png-") as profile, \
            tempfile.TemporaryFile("w+") as out:
        proc = subprocess.Popen([browser(), *FLAGS, f"--user-data-dir={profile}", *extra, url],
                                stdout=out, stderr=subprocess.DEVNULL, stdin=subprocess.DEVNULL,
                                text=True, start_new_session=True)
        try:
            code = proc.wait(timeout=TIMEOUT)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
            raise HarnessError(f"chromium did not draw {url} in {TIMEOUT:g} s") from None
        out.seek(0)
        if code != 0:
            raise HarnessError(f"chromium exited {code} drawing {url}")
        return out.read()


def write_png(report: Path, png: Path, width: int = PNG_WIDTH) -> tuple[int, int]:
    """Write the timeline and charts of ``report`` (a report.html) to ``png``; its size."""
    url = report.resolve().as_uri() + "#png"
    dom = chromium(url, f"--window-size={width},1000", "--dump-dom")
    body = re.search(r"<body[^>]*>", dom)
    height = re.search(r'data-height="(\d+)"', body[0]) if body else None
    if not height or 'data-ready="1"' not in body[0]:  # type: ignore[index]
        raise HarnessError(f"{report}: the page's script did not draw its timeline")
    size = (width, min(int(height[1]), 8000))
    png.parent.mkdir(parents=True, exist_ok=True)
    png.unlink(missing_ok=True)
    chromium(url, f"--window-size={size[0]},{size[1]}", f"--screenshot={png.resolve()}")
    if not png.is_file():
        raise HarnessError(f"chromium wrote no screenshot to {png}")
    return size
