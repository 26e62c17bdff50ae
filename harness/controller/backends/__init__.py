"""Backends: where nodes live. The nemesis never knows which one it drives."""

from __future__ import annotations

from harness.controller.backends.base import Backend
from harness.controller.procs import ProcessTable
from harness.controller.store import RunDir
from harness.core.errors import UsageError

BACKENDS = ("local", "docker")


def check_backend(name: str) -> None:
    if name not in BACKENDS:
        raise UsageError(f"unknown backend {name!r}: use one of {', '.join(BACKENDS)}")


def make(name: str, run: RunDir, procs: ProcessTable, run_id: str) -> Backend:
    check_backend(name)
    if name == "docker":
        from harness.controller.backends.docker import DockerBackend

        return DockerBackend(run, procs, run_id)
    from harness.controller.backends.local import LocalBackend

    return LocalBackend(run, procs, run_id)


__all__ = ["BACKENDS", "Backend", "check_backend", "make"]
