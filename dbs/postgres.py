"""PostgreSQL: one cluster per node, Debian's PostgreSQL 15, made with ``initdb`` by the harness.

Only a command line, a one-time init and a probe: the backend decides where the process runs.
Every node's cluster listens on its own address, port 5432, with no Unix socket (clusters on
one machine would share ``/var/run/postgresql``); every setting is on the command line, so
nothing of the node is configured outside the node's directory. The server runs in the
foreground and logs to stdout (the node's log in the run).

- PostgreSQL refuses to run as root: the node runs as the ``postgres`` user (``user``). A
  node directory of a DB with a ``user`` is scratch space of the backend that it can reach
  (the run directory may sit under a directory only root can enter): its data is removed at
  teardown, its log stays in the run.
- ``init_argv`` is run once before the first start (``initdb``; ``-N``: no fsync, as the
  server's own ``fsync=off``: a fault here kills processes, never the machine, so what a
  process wrote is in the page cache and survives a kill -9).
- Trust authentication from any address (the clients bind their own 127.x addresses).
- ``synchronous_commit`` stays on: a commit is acknowledged once its WAL is written, so a
  kill -9 never loses an acknowledged commit.
- Session timeouts (``idle_in_transaction_session_timeout``, ``idle_session_timeout``) are set
  per connection by the locks, from the run's TTL: the server ends a frozen holder's session.
- Stopped with SIGINT (fast shutdown: open transactions are rolled back); SIGTERM would wait
  for every client to disconnect.
"""

from __future__ import annotations

import os
import pwd
import signal
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar

from dbs.base import DB
from harness.core.cluster import Node
from harness.core.errors import HarnessError

if TYPE_CHECKING:
    import psycopg

BIN = Path("/usr/lib/postgresql/15/bin")
USER = "postgres"
MAX_CONNECTIONS = 450  # two per client (lock + resource) at --clients 200, plus probes

SETTINGS: dict[str, str] = {
    "unix_socket_directories": "",
    "max_connections": str(MAX_CONNECTIONS),
    "shared_buffers": "16MB",
    "fsync": "off",
    "full_page_writes": "off",
    "synchronous_commit": "on",
    "logging_collector": "off",
    "log_destination": "stderr",
    "log_line_prefix": "%m [%p] %q%h ",
    "log_connections": "off",
    "log_lock_waits": "off",
    "deadlock_timeout": "1s",
}


# the settings a --persistence mode changes; crash recovery begins with one syncfs(2), not an
# fsync of every file of the cluster (as durable on Linux, and seconds faster on a FUSE mount)
DURABLE: dict[str, dict[str, str]] = {
    "fsync": {"fsync": "on", "full_page_writes": "on", "recovery_init_sync_method": "syncfs"},
    "async-commit": {"fsync": "on", "full_page_writes": "on", "synchronous_commit": "off",
                     "recovery_init_sync_method": "syncfs"}}


class PostgresDB(DB):
    name: ClassVar[str] = "postgres"
    summary: ClassVar[str] = ("PostgreSQL 15, one cluster per node (row and advisory locks; "
                              "the protected resource as a table)")
    default_nodes: ClassVar[int] = 1
    port: ClassVar[int] = 5432
    default_lock: ClassVar[str] = "pg-row"
    debian_packages: ClassVar[dict[str, str]] = {str(BIN / "postgres"): "postgresql"}
    stop_signal: ClassVar[int] = signal.SIGINT
    # libfaketime moves the server's wall clock (clock_timestamp(), now(), its timeouts) or
    # both clocks by one offset
    clock_mechanism: ClassVar[str] = "libfaketime"
    clocks: ClassVar[tuple[str, ...]] = ("wall", "both")

    persistence_words: ClassVar[dict[str, str]] = {
        "none": "fsync=off: nothing is fsynced (a kill loses nothing, a power loss anything)",
        "fsync": "fsync=on, full_page_writes=on, synchronous_commit=on: a commit is fsynced "
                 "before it is acknowledged",
        "async-commit": "fsync=on, synchronous_commit=off: a commit is acknowledged before its "
                        "WAL is fsynced (a power loss may lose the last ones)"}
    persistence_modes: ClassVar[tuple[str, ...]] = tuple(persistence_words)

    def __init__(self, binaries: Path | None = None, persistence: str = "none") -> None:
        self.bin = binaries or BIN
        self.persistence = persistence
        # PostgreSQL will not run as root; as any other user it runs as that user.
        self.user: str | None = USER if os.geteuid() == 0 else None

    def check_environment(self) -> None:
        for tool in ("postgres", "initdb"):
            if not (self.bin / tool).exists():
                raise HarnessError(f"{self.bin / tool} not found: run the set-up command "
                                   "`bash setup.sh` (Debian package postgresql)")
        if self.user is not None:
            try:
                pwd.getpwnam(self.user)
            except KeyError:
                raise HarnessError(f"no user {self.user!r} to run PostgreSQL as: run the "
                                   "set-up command `bash setup.sh` (Debian package "
                                   "postgresql creates it)") from None

    def files(self, node: Node, cluster: list[Node], node_dir: Path) -> dict[str, str]:
        hba = ["# lock-harness: clients connect from their own 127.x addresses",
               "local all all trust", "host all all 0.0.0.0/0 trust"]
        return {"pg_hba.conf": "\n".join(hba) + "\n"}

    def init_argv(self, node: Node, node_dir: Path) -> list[str] | None:
        """Run once before the first start: make the node's cluster."""
        return [str(self.bin / "initdb"), "-D", str(node_dir / "data"), "-U", USER,
                "--auth=trust", "-E", "UTF8", "--locale=C", "-N", "--no-instructions"]

    def argv(self, node: Node, node_dir: Path) -> list[str]:
        settings = {**SETTINGS, **DURABLE.get(self.persistence, {}),
                    "listen_addresses": node.host, "port": str(node.port),
                    "hba_file": str(node_dir / "pg_hba.conf")}
        argv = [str(self.bin / "postgres"), "-D", str(node_dir / "data")]
        for key, value in settings.items():
            argv += ["-c", f"{key}={value}"]
        return argv

    def ready(self, node: Node) -> bool:
        """A real connection that answers ``SELECT 1``."""
        import psycopg

        try:
            with connect(node.host, node.port, 1.0) as conn:
                return conn.execute("SELECT 1").fetchone() == (1,)
        except psycopg.Error:
            return False

    def clock_fault_support(self) -> str | None:
        return None  # postgres calls libc's clock functions, which libfaketime replaces

    def read_clock(self, node: Node) -> float:
        """The node's own clock (``clock_timestamp()``), as seconds since the epoch."""
        with connect(node.host, node.port, 2.0) as conn:
            row = conn.execute("SELECT extract(epoch FROM clock_timestamp())::float8"
                               ).fetchone()
        if row is None:
            raise HarnessError(f"{node.name}: clock_timestamp() returned no row")
        return float(row[0])


def connect(host: str, port: int, timeout: float) -> psycopg.Connection[Any]:
    """A connection of the harness's probes (autocommit), failing fast on a dead network.
    psycopg is imported here, not at the top: the DB classes load with the standard library
    alone (:mod:`dbs.base`)."""
    import psycopg

    return psycopg.connect(host=host, port=port, user=USER, dbname="postgres",
                           connect_timeout=2, application_name="lock-harness",
                           tcp_user_timeout=max(100, int(timeout * 1000)), autocommit=True)
