"""Fixtures shared by the test files that run servers."""

from __future__ import annotations

import resource
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


@pytest.fixture(autouse=True)
def address_space_restored() -> Iterator[None]:
    """A test that runs `harness check` in this process caps its address space (the memory
    budget, RLIMIT_AS); every process started after it would inherit the cap (seen in CI:
    etcd could not map its database, chromium crashed). Put back after every test."""
    before = resource.getrlimit(resource.RLIMIT_AS)
    yield
    if resource.getrlimit(resource.RLIMIT_AS) != before:
        resource.setrlimit(resource.RLIMIT_AS, before)
