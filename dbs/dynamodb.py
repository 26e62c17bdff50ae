"""DynamoDB's API on ``dynalite`` (npm): one node, a real HTTP server storing its tables in
LevelDB on disk, so a ``kill`` and a restart find the items that were acknowledged.

DynamoDB is one service to its clients, so the DB has one node (``default_nodes = 1``); the
locks reach it with boto3 through an endpoint URL. Node comes from Debian (``nodejs``), dynalite
from npm, pinned (:data:`DYNALITE`), into :func:`install_dir`: ``harness setup --db dynamodb``
runs :meth:`DynamoDB.install_argv` once Debian's packages are in, and a run without it is
refused before anything starts with the line :meth:`DynamoDB.unavailable` gives.

Tables are created by the locks, in their ``setup()`` before the first op (``CreateTable``,
idempotent); ``--createTableMs 0`` makes a new table ACTIVE at once. dynalite checks that a
request is signed but not the signature, so any credentials do. The readiness probe is a
signed-looking ``ListTables`` answered 200: the store is open and serving.

Clock faults do not apply to the server: a lease of the lock client is timed by the clients'
clocks alone (the server stores the lease duration, it never expires an item).
"""

from __future__ import annotations

import os
import shutil
import urllib.error
import urllib.request
from pathlib import Path
from typing import ClassVar

from dbs.base import DB
from harness.core.cluster import Node
from harness.core.errors import HarnessError

DYNALITE = "dynalite@4.0.0"
DEFAULT_DIR = Path("/opt/lock-harness/dynalite")
PROBE_TIMEOUT = 0.5
TARGET = "DynamoDB_20120810"
_OPENER = urllib.request.build_opener(urllib.request.ProxyHandler({}))  # never via a proxy


def install_dir() -> Path:
    """Where dynalite is installed (``npm install --prefix``); ``$LOCK_HARNESS_DYNALITE``
    moves it."""
    return Path(os.environ.get("LOCK_HARNESS_DYNALITE", str(DEFAULT_DIR)))


def cli_path() -> Path:
    return install_dir() / "node_modules" / "dynalite" / "cli.js"


class DynamoDB(DB):
    name: ClassVar[str] = "dynamodb"
    summary: ClassVar[str] = ("DynamoDB's API on dynalite (npm; LevelDB on disk), one node; "
                              "locks through boto3")
    default_nodes: ClassVar[int] = 1
    port: ClassVar[int] = 8000
    default_lock: ClassVar[str] = "dynamodb-lease"
    debian_packages: ClassVar[dict[str, str]] = {"node": "nodejs", "npm": "npm"}

    def __init__(self, node_binary: str | None = None) -> None:
        self.node_binary = node_binary or shutil.which("node") or "node"

    @classmethod
    def unavailable(cls) -> str | None:
        """Why a node cannot start here beyond Debian's packages: dynalite not installed."""
        if not cli_path().is_file():
            return f"dynalite is not installed ({cli_path()} is missing)"
        return None

    @classmethod
    def install_argv(cls) -> list[str]:
        """What installs dynalite (npm's registry), once Debian's node and npm are there."""
        return ["npm", "install", "--prefix", str(install_dir()), "--no-audit", "--no-fund",
                "--no-save", "--loglevel=error", DYNALITE]

    def check_environment(self) -> None:
        if shutil.which(self.node_binary) is None:
            raise HarnessError(f"node not found ({self.node_binary}): run the set-up command "
                               "`harness setup --db dynamodb` (Debian package nodejs)")
        reason = self.unavailable()
        if reason is not None:
            raise HarnessError(f"{reason}: run the set-up command `harness setup --db dynamodb`")

    def files(self, node: Node, cluster: list[Node], node_dir: Path) -> dict[str, str]:
        return {}

    def argv(self, node: Node, node_dir: Path) -> list[str]:
        return [self.node_binary, str(cli_path()), "--host", node.host, "--port", str(node.port),
                "--path", str(node_dir / "data"), "--createTableMs", "0",
                "--deleteTableMs", "0", "--updateTableMs", "0"]

    def ready(self, node: Node) -> bool:
        """Serving: ``ListTables`` answers 200."""
        req = urllib.request.Request(
            f"http://{node.host}:{node.port}/", data=b"{}", method="POST",
            headers={"X-Amz-Target": f"{TARGET}.ListTables",
                     "Content-Type": "application/x-amz-json-1.0",
                     "X-Amz-Date": "20000101T000000Z",
                     "Authorization": "AWS4-HMAC-SHA256 Credential=probe/20000101/local/"
                                      "dynamodb/aws4_request, SignedHeaders=host, Signature=0"})
        try:
            with _OPENER.open(req, timeout=PROBE_TIMEOUT) as resp:
                return resp.status == 200
        except (OSError, urllib.error.URLError, ValueError):
            return False
