"""Commands on a host over OpenSSH's own client, one multiplexed connection per host.

Why OpenSSH's ``ssh`` and not a Python library (paramiko, asyncssh): it is what the hosts'
administrators already use and debug with, so everything they configured works unchanged
(``~/.ssh/config``, agents, certificates, known_hosts, ProxyJump chains); it adds no dependency;
and with connection multiplexing (``ControlMaster``) a command costs one new channel on an open
connection, a few milliseconds, instead of a handshake. The master is a process of the run,
recorded in its ``pids.json`` and tied to the controller, so teardown, Ctrl-C and
``harness clean`` end it like any other; if it is gone, commands fall back to a connection of
their own.

Host-side work is done by a small POSIX shell script (``ssh_host.sh``) piped to ``sh -s`` on
each call: nothing is installed on a host, and a host needs no Python.
"""

from __future__ import annotations

import contextlib
import shlex
import subprocess
import time
from collections.abc import Callable, Iterable
from concurrent.futures import ThreadPoolExecutor
from importlib import resources
from pathlib import Path
from typing import TypeVar

from harness.controller.backends.ssh.hosts import Host, Jump
from harness.controller.procs import ProcessTable
from harness.core.errors import HarnessError

CONNECT_TIMEOUT = 10
SSH_FAILED = 255  # what ssh exits with when it, not the remote command, failed
HELPER = resources.files(__package__).joinpath("ssh_host.sh").read_bytes()
T = TypeVar("T")
R = TypeVar("R")


def _common(key: Path | None, known_hosts: Path | None, port: int, user: str) -> list[str]:
    opts = ["-o", "BatchMode=yes", "-o", f"ConnectTimeout={CONNECT_TIMEOUT}",
            "-o", "ServerAliveInterval=5", "-o", "ServerAliveCountMax=3",
            "-o", "LogLevel=ERROR", "-p", str(port), "-l", user]
    if key is not None:
        opts += ["-i", str(key), "-o", "IdentitiesOnly=yes"]
    if known_hosts is not None:
        opts += ["-o", f"UserKnownHostsFile={known_hosts}", "-o", "StrictHostKeyChecking=yes"]
    else:
        opts += ["-o", "StrictHostKeyChecking=accept-new"]
    return opts


def _proxy(jump: Jump, known_hosts: Path | None) -> list[str]:
    """A ProxyCommand rather than ProxyJump: options given on the command line (the key, the
    known_hosts file) do not reach a ProxyJump hop, so the hop is an ssh of our own."""
    hop = ["ssh", *_common(jump.key, known_hosts, jump.port, jump.user), "-W", "%h:%p",
           jump.address]
    return ["-o", f"ProxyCommand={shlex.join(hop)}"]


