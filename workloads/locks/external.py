"""Locks in any language: a program that speaks the client protocol (``docs/clients.md``).

The client process builds an :class:`ExternalLock` like any other lock; the lock starts the
program, greets it (nodes, TTL, lock name, process number, options) and then asks it to
``acquire``, ``release`` and, if it says it can, ``held`` and ``extend``, one JSON line each
way. The workload journals exactly as for a Python lock, and the rules stay:

- an answer ``ok`` / ``fail`` is taken at its word (a ``fail`` acquire must mean "certainly
  not acquired");
- ``info``, a program that does not answer in time, dies, or writes anything that is not the
  protocol is :class:`~harness.core.locks.Indeterminate` (the op is ``info``, never ``fail``);
  the program is then killed, and started again at the next acquire (a crashed application
  restarting; its old lock expires or is released by the server as the lock's design says);
- a grant taken by an earlier run of the program is not released by a later one: releasing it
  is indeterminate, and ``held`` says no.

The program connects to the DB nodes through relays in the client process, one per node
(:class:`workloads.relay.Relay`), whose outgoing connections leave from the client's own
address: ``partition`` cuts its traffic as it cuts any client's, on every backend, and no
program needs to know how to bind a source address. It is the lock's owner, so it runs in the
client's process group: ``pause`` freezes it, ``crash-client`` kills it with the client.

Named clients (``curator``, ``go-etcd-mutex``, ``node-redlock``, ``redis-semaphore``) are
programs built from ``clients/<folder>/`` (:mod:`workloads.external.builds`);
``--lock exec:PATH`` runs any program.
"""

from __future__ import annotations

import os
import sys
import time
from pathlib import Path
from typing import Any, ClassVar

from harness.core.errors import HarnessError
from harness.core.locks import (
    LONG_CRITICAL_SECTIONS,
    Grant,
    Indeterminate,
    LockConfig,
    LockRole,
    Refused,
)
from workloads.external import builds, protocol
from workloads.external.program import Program, ProgramError
from workloads.relay import Relay

RESTART_MIN = 0.5  # seconds before a program that died is started again; doubles up to:
RESTART_MAX = 5.0
REPLY_MIN = 10.0  # seconds a program has to answer (beyond an acquire's own timeout), at least:
REPLY_TTLS = 5  # ...and this many TTLs (a library retrying through a partition is not hung)
INTERNAL_OPTIONS = ("seed", "program", "source", "workload_needs_tokens")


class StartError(HarnessError):
    """The program could not be started or greeted: the client cannot run (one line)."""


