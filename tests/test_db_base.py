"""Every DB subclasses dbs.base.DB: it has every member the DB protocol lists (the optional
ones with the base's defaults), and the registry refuses a DB class that does not."""

from __future__ import annotations

import signal
from pathlib import Path
from typing import ClassVar

import pytest

from dbs.base import DB
from dbs.redis_sentinel import SentinelProcess
from harness.controller.backends.process_nodes import stop_signal
from harness.controller.registry import BUILTINS, Registry
from harness.core import roles
from harness.core.cluster import Node
from harness.core.errors import UsageError

REG = Registry(entry_points=False)
NODE = Node("n1", "127.0.0.1", 7777)
MEMBERS = sorted({*roles.DB.__annotations__,
                  *(n for n, v in vars(roles.DB).items() if callable(v) and n[0] != "_")})


class Minimal(DB):
    name: ClassVar[str] = "minimal"
    summary: ClassVar[str] = "only what a DB must have"
    port: ClassVar[int] = 7777

    def check_environment(self) -> None:
        pass

    def files(self, node: Node, cluster: list[Node], node_dir: Path) -> dict[str, str]:
        return {}

    def argv(self, node: Node, node_dir: Path) -> list[str]:
        return ["minimal-server", str(node_dir)]

    def ready(self, node: Node) -> bool:
        return True


class Loose:
    """Every required method, but not built on dbs.base.DB."""

    name = "loose"
    summary = "a DB class of before the base"
    port = 7777
    check_environment = files = argv = ready = Minimal.ready


def test_the_protocol_lists_every_member() -> None:
    assert len(MEMBERS) == 25
    assert {"user", "stop_signal", "debian_packages", "init_argv", "local_argv", "started",
            "host_faketime_dir", "clock_mechanism", "clocks", "repair_before_restart",
            "configure_for", "apt_source", "refused_backends", "host_dirs"} <= set(MEMBERS)


@pytest.mark.parametrize("name", list(BUILTINS["dbs"]))
def test_every_builtin_db_has_every_member(name: str) -> None:
    cls = REG.load("dbs", name)
    assert issubclass(cls, DB)
    missing = [m for m in MEMBERS if not hasattr(cls, m)]
    assert missing == []


def test_the_companion_process_is_a_db_too() -> None:
    assert issubclass(SentinelProcess, DB)
    assert [m for m in MEMBERS if not hasattr(SentinelProcess, m)] == []


def test_the_optional_members_default_to_doing_nothing_special() -> None:
    db = Minimal()
    assert db.init_argv(NODE, Path("/d")) is None
    assert db.local_argv(NODE, Path("/d"), first=True) == ["minimal-server", "/d"]
    assert db.started(NODE) is True
    assert db.host_faketime_dir() is None
    assert db.user is None and db.debian_packages == {}
    assert (db.default_nodes, db.min_nodes, db.persistence_modes) == (1, 1, ("none",))
    assert (db.clock_mechanism, db.clocks, db.default_lock) == ("libfaketime", ("wall",), None)
    assert stop_signal(db) == signal.SIGTERM
    assert stop_signal(REG.load("dbs", "postgres")()) == signal.SIGINT


def test_a_db_class_not_built_on_the_base_is_refused_in_one_line() -> None:
    assert REG.load("dbs", "tests.test_db_base:Minimal") is Minimal
    with pytest.raises(UsageError) as e:
        REG.load("dbs", "tests.test_db_base:Loose")
    assert str(e.value) == ("db 'tests.test_db_base:Loose': tests.test_db_base:Loose does not "
                            "subclass dbs.base.DB")
