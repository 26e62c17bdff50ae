"""The test as a run receives it: one value, built once from a validated spec
(:meth:`harness.controller.spec.TestSpec.resolve`), holding each role's registry entry and
class, with every default applied and the roles checked against each other once
(:meth:`ResolvedTest.check`). The run, its client configs, its
checking and what test.json records of its plugins read the roles here: nothing downstream
looks a role up by name again."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Protocol

from harness.controller.registry import (
    Check,
    Entry,
    Registry,
    check_environment,
    is_session_lock,
    library_version,
    requires,
)
from harness.core import capabilities
from harness.core.errors import UsageError


class Spec(Protocol):
    """What the resolved test reads of the validated spec (a
    :class:`harness.controller.spec.TestSpec`, every default applied)."""

    db: str
    lock: str
    workload: str
    resource: str | None
    resource_mode: str | None
    persistence: str
    ttl: float
    op_timeout: float | None
    nemesis_options: dict[str, Any]

    @property
    def fault_names(self) -> list[str]: ...


@dataclass(frozen=True)
class Role:
    """A role of the run: how the registry knows it (test.json records it) and its class."""

    entry: Entry
    cls: type

    @property
    def target(self) -> str:
        return self.entry.target


@dataclass(frozen=True)
class ResolvedTest:
    spec: Spec  # a TestSpec, validated: every default applied; what test.json keeps, as it was
    db: Role
    lock: Role
    workload: Role
    resource: Role
    resource_db: type | None  # the class of the resource's own DB; None: node 1's database
    nemeses: Mapping[str, Role]  # every fault the run sets up (spec.fault_names), by name
    checkers: tuple[Check, ...]  # what the workload asks for, with their parameters

    def make_db(self) -> Any:
        """A new instance of the run's DB, with its persistence mode."""
        return make_db(self.db.cls, self.spec.persistence)

    def requires(self, fault: str) -> tuple[type, ...]:
        """The capabilities a fault of this run needs, with what its options add."""
        return requires(self.nemeses[fault].cls, self.spec.nemesis_options)

    def check(self, registry: Registry, environment: Any) -> None:
        """The one place a run's roles are checked against each other (once, when the spec
        resolves). Raise UsageError (one line) if the lock, workload and faults cannot run on the
        test's db, or the protected resource cannot take the lock's writes.
        ``environment(capability) -> reason | None`` answers for environment capabilities
        (None: the backend answers them when the run starts); a nemesis may refuse its options
        on this db (``refuse(db, options, ttl, op_timeout)``, a reason or None): a stall on a
        link the db does not have, say."""
        test = self
        spec, lock, wl = test.spec, test.lock.cls, test.workload.cls
        dbs = tuple(getattr(lock, "dbs", ()) or ())
        if dbs and spec.db not in dbs:
            raise UsageError(f"lock {spec.lock!r} runs on --db {', '.join(dbs)}, not "
                             f"{spec.db!r}")
        modes = getattr(wl, "resource_modes", None)
        mode = str(spec.resource_mode)
        if modes is not None and mode not in modes:
            raise UsageError(f"--workload {spec.workload} uses --resource-mode "
                             f"{' or '.join(modes)}, not {mode!r} (it writes nothing a "
                             "resource could guard: use --workload mutex or fenced)")
        if ((getattr(wl, "needs_tokens", False) or mode == "fenced")
                and not getattr(lock, "tokens", False)):
            what = f"--workload {spec.workload}" if getattr(wl, "needs_tokens", False) else \
                "--resource-mode fenced"
            raise UsageError(f"{what} needs a lock with fencing tokens; "
                             f"{spec.lock!r} has no fencing tokens (a lock class declares them "
                             "with tokens = True)")
        check_resource(test)
        db_obj = test.make_db()
        for name in test.nemeses:
            for cap in test.requires(name):
                if capabilities.is_environment(cap):
                    check_environment(name, (cap,), environment)
                    continue
                reason = capabilities.unmet(cap, db_obj)
                if reason == capabilities.GENERIC:
                    others = registry.dbs_with(cap)
                    hint = f" ({', '.join(others)})" if others else ""
                    raise UsageError(f"--nemesis {name} needs {capabilities.describe(cap)}"
                                     f"{hint}, not {spec.db!r}")
                if reason is not None:
                    raise UsageError(f"--nemesis {name}: {reason}")
            refuse = getattr(test.nemeses[name].cls, "refuse", None)
            if callable(refuse):
                reason = refuse(db_obj, dict(spec.nemesis_options), spec.ttl, spec.op_timeout)
                if reason:
                    raise UsageError(f"--nemesis {name}: {reason}")

    def plugins(self) -> list[dict[str, Any]]:
        """What test.json keeps of every role the run used: db, lock, workload, nemeses,
        resource, checkers."""
        roles = [self.db, self.lock, self.workload, *self.nemeses.values(), self.resource]
        out = [*(r.entry.record() for r in roles), *(e.record() for e, _, _ in self.checkers)]
        library = getattr(self.lock.cls, "library", "")
        if library:  # the library the lock wraps, and its version here (the zoo's page)
            out[1]["library"] = {"name": library, "version": library_version(library)}
        return out


def make_db(db_cls: type, persistence: str = "none") -> Any:
    """An instance of a DB class; ``persistence`` other than none only where it is known."""
    if persistence == "none":
        return db_cls()
    return db_cls(persistence=persistence)


def check_resource(test: ResolvedTest) -> None:
    """The resource has the run's mode, and a lock that writes in its own transaction has
    the resource in its own database."""
    spec, res = test.spec, test.resource.cls
    modes = tuple(getattr(res, "modes", ()))
    if spec.resource_mode not in modes:
        raise UsageError(f"--resource-mode {spec.resource_mode}: --resource {spec.resource} "
                         f"has {', '.join(modes)}")
    if is_session_lock(test.lock.cls) and (not getattr(res, "accepts_session", False)
                                           or getattr(res, "db", "") != spec.db):
        raise UsageError(f"lock {spec.lock!r} writes in its own transaction: it needs "
                         f"--resource {spec.db} (the resource in the lock's database), "
                         f"not {spec.resource!r}")