class ExternalLock(LockRole):
    """A lock whose every operation is a request to an external program."""

    name = ""
    summary = "a lock program in any language, over the client protocol (docs/clients.md)"
    build: ClassVar[str | None] = None  # folder under clients/ (named clients)
    entry: ClassVar[str] = "client"  # the program in the build's output directory
    start_timeout: ClassVar[float] = 20.0  # seconds for the program to answer hello
    external: ClassVar[bool] = True  # harness list: say whether it is built

    def __init__(self, config: LockConfig) -> None:
        self.config = config
        self.argv = self.command(config)
        self.label = self.name or f"exec:{self.argv[0]}"
        self.relays = [Relay([(n.host, n.port)], connect_timeout=config.op_timeout)
                       for n in config.nodes]
        self.incarnation = 0
        self.program: Program | None = None
        self._backoff = RESTART_MIN
        self._next_start = 0.0
        self._down = ""
        try:
            hello = self._start()
        except ProgramError as e:
            self.close()
            raise StartError(str(e)) from None
        needs = bool(config.harness.get("workload_needs_tokens")) or (
            self.tokens and self.build is not None)
        if needs and not hello.tokens:
            self.close()
            raise StartError(f"{self.label} says its grants carry no fencing tokens (hello: "
                             "tokens false); this run needs them")
        if "held" in hello.features:
            self.held = self._held
        if "extend" in hello.features:
            self.extend = self._extend

    # what to run -----------------------------------------------------------------------------
    @classmethod
    def command(cls, config: LockConfig) -> list[str]:
        """The program's argv: a named client's built program."""
        assert cls.build is not None
        out = builds.built(cls.build)
        if out is None:
            raise StartError(f"lock {cls.name!r}: {builds.not_built_reason(cls.build)}")
        return [str(out / cls.entry)]

    @classmethod
    def unavailable(cls) -> str | None:
        """Why this lock cannot run here (not built), or None."""
        if cls.build is None or builds.built(cls.build) is not None:
            return None
        return builds.not_built_reason(cls.build)

    def greeting(self) -> dict[str, Any]:
        c = self.config
        return protocol.hello(
            process=c.process, lock=c.name, ttl=c.ttl, op_timeout=c.op_timeout,
            nodes=[{"name": n.name, "host": r.address[0], "port": r.address[1]}
                   for n, r in zip(c.nodes, self.relays, strict=True)],
            source=c.harness.get("source"), seed=int(c.harness.get("seed", 0)),
            options={**{k: v for k, v in c.harness.items() if k not in INTERNAL_OPTIONS},
                     **c.options})

    # the program's life ----------------------------------------------------------------------
    def _start(self) -> protocol.Hello:
        program = Program(self.argv, self.label)
        began = time.monotonic()
        hello = program.start(self.greeting(), self.start_timeout)
        self.incarnation += 1
        self.program = program
        self.hello = hello
        self._backoff = RESTART_MIN
        log(f"{self.label} (pid {program.pid}) ready in {time.monotonic() - began:.2f} s"
            f"{f' (start #{self.incarnation})' if self.incarnation > 1 else ''}: "
            f"{hello.name} {hello.version}".rstrip(": "))
        return hello

    def _lost(self, why: str) -> None:
        """The program cannot be trusted any more: kill it; the next acquire starts it."""
        if self.program is not None:
            self.program.kill()
        self.program = None
        self._down = why
        self._next_start = time.monotonic() + self._backoff
        log(f"{why}; killed, next start in {self._backoff:g} s at the earliest")
        self._backoff = min(RESTART_MAX, self._backoff * 2)

    def _running(self, wait: float) -> Program:
        """The program, started again if it is down (waiting at most ``wait`` for that)."""
        if self.program is not None:
            if self.program.alive():
                return self.program
            self._lost(f"{self.label} {self.program.exit_status()} between requests")
        delay = self._next_start - time.monotonic()
        if delay > 0:
            time.sleep(min(delay, wait))  # the acquire waits, as it would for the lock
        if delay > wait:
            raise Indeterminate(f"{self.label} is down ({self._down}); next start in "
                                f"{delay - wait:.1f} s")
        try:
            self._start()
        except ProgramError as e:
            self._lost(str(e))
            raise Indeterminate(f"could not start it again: {e}") from None
        assert self.program is not None
        return self.program

    def _call(self, program: Program, op: str, budget: float, **fields: Any) -> protocol.Reply:
        try:
            return program.call(op, budget, **fields)
        except ProgramError as e:
            self._lost(str(e))
            raise Indeterminate(str(e)) from None

    def _current(self, grant: Grant) -> tuple[Program, Any]:
        """The program that took ``grant`` and its handle; Indeterminate if it is gone."""
        incarnation, handle = grant.handle
        program = self.program
        if incarnation != self.incarnation or program is None or not program.alive():
            why = program.exit_status() if program is not None else self._down
            raise Indeterminate(f"the program that took this grant is gone ({why})")
        return program, handle

    def reply_budget(self) -> float:
        return max(REPLY_MIN, REPLY_TTLS * self.config.ttl)

    # the Lock API ------------------------------------------------------------------------------
    def acquire(self, timeout: float) -> Grant | None:
        program = self._running(timeout)
        reply = self._call(program, "acquire", timeout + self.reply_budget(), timeout=timeout)
        if reply.type == protocol.FAIL:
            return refused(reply, None)
        if reply.type == protocol.INFO:
            raise Indeterminate(f"{self.label}: {reply.error or 'it cannot tell'}")
        if self.hello.tokens and reply.token is None:
            self._lost(f"{self.label} broke the protocol (acquire): ok without the token "
                       "its hello promised")
            raise Indeterminate(f"{self.label}: a grant without a token")
        return Grant(token=reply.token, validity=reply.validity,
                     handle=(self.incarnation, reply.handle))

    def release(self, grant: Grant) -> bool:
        program, handle = self._current(grant)
        reply = self._call(program, "release", self.reply_budget(), token=grant.token,
                           handle=handle)
        if reply.type == protocol.INFO:
            raise Indeterminate(f"{self.label}: {reply.error or 'it cannot tell'}")
        return reply.type == protocol.OK or refused(reply, False)

    def _held(self, grant: Grant) -> bool:
        """Does the program still hold ``grant``? Anything but a clear yes is no: the careful
        client stops working under a lock it cannot vouch for."""
        try:
            program, handle = self._current(grant)
            reply = self._call(program, "held", self.reply_budget(), token=grant.token,
                               handle=handle)
        except Indeterminate:
            return False
        return reply.type == protocol.OK and reply.held is True

    def _extend(self, grant: Grant) -> Grant | None:
        """Extend ``grant`` by the TTL: the new grant, None if it was no longer held."""
        program, handle = self._current(grant)
        reply = self._call(program, "extend", self.reply_budget(), token=grant.token,
                           handle=handle, ttl=self.config.ttl)
        if reply.type == protocol.FAIL:
            return None
        if reply.type == protocol.INFO:
            raise Indeterminate(f"{self.label}: {reply.error or 'it cannot tell'}")
        return Grant(token=grant.token if reply.token is None else reply.token,
                     validity=reply.validity,
                     handle=(self.incarnation, handle if reply.handle is None else reply.handle))

    def close(self) -> None:
        if self.program is not None:
            self.program.close()
            self.program = None
        for relay in self.relays:
            relay.close()


