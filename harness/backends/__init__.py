"""Backends: where nodes live. The nemesis never knows which one it drives."""

from __future__ import annotations

from pathlib import Path

from harness.backends.base import Backend
from harness.errors import UsageError
from harness.procs import ProcessTable

BACKENDS = ("local", "docker")


def check_backend(name: str) -> None:
    if name not in BACKENDS:
        raise UsageError(f"unknown backend {name!r}: use one of {', '.join(BACKENDS)}")


def make(name: str, run_dir: Path, procs: ProcessTable, run_id: str) -> Backend:
    if name == "docker":
        from harness.backends.docker import DockerBackend

        return DockerBackend(run_dir, procs, run_id)
    from harness.backends.local import LocalBackend

    return LocalBackend(run_dir, procs, run_id)


__all__ = ["BACKENDS", "Backend", "check_backend", "make"]