class Remote:
    """One host: ``run`` a shell command there, or ``helper`` a command of ``ssh_host.sh``."""

    def __init__(self, host: Host, control: Path | None = None) -> None:
        self.host = host
        self.control = control
        self._procs: ProcessTable | None = None
        self._log = Path("/dev/null")
        self.unmultiplexed = 0  # commands that found no master and connected on their own

    def options(self) -> list[str]:
        h = self.host
        opts = _common(h.key, h.known_hosts, h.port, h.user)
        if h.jump is not None:
            opts += _proxy(h.jump, h.known_hosts)
        return opts

    def argv(self, command: str) -> list[str]:
        mux = ["-o", "ControlMaster=no", "-o", f"ControlPath={self.control}"] \
            if self.control is not None else []
        return ["ssh", *self.options(), *mux, self.host.ssh, command]

    # the connection ---------------------------------------------------------------------------
    def open(self, procs: ProcessTable, log: Path) -> None:
        """Start the master connection, a recorded process of the run that dies with the
        controller. Call it from the main thread: the kernel's parent-death signal fires when
        the *thread* that started a process ends, and a worker thread ends early."""
        assert self.control is not None
        self.control.parent.mkdir(parents=True, exist_ok=True)
        self.control.unlink(missing_ok=True)
        self._procs, self._log = procs, log
        procs.spawn(self._master, ["ssh", *self.options(), "-M", "-N",
                                   "-o", "ControlPersist=no", "-o", f"ControlPath={self.control}",
                                   self.host.ssh], log, tie_to_controller=True)

    @property
    def _master(self) -> str:
        return f"ssh-{self.host.name}"

    def wait_open(self, timeout: float = CONNECT_TIMEOUT + 5) -> None:
        """Until the master answers; HarnessError, one line, with ssh's own reason if it
        cannot connect."""
        assert self.control is not None
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.control.exists() and self._check():
                return
            if self._procs.pid(self._master) is None:
                break
            time.sleep(0.05)
        self._procs.stop(self._master, timeout=1)
        raise HarnessError(f"{self.host.describe()}: ssh cannot connect: "
                           f"{last_line(self._log)}; check address, user, key and known-hosts "
                           "in the hosts file")

    def _check(self) -> bool:
        proc = subprocess.run(["ssh", "-o", f"ControlPath={self.control}", "-O", "check",
                               self.host.ssh], capture_output=True, timeout=10)
        return proc.returncode == 0

    def close(self) -> None:
        """End the master connection (if it runs)."""
        if self.control is not None and self.control.exists():
            with contextlib.suppress(subprocess.TimeoutExpired, OSError):
                subprocess.run(["ssh", "-o", f"ControlPath={self.control}", "-O", "exit",
                                self.host.ssh], capture_output=True, timeout=10)
            self.control.unlink(missing_ok=True)
        if self._procs is not None:
            self._procs.stop(self._master, timeout=2)

    # commands ---------------------------------------------------------------------------------
    def run(self, command: str, *, stdin: bytes | None = None, timeout: float = 60,
            check: bool = True) -> subprocess.CompletedProcess[bytes]:
        if self.host.sudo:
            command = f"sudo -n {command}"
        try:
            proc = subprocess.run(self.argv(command), input=stdin, capture_output=True,
                                  timeout=timeout)
        except subprocess.TimeoutExpired:
            raise HarnessError(f"{self.host.describe()}: no answer over ssh within "
                               f"{timeout:.0f} s") from None
        if self.control is not None and b"Control socket connect" in proc.stderr:
            self.unmultiplexed += 1
        if proc.returncode == SSH_FAILED:
            raise HarnessError(f"{self.host.describe()}: ssh failed: "
                               f"{text_tail(proc.stderr)}")
        if check and proc.returncode != 0:
            raise HarnessError(f"{self.host.describe()}: `{command[:80]}` failed "
                               f"(exit {proc.returncode}): "
                               f"{text_tail(proc.stderr) or text_tail(proc.stdout)}")
        return proc

    def call(self, *args: str, timeout: float = 60, check: bool = True
             ) -> subprocess.CompletedProcess[bytes]:
        """Run a command of ``ssh_host.sh`` on the host."""
        return self.run(shlex.join(["sh", "-s", "--", *args]), stdin=HELPER, timeout=timeout,
                        check=check)

    def helper(self, *args: str, timeout: float = 60, check: bool = True) -> str:
        """Run a command of ``ssh_host.sh`` on the host; its standard output."""
        return self.call(*args, timeout=timeout, check=check).stdout.decode(errors="replace")


def text_tail(data: bytes) -> str:
    lines = [x.strip() for x in data.decode(errors="replace").splitlines() if x.strip()]
    return lines[-1][:300] if lines else "(no message)"


def last_line(path: Path) -> str:
    try:
        return text_tail(path.read_bytes())
    except OSError:
        return "(no message)"


def each(items: Iterable[T], fn: Callable[[T], R]) -> list[R]:
    """``fn`` on every item at once (one thread each: hosts answer in parallel); the first
    error is raised once all have finished."""
    items = list(items)
    if len(items) <= 1:
        return [fn(x) for x in items]
    with ThreadPoolExecutor(max_workers=min(16, len(items))) as pool:
        futures = [pool.submit(fn, x) for x in items]
        errors = [f.exception() for f in futures]
        for err in errors:
            if err is not None:
                raise err
        return [f.result() for f in futures]
