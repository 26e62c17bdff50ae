"""Backends: where nodes live. The nemesis never knows which one it drives."""

from __future__ import annotations

from collections.abc import Callable

from harness.controller.backends.base import Backend
from harness.controller.procs import ProcessTable
from harness.controller.store import RunDir
from harness.core.errors import UsageError

BACKENDS = ("local", "docker", "ssh")


def check_backend(name: str) -> None:
    if name not in BACKENDS:
        raise UsageError(f"unknown backend {name!r}: use one of {', '.join(BACKENDS)}")


def backend_class(name: str) -> type:
    """The class of backend ``name`` (its declarations: ``debian_packages``, ``unavailable``)."""
    check_backend(name)
    if name == "docker":
        from harness.controller.backends.docker import DockerBackend

        return DockerBackend
    if name == "ssh":
        from harness.controller.backends.ssh.backend import SshBackend

        return SshBackend
    from harness.controller.backends.local import LocalBackend

    return LocalBackend


def make(name: str, run: RunDir, procs: ProcessTable, run_id: str, *, hosts: str | None = None,
         say: Callable[[str], None] | None = None) -> Backend:
    """The backend ``name`` for one run (``hosts``: the ssh backend's HOSTS.toml; ``say``: a
    progress line, for what takes long, such as installing servers on hosts)."""
    cls = backend_class(name)
    if name == "ssh":
        from harness.controller.backends.ssh import hosts as hosts_file

        if hosts is None:
            raise UsageError("--backend ssh needs --hosts HOSTS.toml (make test hosts with "
                             "`harness hosts up 3`)")
        return cls(run, procs, run_id, hosts_file.load(hosts), say)  # type: ignore[no-any-return]
    return cls(run, procs, run_id)  # type: ignore[no-any-return]
