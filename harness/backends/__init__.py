"""Backends: where nodes live. The nemesis never knows which one it drives."""

from __future__ import annotations

from harness.backends.base import Backend
from harness.errors import UsageError

BACKENDS = ("local",)


def check_backend(name: str) -> None:
    if name not in BACKENDS:
        raise UsageError(f"unknown backend {name!r}: use one of {', '.join(BACKENDS)}")


__all__ = ["BACKENDS", "Backend", "check_backend"]
