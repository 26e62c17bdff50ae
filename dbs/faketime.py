"""Does libfaketime reach a server? Clock faults are only honest where it does.

libfaketime works by LD_PRELOAD: it replaces libc's clock functions. A JVM reads the wall clock
through libc, so it follows; a Go program (etcd) reads it through the vDSO without libc, so it
does not, and a clock fault there would be a silent no-op. For a JVM the harness checks rather
than assumes: it runs ``java -version`` under libfaketime with the clock a year ahead and reads
the JVM's own log timestamps.
"""

from __future__ import annotations

import functools
import os
import re
import shutil
import subprocess
import time

from harness.core.errors import HarnessError

# What a DB whose clock faults go through libfaketime needs on its hosts: the preload library
# and its command (harness.controller.packages adds them to such a DB's packages).
DEBIAN_PACKAGES = ("libfaketime", "faketime")
LIBFAKETIME_PATHS = (
    "/usr/lib/x86_64-linux-gnu/faketime/libfaketime.so.1",
    "/usr/lib/aarch64-linux-gnu/faketime/libfaketime.so.1",
    "/usr/lib/faketime/libfaketime.so.1",
)
SHIFT_DAYS = 400
_STAMP = re.compile(r"^\[(\d{4})-(\d\d)-(\d\d)T")


def libfaketime() -> str | None:
    """The path of libfaketime's preload library, or None if it is not installed."""
    return next((p for p in LIBFAKETIME_PATHS if os.path.exists(p)), None)


def jvm_log_year(output: str) -> int | None:
    """The year of the first ``-Xlog`` line decorated with the wall-clock time."""
    for line in output.splitlines():
        m = _STAMP.match(line)
        if m:
            return int(m.group(1))
    return None


@functools.cache
def jvm_clock_support(java: str = "java") -> str | None:
    """None if a JVM started under libfaketime sees the faked clock, else a one-line reason."""
    lib = libfaketime()
    if lib is None:
        return "libfaketime is not installed (Debian package libfaketime): run `bash setup.sh`"
    binary = shutil.which(java)
    if binary is None:
        return f"{java} not found: cannot check that the JVM follows libfaketime"
    env = {**os.environ, "LD_PRELOAD": lib, "FAKETIME": f"+{SHIFT_DAYS}d"}
    try:
        proc = subprocess.run([binary, "-Xlog:os=info:stdout:time", "-version"], env=env,
                              capture_output=True, text=True, timeout=30)
    except (OSError, subprocess.TimeoutExpired) as e:
        return f"the JVM did not run under libfaketime: {e}"
    year = jvm_log_year(proc.stdout)
    expected = time.gmtime(time.time() + SHIFT_DAYS * 86400).tm_year
    if proc.returncode != 0 or year is None:
        return f"the JVM did not run under libfaketime (exit {proc.returncode})"
    if year != expected:
        return f"the JVM ignores libfaketime (it says {year}, expected {expected})"
    return None


def faketime_env(lib: str, offset_file: str, clock: str) -> dict[str, str]:
    """The environment that runs a server under libfaketime, its offset read from
    ``offset_file`` at every clock call: the wall clock alone (``clock`` ``"wall"``:
    ``FAKETIME_DONT_FAKE_MONOTONIC``) or the monotonic clock with it (``"both"``; a JVM's
    ``nanoTime`` follows, as its ``currentTimeMillis`` does)."""
    if clock not in ("wall", "both"):
        raise HarnessError(f"libfaketime moves the wall clock or both clocks, not {clock!r}")
    # libfaketime's "monotonic fix" (pthread_cond_timedwait on a CLOCK_MONOTONIC condition)
    # must match what it fakes: on with the wall clock alone, a JVM's timed waits hang (the
    # ZooKeeper peers never elected a leader), and so they do with it off when both are faked
    env = {"LD_PRELOAD": lib, "FAKETIME_TIMESTAMP_FILE": offset_file, "FAKETIME_NO_CACHE": "1",
           "FAKETIME_FORCE_MONOTONIC_FIX": "1" if clock == "both" else "0"}
    if clock == "wall":
        env["FAKETIME_DONT_FAKE_MONOTONIC"] = "1"
    return env


def check_clock(node: str, started: str | None, clock: str) -> None:
    """Raise unless a server started under libfaketime in mode ``started`` can have its
    ``clock`` moved: one offset file moves what the server was started to fake, no less, no
    more (a wall-only fault on a server faking both clocks would move its monotonic clock)."""
    if started is None:
        raise HarnessError(f"{node}: its server was not started under libfaketime")
    if clock != started:
        raise HarnessError(f"{node}: its server fakes the {started} clock(s) under libfaketime, "
                           f"so a fault cannot move clock {clock!r} alone")
