"""``dynamodb-cas``: the hand-rolled DynamoDB lock, a conditional write with an expiry time.

``PutItem`` of ``{owner, expires: now + ttl}`` if the item does not exist or its ``expires`` is
already past, ``now`` being the client's own wall clock; release by ``DeleteItem`` if the owner
is still this grant's. No heartbeat, no token: the lease ends ``ttl`` after the grant by the
next client's clock, whether or not its holder is done (a holder paused past it, or one whose
clock runs behind the others', shares the lock).
"""

from __future__ import annotations

import random
import time
import uuid

from harness.core.locks import Grant, LockConfig, retried
from workloads.locks.dynamodb_conn import KEY, TABLE, ConditionFailed, DynamoLock, NotSent, call


class DynamoCasLock(DynamoLock):
    name = "dynamodb-cas"
    summary = ("a conditional PutItem with an expiry attribute the clients check against "
               "their wall clocks; release by a conditional DeleteItem")
    tokens = False

    def __init__(self, config: LockConfig) -> None:
        super().__init__(config)
        self.rng = random.Random(config.harness.get("seed", 0) * 1000 + config.process)

    def acquire(self, timeout: float) -> Grant | None:
        return retried(self.try_acquire, timeout, lambda: self.rng.uniform(0.01, 0.05),
                       (NotSent,))

    def try_acquire(self) -> Grant | None:
        owner = f"c{self.config.process}-{uuid.uuid4().hex}"
        now = time.time()
        try:
            call(lambda: self.client.put_item(
                TableName=TABLE,
                Item={KEY: {"S": self.key}, "owner": {"S": owner},
                      "expires": {"N": f"{now + self.config.ttl:.6f}"}},
                ConditionExpression=f"attribute_not_exists({KEY}) OR #e < :now",
                ExpressionAttributeNames={"#e": "expires"},
                ExpressionAttributeValues={":now": {"N": f"{now:.6f}"}}))
        except ConditionFailed:
            return None
        return Grant(token=None, validity=self.config.ttl, handle=owner)

    def release(self, grant: Grant) -> bool:
        try:
            call(lambda: self.client.delete_item(
                TableName=TABLE, Key={KEY: {"S": self.key}},
                ConditionExpression="#o = :owner", ExpressionAttributeNames={"#o": "owner"},
                ExpressionAttributeValues={":owner": {"S": grant.handle}}))
        except ConditionFailed:
            return False
        return True
