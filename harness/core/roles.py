"""The roles, each a class that declares itself, and how a class is loaded from a target.

Every role has ``name`` (what specs and the CLI call it) and ``summary`` (one line for
``harness list``). The registry (:mod:`harness.controller.registry`) finds built-in roles and
installed plugins by name; the protocols here are what it expects of each kind:

- ``DB`` (``dbs/``): configure, run and probe one node of a server; capabilities
  (:mod:`harness.core.capabilities`) by implementing their methods.
- ``Lock`` (client side): :mod:`harness.core.locks`.
- ``Nemesis``: a fault; declares the capabilities it ``requires`` and the ``targets`` roles
  it can aim at (``holder``, ``waiter``, ``leader``, ``node:n2``, ...).
- ``Checker``: ``check(history, **params) -> {"valid": ...}``, a pure function.
- ``Workload``: the client loop and the checkers (with their parameters) it needs.
"""

from __future__ import annotations

import importlib
from collections.abc import Collection, Mapping, Sequence
from pathlib import Path
from typing import Any, ClassVar, Protocol

from harness.core.cluster import NemesisContext, Node
from harness.core.history import Op


class RoleError(Exception):
    """A role class that cannot be loaded or does not declare what it must (one line)."""


def load_object(target: str) -> Any:
    """``package.module:Name`` -> the object. Any error while importing the module is one
    line naming the module and the cause (a plugin's own bug included)."""
    module_name, sep, attr = target.partition(":")
    if not sep or not module_name or not attr:
        raise RoleError(f"{target!r} is not of the form package.module:Class")
    try:
        module = importlib.import_module(module_name)
    except ImportError as e:
        raise RoleError(f"cannot import module {module_name!r}: {e}") from None
    except Exception as e:  # a plugin that raises at import time: its bug, said in one line
        raise RoleError(f"importing {module_name!r} failed: {type(e).__name__}: "
                        f"{str(e)[:200]}") from None
    obj: Any = module
    for part in attr.split("."):
        obj = getattr(obj, part, None)
        if obj is None:
            raise RoleError(f"{module_name} has no {attr!r}")
    return obj


class DB(Protocol):
    """Every member of a DB. A DB class subclasses :class:`dbs.base.DB`, which gives the
    optional ones (from ``default_nodes`` on) their defaults; capabilities
    (:mod:`harness.core.capabilities`) are methods beside these."""

    name: ClassVar[str]
    summary: ClassVar[str]
    port: ClassVar[int]
    default_nodes: ClassVar[int]  # 1
    min_nodes: ClassVar[int]  # 1
    persistence_modes: ClassVar[tuple[str, ...]]  # ("none",)
    default_lock: ClassVar[str | None]  # None
    debian_packages: ClassVar[dict[str, str]]  # {}: {command or path: Debian package}
    stop_signal: ClassVar[int | None]  # None: SIGTERM to stop, SIGKILL at teardown
    user: str | None  # None: the server runs as root
    clock_mechanism: ClassVar[str]  # "libfaketime" (or "vdso")
    clocks: ClassVar[tuple[str, ...]]  # ("wall",)
    apt_source: ClassVar[str | None]  # None: its packages are in Debian's archive
    refused_backends: ClassVar[dict[str, str]]  # {}: backend -> why it cannot run a node
    host_dirs: ClassVar[tuple[str, ...]]  # (): folders of this host its nodes run from

    def check_environment(self) -> None:
        """Raise HarnessError with one line saying what is missing (binary, ...)."""

    def files(self, node: Node, cluster: list[Node], node_dir: Path) -> dict[str, str]:
        """Config files to write into ``node_dir`` before the first start."""

    def argv(self, node: Node, node_dir: Path) -> list[str]:
        """The command line that runs the server in the foreground, logging to stdout."""

    def ready(self, node: Node) -> bool:
        """Does the node answer now? (One short probe; the backend retries.)"""

    def configure_for(self, needs: Collection[type]) -> None:
        """The capabilities the run's nemeses need, before the config files (nothing)."""

    def init_argv(self, node: Node, node_dir: Path) -> list[str] | None:
        """Run once before the node's first start (None: nothing)."""

    def local_argv(self, node: Node, node_dir: Path, first: bool) -> list[str]:
        """The command line on this machine (:meth:`argv` unless a local cache helps)."""

    def started(self, node: Node) -> bool:
        """May the next node start? (True: at once.)"""

    def host_faketime_dir(self) -> Path | None:
        """A directory first on PATH for the server under libfaketime here (None: none)."""

    def repair_before_restart(self, node: Node, data_dir: Path, aside: Path) -> list[str]:
        """After a power loss, before the restart: what the DB's fixed release would repair
        at its start, done; in words ([]: nothing)."""


class Nemesis(Protocol):
    name: ClassVar[str]
    summary: ClassVar[str]
    requires: ClassVar[tuple[type, ...]]
    targets: ClassVar[tuple[str, ...]]

    def setup(self, ctx: NemesisContext) -> None: ...

    def select(self, ctx: NemesisContext, target: str | None) -> list[str] | None:
        """Endpoints to hit now, for the target role asked (None: the nemesis's own choice);
        None when there is none right now."""

    def start(self, ctx: NemesisContext, targets: list[str]) -> None: ...

    def duration(self, ctx: NemesisContext) -> float: ...

    def stop(self, ctx: NemesisContext, targets: list[str]) -> None: ...

    def teardown(self, ctx: NemesisContext) -> None:
        """Heal everything this nemesis can have done."""

    def detail(self) -> dict[str, Any] | None: ...

    def expect(self, ctx: NemesisContext, targets: list[str]) -> dict[str, Any] | None:
        """Claims the history must bear out while the fault is on (the faults checker)."""


class Checker(Protocol):
    """:class:`checker.base.Checker` gives the defaults of the words (none) and ``budgeted``."""

    name: ClassVar[str]
    summary: ClassVar[str]
    figures: ClassVar[Mapping[str, str | None]]  # result key -> words (summary line, chips)
    violations: ClassVar[Mapping[str, tuple[str, str]]]  # result key -> (singular, plural)
    caveats: ClassVar[tuple[str, ...]]  # result keys of what its verdict does not cover
    budgeted: ClassVar[bool]  # takes the run's time_limit and max_states

    @staticmethod
    def check(history: Sequence[Op], **params: Any) -> dict[str, Any]: ...


class Workload(Protocol):
    name: ClassVar[str]
    summary: ClassVar[str]
    needs_tokens: ClassVar[bool]
    fenced: ClassVar[bool]

    @classmethod
    def checkers(cls, spec: Mapping[str, Any]) -> list[tuple[str, dict[str, Any]]]:
        """The checkers this workload's histories need, each with its parameters."""

    def run(self) -> None: ...
