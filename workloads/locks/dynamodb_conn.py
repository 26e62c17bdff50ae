"""How the DynamoDB locks talk to the server: boto3 through the node's endpoint URL, and which
errors certainly did nothing.

- :func:`connect`: a low-level boto3 client with the op timeout for connecting and reading and
  **no retries** (botocore's retry of a conditional write that took effect would come back
  "condition failed": a grant the client never learns of).
- :func:`create_table`: the locks' table, made by whichever client comes first (idempotent),
  in the lock's ``setup()``: before the client's first op, so before any fault (faults wait
  for every client's first op), and before the power-loss fault writes back what the servers
  wrote while they were set up (:mod:`nemesis.power_loss`): the table is on disk when a power
  loss comes, as a deployed lock's table has been for long. A fault then tests the lock's
  item, not the table's creation.
- :func:`call`: one request. ``ConditionalCheckFailedException`` is the server saying no
  (:class:`ConditionFailed`); a connection that could not be opened did nothing
  (:class:`NotSent`); anything else (a read timeout, a connection closed mid-request, a
  server error) leaves the outcome unknown (:class:`~harness.core.locks.Indeterminate`).

Connections are opened by urllib3 with ``socket.socket``, so :mod:`workloads.sockbind` binds
them to the client's own address and the link layer's redirects reach them.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any, TypeVar

import boto3
from botocore.config import Config
from botocore.exceptions import (
    BotoCoreError,
    ClientError,
    ConnectTimeoutError,
    EndpointConnectionError,
)

from harness.core.locks import Indeterminate, LockConfig, LockRole

T = TypeVar("T")
TABLE = "lock_harness_locks"
KEY = "lockKey"
TABLE_WAIT = 20.0  # seconds a lock's setup() waits for the table: within its bound (30 s)


class ConditionFailed(Exception):
    """The server refused a conditional write: it certainly did not happen."""


class NotSent(Exception):
    """No connection could be opened: the request certainly did nothing."""


def connect(config: LockConfig) -> Any:
    node = config.nodes[0]
    timeout = max(0.05, config.op_timeout)
    return boto3.session.Session().client(
        "dynamodb", endpoint_url=f"http://{node.host}:{node.port}", region_name="us-east-1",
        aws_access_key_id="lock-harness", aws_secret_access_key="lock-harness",
        config=Config(connect_timeout=timeout, read_timeout=timeout,
                      retries={"total_max_attempts": 1}, max_pool_connections=4,
                      tcp_keepalive=False))


def call(fn: Callable[[], T]) -> T:
    try:
        return fn()
    except ClientError as e:
        code = e.response.get("Error", {}).get("Code", "")
        if code == "ConditionalCheckFailedException":
            raise ConditionFailed(code) from e
        raise Indeterminate(f"{code}: {e}"[:200]) from e
    except (EndpointConnectionError, ConnectTimeoutError) as e:
        raise NotSent(str(e)[:200]) from e
    except BotoCoreError as e:
        raise Indeterminate(f"{type(e).__name__}: {e}"[:200]) from e


def create_table(client: Any, deadline: float) -> None:
    """The locks' table (one hash key, a string), created unless it exists; waits until it
    is ACTIVE (dynalite runs with ``--createTableMs 0``: at once). Retries a server that does
    not answer until ``deadline`` (monotonic), then raises what it got (a table still not
    ACTIVE then: :class:`~harness.core.locks.Indeterminate`)."""
    while True:
        try:
            call(lambda: client.create_table(
                TableName=TABLE, BillingMode="PAY_PER_REQUEST",
                KeySchema=[{"AttributeName": KEY, "KeyType": "HASH"}],
                AttributeDefinitions=[{"AttributeName": KEY, "AttributeType": "S"}]))
        except Indeterminate as e:
            if "ResourceInUseException" not in str(e) and time.monotonic() < deadline:
                time.sleep(0.05)
                continue
            if "ResourceInUseException" not in str(e):
                raise
        except NotSent:
            if time.monotonic() >= deadline:
                raise
            time.sleep(0.05)
            continue
        status = call(lambda: client.describe_table(TableName=TABLE))["Table"]["TableStatus"]
        if status == "ACTIVE":
            return
        if time.monotonic() >= deadline:
            raise Indeterminate(f"table {TABLE} is still {status}")
        time.sleep(0.05)


def get(client: Any, key: str) -> dict[str, Any] | None:
    """The lock's item, read consistently (None: no item)."""
    out = call(lambda: client.get_item(TableName=TABLE, Key={KEY: {"S": key}},
                                       ConsistentRead=True))
    return out.get("Item")


class DynamoLock(LockRole):
    """What the DynamoDB locks share: a client of the node, the lock's item key, the locks'
    table made at setup, a request never sent as a certain failure."""

    dbs = ("dynamodb",)
    timeout_errors = (NotSent,)

    def __init__(self, config: LockConfig) -> None:
        self.config = config
        self.client = connect(config)
        self.key = f"lock:{config.name}"

    def setup(self) -> None:
        """The locks' table, made before the first op (see :func:`create_table`)."""
        create_table(self.client, time.monotonic() + TABLE_WAIT)

    def close(self) -> None:
        self.client.close()
