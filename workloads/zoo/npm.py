"""The zoo's npm libraries: Node programs of ``clients/node-redlock/`` (one a library, each
used as its README shows; versions pinned by its package-lock.json), spoken to over the
client protocol (``docs/clients.md``). ``library`` names the npm package (``npm:NAME``) whose
pinned version the run records. Built by ``harness setup --zoo`` (or ``--clients``)."""

from __future__ import annotations

from typing import ClassVar

from harness.core.locks import LONG_CRITICAL_SECTIONS
from workloads.locks.external import ExternalLock


class NpmZooLock(ExternalLock):
    """A zoo library's program: ``clients/node-redlock/<name>.js``. Its lock is kept alive
    while held (a lease renewed, a lock extended), so holds outlast the TTL by default."""

    build = "node-redlock"
    debian_packages: ClassVar[dict[str, str]] = {"node": "nodejs", "npm": "npm"}
    library: ClassVar[str] = ""
    promise: ClassVar[str] = ""
    workload_defaults: ClassVar[dict[str, float]] = LONG_CRITICAL_SECTIONS

    def __init_subclass__(cls, **kwargs: object) -> None:
        super().__init_subclass__(**kwargs)
        cls.entry = cls.name


class SesameRedlock(NpmZooLock):
    name = "sesame-redlock"
    summary = ("npm's @sesamecare-oss/redlock using(): Redlock extended automatically while "
               "held; held: its abort signal (a Node program)")
    promise = ("Redlock with automatic extension: the routine's signal is aborted when an "
               "extension fails")
    library = "npm:@sesamecare-oss/redlock"
    dbs = ("redis", "redis-masters")


class Etcd3NpmLock(NpmZooLock):
    name = "etcd3-lock"
    summary = ("npm's etcd3 lock(name).ttl(ttl): a key on a lease the client keeps alive, "
               "retried until the timeout (a Node program)")
    promise = "a distributed lock on an etcd lease, kept alive while held"
    library = "npm:etcd3"
    dbs = ("etcd",)


class AdvisoryLockNpm(NpmZooLock):
    name = "advisory-lock"
    summary = ("npm's advisory-lock tryLock(): a PostgreSQL session advisory lock on a "
               "connection of its own (a Node program)")
    promise = "a distributed mutex on PostgreSQL advisory locks"
    library = "npm:advisory-lock"
    dbs = ("postgres",)
    workload_defaults: ClassVar[dict[str, float]] = {}  # no lease: the usual short holds


class DynamodbLockClient(NpmZooLock):
    name = "dynamodb-lock-client"
    summary = ("npm's dynamodb-lock-client FailOpen: a lease renewed by heartbeats, taken over "
               "after a lease without one; token: its fencingToken (a Node program)")
    promise = ("fail open: a lock whose holder died expires leaseDurationMs after its last "
               "heartbeat; fencing tokens for the resource to check")
    library = "npm:dynamodb-lock-client"
    dbs = ("dynamodb",)
    tokens = True
