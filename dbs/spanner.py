"""Cloud Spanner on Google's emulator: one node, ``gateway_main`` (gRPC, and the REST/JSON
gateway the locks use) with its ``emulator_main`` child, everything in memory.

Spanner is one service to its clients, so the DB has one node. The emulator comes from
Google's apt repository (``google-cloud-cli-spanner-emulator``), not Debian's (``apt_source``):
``harness setup --db spanner`` installs it with apt where it is missing (that repository
configured), setup.sh and the node image leave it out, and a run where it is missing is
refused before anything starts (:meth:`SpannerDB.unavailable`). On the docker backend the
node runs this host's emulator, its folder mounted read-only (``host_dirs``; the image has
the libraries it links: glibc, libstdc++); ssh is refused in one line (``refused_backends``).

Readiness makes what the locks and the resource need and proves it with a real query: the
instance, the database and its tables (:data:`DDL`), each created unless it exists, then
``SELECT COUNT(*) FROM locks`` in a session of its own. A kill loses every row (the emulator
has no disk): the restart's readiness makes the schema again, and the kill's detail says that
the state was lost (:meth:`SpannerDB.repair_before_restart`), so an empty table is never
silent. The emulator runs one read-write transaction at a time and aborts the others; the
clients retry them (:mod:`workloads.locks.spanner_conn`).

Clock faults do not apply to the server: the emulator's time is this host's.
"""

from __future__ import annotations

import json
import os
import urllib.error
import urllib.request
from pathlib import Path
from typing import ClassVar

from dbs.base import DB
from harness.core.cluster import Node
from harness.core.errors import HarnessError

EMULATOR = "/usr/lib/google-cloud-sdk/bin/cloud_spanner_emulator"  # the package puts it here
PACKAGE = "google-cloud-cli-spanner-emulator"
PROJECT, INSTANCE, DATABASE = "lock-harness", "lock-harness", "locks"  # spanner_conn.DATABASE
GRPC_PORT = 9010
PROBE_TIMEOUT = 1.0
ALREADY_EXISTS = 6
LOST = ("in memory: every row was lost; the instance, database and tables were made anew, "
        "empty, at the restart")
DDL = [
    "CREATE TABLE locks (name STRING(MAX) NOT NULL, owner STRING(MAX), version INT64 NOT NULL, "
    "expires TIMESTAMP) PRIMARY KEY (name)",
    "CREATE TABLE resource_rows (lock STRING(MAX) NOT NULL, last_token INT64, "
    "counter INT64 NOT NULL) PRIMARY KEY (lock)",
    "CREATE TABLE resource_log (seq INT64 NOT NULL, lock STRING(MAX) NOT NULL, "
    "process INT64 NOT NULL, session INT64 NOT NULL, kind STRING(MAX) NOT NULL, "
    "accepted BOOL NOT NULL, token INT64, from_value INT64, to_value INT64) PRIMARY KEY (seq)",
]
_OPENER = urllib.request.build_opener(urllib.request.ProxyHandler({}))  # never via a proxy


def gateway() -> Path:
    """The emulator's gateway program; ``$LOCK_HARNESS_SPANNER_EMULATOR`` names its folder."""
    return Path(os.environ.get("LOCK_HARNESS_SPANNER_EMULATOR", EMULATOR)) / "gateway_main"


def request(node: Node, method: str, path: str, body: dict[str, object] | None = None
            ) -> tuple[int, dict[str, object]]:
    """(HTTP status, the JSON answer) of one gateway request; OSError when it did not answer."""
    req = urllib.request.Request(f"http://{node.host}:{node.port}/v1/{path}", method=method,
                                 data=None if body is None else json.dumps(body).encode())
    try:
        with _OPENER.open(req, timeout=PROBE_TIMEOUT) as resp:
            return resp.status, json.loads(resp.read() or b"{}")
    except urllib.error.HTTPError as e:
        try:
            return e.code, json.loads(e.read() or b"{}")
        except ValueError:
            return e.code, {}


class SpannerDB(DB):
    name: ClassVar[str] = "spanner"
    summary: ClassVar[str] = ("Cloud Spanner's emulator (Google's apt package; in memory), one "
                              "node; locks over its REST gateway")
    default_nodes: ClassVar[int] = 1
    port: ClassVar[int] = 9020
    default_lock: ClassVar[str] = "spanner-lease"
    refused_backends: ClassVar[dict[str, str]] = {
        "ssh": f"a host's set-up installs Debian's packages and {PACKAGE} is Google's, nor "
               "would a kill there say that the state was lost; use --backend local"}
    host_dirs: ClassVar[tuple[str, ...]] = (str(gateway().parent),)  # not in the node image

    debian_packages: ClassVar[dict[str, str]] = {str(gateway()): PACKAGE}
    apt_source: ClassVar[str | None] = "https://packages.cloud.google.com/apt"

    @classmethod
    def unavailable(cls) -> str | None:
        """Why a node cannot start here: the emulator is not installed."""
        if not gateway().is_file():
            return f"the Spanner emulator is not installed ({gateway()} is missing)"
        return None

    def check_environment(self) -> None:
        reason = self.unavailable()
        if reason is not None:
            raise HarnessError(f"{reason}: run the set-up command `harness setup --db spanner` "
                               f"(Debian package {PACKAGE}, from Google's apt repository)")

    def files(self, node: Node, cluster: list[Node], node_dir: Path) -> dict[str, str]:
        return {}

    def argv(self, node: Node, node_dir: Path) -> list[str]:
        return [str(gateway()), "--hostname", node.host,
                "--grpc_port", str(GRPC_PORT), "--http_port", str(node.port)]

    def repair_before_restart(self, node: Node, data_dir: Path, aside: Path) -> list[str]:
        """Nothing to repair: the emulator keeps nothing. What the restart means, in words
        for the kill's detail: every row lost, the schema made anew by :meth:`ready`."""
        return [LOST]

    def ready(self, node: Node) -> bool:
        """The instance, database and tables exist (made here unless they do) and a query on
        the locks' table answers."""
        instance = f"projects/{PROJECT}/instances/{INSTANCE}"
        try:
            steps = [request(node, "POST", f"projects/{PROJECT}/instances", {
                         "instanceId": INSTANCE, "instance": {
                             "config": "emulator-config", "displayName": INSTANCE,
                             "nodeCount": 1}}),
                     request(node, "POST", f"{instance}/databases", {
                         "createStatement": f"CREATE DATABASE `{DATABASE}`",
                         "extraStatements": DDL})]
            if any(s != 200 and out.get("code") != ALREADY_EXISTS for s, out in steps):
                return False
            status, session = request(node, "POST", f"{instance}/databases/{DATABASE}/sessions",
                                      {})
            if status != 200:
                return False
            status, _ = request(node, "POST", f"{session['name']}:executeSql",
                                {"sql": "SELECT COUNT(*) FROM locks"})
            request(node, "DELETE", str(session["name"]))
            return status == 200
        except (OSError, ValueError, KeyError):
            return False
