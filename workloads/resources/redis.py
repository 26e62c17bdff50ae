"""The protected resource on Redis: a separate, real Redis that the workload writes to.

Every write goes through one Lua script, so the server itself puts it in order: it takes the next
sequence number, and appends ``{seq, process, session, kind, token, accepted}`` to a log. In fenced
mode the script rejects a write whose token is lower than the highest it has accepted (equal is
fine: one holder writes several times). A write with an idempotency key is applied only if the
key is new (``HSETNX`` in the same script). That log, read back at the end of a run, is the
ground truth of what happened to the protected data. Each lock (key) has its own highest token,
counter, balance and next job; the log is one, each entry naming its lock. Modes ``plain`` and
``fenced``; the optimistic modes (``version``, ``cas``) are PostgreSQL's
(:mod:`workloads.resources.postgres`).
"""

from __future__ import annotations

import json
from typing import Any, ClassVar

from harness.core.resource import Observed, ResourceRole, Write, Written
from workloads.resp import Resp

LOG_KEY = "resource:log"
MAX_TOKEN_KEY = "resource:max-token"
SEQ_KEY = "resource:seq"
COUNTER_KEY = "resource:counter"
KEYS_KEY = "resource:keys"
BALANCE_KEY = "resource:balance"
JOB_KEY = "resource:next-job"

WRITE = """
local seq = redis.call('INCR', KEYS[3])
local accepted = true
local duplicate = false
local token = tonumber(ARGV[4])
if ARGV[5] == '1' then
    local max = tonumber(redis.call('GET', KEYS[2]))
    if token == nil or (max ~= nil and token < max) then
        accepted = false
    else
        redis.call('SET', KEYS[2], token)
    end
end
local entry = {seq = seq, process = tonumber(ARGV[1]), session = tonumber(ARGV[2]),
               kind = ARGV[3], lock = ARGV[11]}
if accepted and ARGV[8] ~= '' then
    if redis.call('HSETNX', KEYS[5], ARGV[8], seq) == 0 then
        accepted = false
        duplicate = true
    else
        redis.call('INCRBY', KEYS[6], ARGV[9])
        local job = tonumber(ARGV[10])
        local next_job = tonumber(redis.call('GET', KEYS[7]) or '1')
        if job ~= nil and job + 1 > next_job then redis.call('SET', KEYS[7], job + 1) end
    end
    entry['key'] = ARGV[8]
    entry['amount'] = tonumber(ARGV[9])
    entry['duplicate'] = duplicate
    if tonumber(ARGV[10]) ~= nil then entry['job'] = tonumber(ARGV[10]) end
end
entry['accepted'] = accepted
if token ~= nil then entry['token'] = token end
if ARGV[6] ~= nil and ARGV[6] ~= '' then
    entry['from'] = tonumber(ARGV[7])
    entry['to'] = tonumber(ARGV[6])
    if accepted then redis.call('SET', KEYS[4], ARGV[6]) end
end
redis.call('RPUSH', KEYS[1], cjson.encode(entry))
return {seq, accepted and 1 or 0, duplicate and 1 or 0}
"""


class RedisResource(ResourceRole):
    """A client of the protected resource on Redis."""

    name: ClassVar[str] = "redis"
    summary: ClassVar[str] = "a separate Redis; one Lua script numbers and logs every write"
    db: ClassVar[str] = "redis"
    modes: ClassVar[tuple[str, ...]] = ("plain", "fenced")

    def __init__(self, host: str, port: int, *, mode: str = "plain",
                 timeout: float = 2.0) -> None:
        self.client = Resp(host, port, timeout)  # ours, lean: on every session's hot path
        self.mode = mode
        self._write = self.client.script(WRITE)

    def setup(self) -> None:
        return None

    def read(self, process: int, session: int, via: Any = None, lock: str = "lock"
             ) -> Observed:
        counter, job = self.client.call("MGET", f"{COUNTER_KEY}:{lock}", f"{JOB_KEY}:{lock}")
        return Observed(None, int(counter or 0), None, int(job or 1))

    def write(self, w: Write, via: Any = None) -> Written:
        """Raises Indeterminate when the outcome is unknown."""
        if via is not None:
            raise ValueError("the Redis resource cannot write through a lock's session")
        args: list[object] = [w.process, w.session, w.kind,
                              "" if w.token is None else w.token, int(self.mode == "fenced")]
        args += ["", ""] if w.counter is None else [w.counter[1], w.counter[0]]
        args += [w.key or "", w.amount, "" if w.job is None else w.job, w.lock]
        keys = [LOG_KEY, f"{MAX_TOKEN_KEY}:{w.lock}", SEQ_KEY, f"{COUNTER_KEY}:{w.lock}",
                KEYS_KEY, f"{BALANCE_KEY}:{w.lock}", f"{JOB_KEY}:{w.lock}"]
        seq, accepted, duplicate = self.client.evalsha(self._write, keys, args)
        return Written(int(seq), bool(accepted), None, bool(duplicate))

    def read_counter(self, lock: str = "lock") -> int:
        return int(self.client.call("GET", f"{COUNTER_KEY}:{lock}") or 0)

    def read_log(self) -> list[dict[str, Any]]:
        return [json.loads(x) for x in self.client.call("LRANGE", LOG_KEY, 0, -1)]

    def read_state(self) -> dict[str, Any]:
        locks = sorted({str(e.get("lock", "lock")) for e in self.read_log()})
        state: dict[str, Any] = {}
        for lock in locks:
            counter, balance, job, token = self.client.call(
                "MGET", f"{COUNTER_KEY}:{lock}", f"{BALANCE_KEY}:{lock}", f"{JOB_KEY}:{lock}",
                f"{MAX_TOKEN_KEY}:{lock}")
            state[lock] = {"counter": int(counter or 0), "balance": int(balance or 0),
                           "next_job": int(job or 1),
                           "last_fencing_token": None if token is None else int(token)}
        flat = self.client.call("HGETALL", KEYS_KEY)
        keys = {k.decode(): int(v) for k, v in zip(flat[::2], flat[1::2], strict=True)}
        return {"locks": state, "keys": keys}

    def close(self) -> None:
        self.client.close()
