"""What each role needs on this machine, read from the roles' own declarations, and whether it
is here: one row per DB, backend, fault family and external client (``harness doctor``), and
the one line that refuses a run whose needs are missing (``harness run``, before anything
starts). Each missing row names the ``harness setup ...`` that installs it.

A declaration is ``debian_packages``, ``{command or path: the Debian package that brings it}``:
on a DB class (its servers), a backend class (docker's engine, ssh's client), an environment
capability a fault family requires (iptables), an external lock class (its client's
toolchain); a fault family needing :class:`~harness.core.capabilities.ClockFaults` needs
libfaketime on a DB whose clocks it moves. A class may also say why it cannot run here beyond
its packages, ``unavailable() -> str | None`` (a client not built, no Docker engine).
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from dbs.faketime import DEBIAN_PACKAGES as FAKETIME
from dbs.faketime import LIBFAKETIME_PATHS
from harness.controller.backends import BACKENDS, backend_class
from harness.controller.registry import Registry, default_registry
from harness.controller.resolved import make_db
from harness.core import capabilities
from harness.core.errors import HarnessError
from harness.core.roles import load_object

KINDS = ("db", "backend", "fault", "client")
RESOURCE_DB = "redis"  # the protected resource is a Redis of the harness's own
LIBFAKETIME = {LIBFAKETIME_PATHS[0]: FAKETIME[0]}


@dataclass
class Row:
    """One role and what it lacks here (nothing: available)."""

    kind: str  # one of KINDS
    name: str
    packages: dict[str, str] = field(default_factory=dict)  # {command or path: package}
    reason: str | None = None  # beyond packages (not built, no engine)
    missing: dict[str, str] = field(default_factory=dict)
    label: str = ""  # how the one line names it (default: kind and name)

    @property
    def available(self) -> bool:
        return not self.missing and self.reason is None

    @property
    def fix(self) -> str:
        flag = "clients" if self.kind == "client" else "nemesis" if self.kind == "fault" else \
            self.kind
        return f"harness setup --{flag} {self.name}"

    def line(self) -> str:
        """What is missing, in one line, with the command that installs it."""
        what = [f"{w} is missing (Debian package {p})" for w, p in self.missing.items()]
        if self.reason is not None:
            what.append(self.reason)
        return f"{self.label or f'{self.kind} {self.name}'}: {'; '.join(what)}: run `{self.fix}`"


def absent(declared: Mapping[str, str]) -> dict[str, str]:
    """The declared commands (on PATH) and paths (absolute) that are not here."""
    return {what: pkg for what, pkg in declared.items()
            if not (os.path.exists(what) if what.startswith("/") else shutil.which(what))}


def row(kind: str, name: str, classes: Iterable[Any], extra: Mapping[str, str] = {}) -> Row:
    """The row of ``name``: the packages its classes declare, and their own reasons."""
    packages: dict[str, str] = dict(extra)
    reason = None
    for cls in classes:
        packages.update(getattr(cls, "debian_packages", {}))
        probe = getattr(cls, "unavailable", None)
        if reason is None and callable(probe):
            reason = probe()
    return Row(kind, name, packages, reason, absent(packages))


def fault_packages(cls: type, clock_db: type | None = None) -> dict[str, str]:
    """What a fault family needs on the hosts: its environment capabilities' packages, and
    libfaketime for clock faults (unless ``clock_db`` moves its clocks otherwise)."""
    out: dict[str, str] = {}
    for cap in getattr(cls, "requires", ()):
        out.update(getattr(cap, "debian_packages", {}))
        if cap is capabilities.ClockFaults and (
                clock_db is None or capabilities.clock_mechanism(clock_db) == "libfaketime"):
            out.update(LIBFAKETIME)
    return out


def families(reg: Registry) -> dict[str, type]:
    """Each fault family once (an alias, such as partition-halves, is its family's)."""
    out: dict[str, type] = {}
    for entry in reg.entries("nemeses"):
        cls = load_object(entry.target)
        out.setdefault(entry.target, cls)
    return {getattr(c, "name", t): c for t, c in out.items()}


def clients(reg: Registry) -> dict[str, list[type]]:
    """The external clients (a folder of clients/), each with the lock classes it serves."""
    out: dict[str, list[type]] = {}
    for name in reg.names("locks"):
        cls = reg.load("locks", name)
        build = getattr(cls, "build", None)
        if isinstance(build, str):
            out.setdefault(build, []).append(cls)
    return out


def table(reg: Registry | None = None) -> list[Row]:
    """Every DB, backend, fault family and external client, with what it lacks here."""
    reg = reg or default_registry()
    rows = [row("db", n, [reg.load("dbs", n)]) for n in reg.names("dbs")]
    rows += [row("backend", n, [backend_class(n)]) for n in BACKENDS]
    rows += [row("fault", n, [], fault_packages(c)) for n, c in families(reg).items()]
    rows += [row("client", n, cs) for n, cs in clients(reg).items()]
    return rows


def asked(spec: Any, reg: Registry | None = None) -> list[Row]:
    """The rows a run of ``spec`` (a TestSpec) needs: its backend, the lock's client; on the
    local backend also its DB, the resource's, and its faults' host packages; on docker, a DB
    whose nodes run from this host's ``host_dirs``."""
    reg = reg or default_registry()
    rows = [row("backend", spec.backend, [backend_class(spec.backend)])]
    lock = reg.load("locks", spec.lock)
    build = getattr(lock, "build", None)
    if isinstance(build, str):
        rows.append(row("client", build, [lock]))
        rows[-1].label = f"lock {spec.lock!r}"  # as the run's own refusal names it
    db = reg.load("dbs", spec.db)
    if spec.backend == "docker" and db.host_dirs:  # its nodes run this host's server
        rows.append(row("db", spec.db, [db]))
    if spec.backend == "local":
        rows += [row("db", n, [reg.load("dbs", n)]) for n in dict.fromkeys((spec.db,
                                                                            RESOURCE_DB))]
        for name in spec.fault_names:
            cls = reg.load("nemeses", name)
            rows.append(row("fault", getattr(cls, "name", name), [],
                            fault_packages(cls, clock_db=db)))
            if capabilities.ClockFaults in getattr(cls, "requires", ()):
                rows[-1].reason = faketime_unmet(db)
    return rows


def faketime_unmet(db: type) -> str | None:
    """Why ``db``'s server cannot run under libfaketime on this host (Redis: no build with
    MALLOC=libc), without the error's own remedy (the row names its ``harness setup``)."""
    try:
        make_db(db).host_faketime_dir()
    except HarnessError as err:
        return str(err).partition(": run `")[0]
    return None


def unmet(spec: Any, reg: Registry | None = None) -> str | None:
    """The first missing need of a run of ``spec``, in one line, or None."""
    return next((r.line() for r in asked(spec, reg) if not r.available), None)
