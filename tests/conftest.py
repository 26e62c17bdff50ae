"""Fixtures shared by the test files that run servers."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.harness_runs import docker_engine, harness


@pytest.fixture
def store(tmp_path: Path) -> Iterator[Path]:
    """A results store of the test's own; afterwards, `harness clean` removes what dead runs
    left (never other live runs: no --force)."""
    yield tmp_path / "results"
    harness("clean")


@pytest.fixture
def docker_client() -> Any:
    """A Docker SDK client with the node image present (the test is skipped otherwise)."""
    return docker_engine()
