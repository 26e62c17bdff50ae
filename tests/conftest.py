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


# A test skipped because this machine lacks what setup.sh installs or builds: a server (or
# docker, chromium, the linter) or an external lock client. Where they must be there (CI passes
# both options), such a skip is a failure, not a quiet pass. A skip for another reason (not
# root) stays a skip.
MISSING_SERVER = re.compile(r"missing|not installed|unavailable|not reachable|needs a JVM|"
                            r"no libc-malloc Redis")
MISSING_CLIENT = re.compile(r"^client \S+ is not built")


def required_by(reason: str) -> str | None:
    """The option that makes a skip with this reason a failure, if any."""
    if MISSING_CLIENT.search(reason):
        return "--harness-require-clients"
    if MISSING_SERVER.search(reason):
        return "--harness-require-servers"
    return None


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]) -> Iterator[None]:
    outcome = yield
    report = outcome.get_result()  # type: ignore[attr-defined]
    if not report.skipped or call.excinfo is None:
        return
    reason = str(getattr(call.excinfo.value, "msg", "") or "")
    option = required_by(reason)
    if option is not None and item.config.getoption(option, default=False):
        report.outcome = "failed"
        report.longrepr = f"{reason} (a failure here: {option})"