def refused(reply: protocol.Reply, plain: Any) -> Any:
    """A ``fail`` answer: :class:`Refused` with the program's error text, so that the history
    keeps it; ``plain`` (None, False) when it gave none."""
    if reply.error:
        raise Refused(reply.error)
    return plain


def log(line: str) -> None:
    """One line into the client's log (the client's stderr)."""
    print(f"external lock: {line}", file=sys.stderr, flush=True)


class ExecLock(ExternalLock):
    """``--lock exec:PATH``: the program at PATH. It declares its tokens in its hello."""

    summary = "the program at PATH, over the client protocol (docs/clients.md)"
    tokens = True  # as far as the registry can tell: the hello says, and is checked
    start_timeout = 30.0

    @classmethod
    def command(cls, config: LockConfig) -> list[str]:
        path = str(config.harness.get("program") or "")
        if not path or not os.access(path, os.X_OK) or not Path(path).is_file():
            raise StartError(f"--lock exec:{path}: not an executable file")
        return [path]


class CuratorLock(ExternalLock):
    name = "curator"
    promise = ("a globally synchronous lock: at no snapshot in time do two clients think they hold "
               "it")
    summary = "Apache Curator's InterProcessMutex (a Java program); token: znode sequence"
    dbs = ("zookeeper",)
    tokens = True
    build = "curator"
    debian_packages = {"javac": "openjdk-17-jdk-headless",  # its client's build toolchain
                       "/usr/share/java/curator-recipes.jar": "libcurator-recipes-java"}
    start_timeout = 30.0  # a JVM
    workload_defaults: ClassVar[dict[str, float]] = LONG_CRITICAL_SECTIONS


class GoEtcdMutexLock(ExternalLock):
    name = "go-etcd-mutex"
    promise = "a distributed mutex whose session lease is kept alive while the holder lives"
    summary = "etcd's own Go concurrency.Mutex, Session TTL (a Go program); token: revision"
    dbs = ("etcd",)
    tokens = True
    build = "go-etcd-mutex"
    debian_packages = {"go": "golang-go", "/usr/share/gocode/src/go.etcd.io/etcd/clientv3/"
                       "concurrency": "golang-etcd-server-dev"}
    workload_defaults: ClassVar[dict[str, float]] = LONG_CRITICAL_SECTIONS


class NodeRedlockLock(ExternalLock):
    name = "node-redlock"
    promise = "Redlock: safe as long as a quorum of masters agrees and clocks drift little"
    summary = "npm's redlock 4 over independent masters (a Node program)"
    dbs = ("redis-masters", "redis")
    build = "node-redlock"
    debian_packages = {"node": "nodejs", "npm": "npm"}
    library = "npm:redlock"
    entry = "redlock"


class RedisSemaphoreLock(ExternalLock):
    name = "redis-semaphore"
    promise = "a distributed mutex whose lock is refreshed while held"
    summary = "npm's redis-semaphore Mutex, refreshed every 0.8 x TTL (a Node program)"
    dbs = ("redis",)
    build = "node-redlock"
    debian_packages = {"node": "nodejs", "npm": "npm"}
    library = "npm:redis-semaphore"
    entry = "semaphore"
