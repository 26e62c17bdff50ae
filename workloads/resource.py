"""The protected resource: a separate, real Redis that the workload writes to under the lock.

Every write goes through one Lua script, so the server itself puts it in order: it takes the next
sequence number, and appends ``{seq, process, session, kind, token, accepted}`` to a log. In fenced
mode the script rejects a write whose token is lower than the highest it has accepted (equal is
fine: one holder writes several times). That log, read back at the end of a run, is the ground
truth of what happened to the protected data.
"""

from __future__ import annotations

import json
from typing import Any

from workloads.resp import Resp

LOG_KEY = "resource:log"
MAX_TOKEN_KEY = "resource:max-token"
SEQ_KEY = "resource:seq"
COUNTER_KEY = "resource:counter"

WRITE = """
local seq = redis.call('INCR', KEYS[3])
local accepted = true
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
               kind = ARGV[3], accepted = accepted, lock = ARGV[8]}
if token ~= nil then entry['token'] = token end
if ARGV[6] ~= nil and ARGV[6] ~= '' then
    entry['from'] = tonumber(ARGV[7])
    entry['to'] = tonumber(ARGV[6])
    if accepted then redis.call('SET', KEYS[4], ARGV[6]) end
end
redis.call('RPUSH', KEYS[1], cjson.encode(entry))
if accepted then return {seq, 1} end
return {seq, 0}
"""


class Resource:
    """A client of the protected resource. ``fenced``: the resource checks tokens."""

    def __init__(self, host: str, port: int, *, fenced: bool, timeout: float = 2.0) -> None:
        self.client = Resp(host, port, timeout)
        self.fenced = fenced
        self._write = self.client.script(WRITE)

    def write(self, process: int, session: int, kind: str, token: int | None,
              counter: tuple[int, int] | None = None, lock: str = "lock") -> tuple[int, bool]:
        """Returns (seq, accepted). Raises Indeterminate when the outcome is unknown.

        ``counter=(read, new)``: the write also sets the shared counter to ``new`` (it read
        ``read`` first: a non-atomic increment, as applications write them). ``lock``: the
        key the write belongs to (each lock guards its own data: its own highest token, its
        own counter); the log is one, in the server's order, each entry naming its lock."""
        args: list[object] = [process, session, kind, "" if token is None else token,
                              int(self.fenced)]
        args += [counter[1], counter[0]] if counter is not None else ["", ""]
        args.append(lock)
        keys = [LOG_KEY, f"{MAX_TOKEN_KEY}:{lock}", SEQ_KEY, f"{COUNTER_KEY}:{lock}"]
        seq, accepted = self.client.evalsha(self._write, keys, args)
        return int(seq), bool(accepted)

    def read_counter(self, lock: str = "lock") -> int:
        return int(self.client.call("GET", f"{COUNTER_KEY}:{lock}") or 0)

    def read_log(self) -> list[dict[str, Any]]:
        return [json.loads(x) for x in self.client.call("LRANGE", LOG_KEY, 0, -1)]

    def close(self) -> None:
        self.client.close()
