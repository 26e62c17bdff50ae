"""The protected resource: what a lock protects, and the ground truth of every run.

A resource is a real server of its own kind (Redis, PostgreSQL) that a workload writes to under
the lock. The server itself numbers every write (``seq``) and appends it to a log, accepted or
not; the log is read back at the end of the run (the final ``read`` op the checkers use).

How the resource protects itself is its **mode**:

- ``plain``: it accepts every write (the lock alone keeps the data safe, or not);
- ``fenced``: it rejects a write whose fencing token is stale (Kleppmann's fencing tokens; in
  SQL the seed's ``UPDATE ... WHERE last_fencing_token < :token``);
- ``version``: optimistic concurrency: a writer reads the version and its write commits only
  ``WHERE version = :read_version`` (each accepted write moves it on);
- ``cas``: antirez's check-and-set: the resource remembers the lock value of its last writer;
  a write commits only if that value is unchanged since its writer read it.

In ``version`` and ``cas`` modes a critical section starts with a logged :meth:`read` that
returns what the writes must ``expect``; each accepted write returns the next ``expect``.

Each lock (``--keys N``) guards its own data: its own row, highest token, version, counter;
the log is one, in the server's order, each entry naming its lock.

A write may carry an idempotency ``key`` (the ``idempotent`` workload): the resource stores it
with the write's effect in one transaction, and a key it has seen is not applied again.

A lock whose critical section must write through its own database session (``SELECT ... FOR
UPDATE`` and the writes in one transaction) hands that session to the write (``via``); only a
resource in that lock's database can take it.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, ClassVar, Protocol

MODES = ("plain", "fenced", "version", "cas")
READ_MODES = ("version", "cas")  # modes whose critical sections read before they write


@dataclass(frozen=True)
class Write:
    """One write of a critical section."""

    process: int
    session: int
    kind: str  # enter / exit / increment / apply
    lock: str = "lock"  # the key whose data it is (with --keys N, each lock guards its own)
    token: int | None = None  # fenced: the grant's fencing token
    first: bool = True  # fenced: the grant's first write (later ones must match its token)
    expect: Any = None  # version / cas: what the writer read (or its previous write left)
    claim: str | None = None  # cas: the writer's lock value, remembered by the resource
    counter: tuple[int, int] | None = None  # (read, new): also set the counter to new
    key: str | None = None  # an idempotency key
    amount: int = 0  # with a key: what the operation adds to the balance
    job: int | None = None  # with a key: the job the operation does (the cursor moves past)


@dataclass(frozen=True)
class Written:
    """What the resource did with a write."""

    seq: int
    accepted: bool
    expect: Any = None  # version / cas: what the writer's next write must expect
    duplicate: bool = False  # the key was there already: not applied again


@dataclass(frozen=True)
class Observed:
    """A read at the start of a critical section (``seq`` None when reads are not logged)."""

    seq: int | None
    counter: int
    expect: Any = None
    job: int = 1  # the next job (idempotent workload)


class Resource(Protocol):
    mode: str

    def setup(self) -> None:
        """Create what the resource needs (tables), once per run, before any client."""

    def read(self, process: int, session: int, via: Any = None, lock: str = "lock"
             ) -> Observed: ...

    def write(self, w: Write, via: Any = None) -> Written:
        """Raises Indeterminate when the outcome is unknown."""

    def read_log(self) -> list[dict[str, Any]]:
        """Every write in the server's order: seq, process, session, kind, accepted, lock..."""

    def read_state(self) -> dict[str, Any]:
        """The resource's final state: ``{"locks": {lock: {counter, balance, ...}},
        "keys": {idempotency key: seq}}``."""

    def close(self) -> None: ...


class ResourceRole:
    """What a resource class declares: ``name`` (``--resource``), ``summary``, ``db`` (the
    ``--db`` that runs its server) and the ``modes`` it implements. Built as
    ``Cls(host, port, mode=..., timeout=...)``."""

    name: ClassVar[str] = ""
    summary: ClassVar[str] = ""
    db: ClassVar[str] = ""
    modes: ClassVar[tuple[str, ...]] = ("plain", "fenced")
    accepts_session: ClassVar[bool] = False  # can write through a lock's own session (via)
