"""Fixtures shared by the test files that run servers, and the rule that turns a skip for a
missing server or client into a failure where they must be present (CI)."""

from __future__ import annotations

import re
import resource
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.harness_runs import docker_engine, harness


@pytest.fixture
def store(tmp_path: Path) -> Iterator[Path]:
    """A results store of the test's own; afterwards, `harness clean --store` removes what its
    dead runs left: never what another test (in another xdist worker) made, nor a live run."""
    yield tmp_path / "results"
    harness("clean", "--store", str(tmp_path / "results"))


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


# Where everything must be there (CI passes both options), a skip is a failure, not a quiet
# pass: an unbuilt external lock client under --harness-require-clients, any other reason
# (a server, docker, FUSE, chromium, the linter: what setup.sh installs or builds) under
# --harness-require-servers. One reason stays a skip: a test that needs root, which CI cannot
# lack (.ci/run runs setup.sh first, and setup.sh stops unless it runs as root).
MISSING_CLIENT = re.compile(r"^client \S+ is not built")
NOT_IN_CI = re.compile(r"\bneeds? root\b")


def required_by(reason: str) -> str | None:
    """The option that makes a skip with this reason a failure, if any."""
    if MISSING_CLIENT.search(reason):
        return "--harness-require-clients"
    if NOT_IN_CI.search(reason):
        return None
    return "--harness-require-servers"


def fail_where_required(report: Any, config: pytest.Config, reason: str) -> None:
    option = required_by(reason)
    if option is not None and config.getoption(option, default=False):
        report.outcome = "failed"
        report.longrepr = f"{reason} (a failure here: {option})"


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]) -> Iterator[None]:
    outcome = yield
    report = outcome.get_result()  # type: ignore[attr-defined]
    if report.skipped and call.excinfo is not None:
        fail_where_required(report, item.config,
                            str(getattr(call.excinfo.value, "msg", "") or ""))

