"""The test as a run receives it: one value, built once from a validated spec
(:meth:`harness.controller.spec.TestSpec.resolve`), holding each role's registry entry and
class, with every default applied and the roles checked against each other once
(:meth:`harness.controller.registry.Registry.check_run`). The run, its client configs, its
checking and what test.json records of its plugins read the roles here: nothing downstream
looks a role up by name again."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from harness.controller.registry import Entry, requires

if TYPE_CHECKING:
    from harness.controller.spec import TestSpec

Check = tuple[Entry, Callable[..., Any], dict[str, Any]]  # a checker, its function, params


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
    spec: TestSpec  # validated: every default applied; what test.json keeps, as it was
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

    def plugins(self) -> list[dict[str, Any]]:
        """What test.json keeps of every role the run used: db, lock, workload, nemeses,
        resource, checkers."""
        roles = [self.db, self.lock, self.workload, *self.nemeses.values(), self.resource]
        return [*(r.entry.record() for r in roles), *(e.record() for e, _, _ in self.checkers)]


def make_db(db_cls: type, persistence: str = "none") -> Any:
    """An instance of a DB class; ``persistence`` other than none only where it is known."""
    if persistence == "none":
        return db_cls()
    return db_cls(persistence=persistence)
