"""The idempotent checker: did every operation take effect exactly once?

The ``idempotent`` workload applies operations (jobs) that each carry an idempotency key and an
amount; the resource stores the key with the effect, and logs every application, applied or
refused as a duplicate. From that log and the resource's final state (both read back at the
end of the run) and the clients' history:

- **applied twice** (invalid): a key the resource applied more than once;
- **duplicate of nothing** (invalid): a key refused as a duplicate that was never applied
  before it;
- **acknowledged, not applied** (invalid): a client was told its operation took effect (ok,
  applied or duplicate) and the key is not in the log as applied; an acknowledgement inside a
  lock's transaction counts only if that transaction committed (its release was ok);
- **unknown key** (invalid): the log applied a key no client ever sent, or with another amount;
- **state** (invalid when it differs): the final balance is the sum of the applied keys'
  amounts, and the resource's key table holds exactly the applied keys: the state equals one
  execution of each applied operation.

Duplicates refused (overlapping holders that took the same job, retries of unknown outcomes)
are counted: they are the point. Pure.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

from checker.base import MAX_LISTED, Checker
from checker.lives import Lives
from checker.sessions import final_read, final_state
from harness.core.history import INFO, OK, Op


def sent_operations(history: Sequence[Op]) -> tuple[dict[str, int], list[str], int, int]:
    """(key -> amount of every application sent, keys acknowledged, retries, unknown)."""
    amounts: dict[str, int] = {}
    acked: list[str] = []
    retries = unknown = 0
    paired = Lives.of(history).paired  # (the dicts of the writes and releases only)
    committed = committed_sessions(paired.select("release"))
    for inv, done in paired.select("write"):
        value = inv.get("value") or {}
        if inv["f"] != "write" or not isinstance(value, dict) or "key" not in value:
            continue
        key = str(value["key"])
        amounts.setdefault(key, int(value.get("amount", 0)))
        if int(value.get("attempt", 1)) > 1:
            retries += 1
        if done is None or done["type"] == INFO:
            unknown += 1
        elif done["type"] == OK and (not value.get("in_lock_tx")
                                     or (inv["process"], value.get("session")) in committed):
            acked.append(key)
    return amounts, acked, retries, unknown


def committed_sessions(paired: Iterable[tuple[Op, Op | None]]) -> set[tuple[int, Any]]:
    """(process, session) of every release that completed ok (its transaction committed)."""
    out = set()
    for inv, done in paired:
        if inv["f"] == "release" and done is not None and done["type"] == OK:
            out.add((inv["process"], (inv.get("value") or {}).get("session")))
    return out


class IdempotentChecker(Checker):
    name = "idempotent"
    summary = ("each idempotency key applied once, acknowledged keys applied, "
               "final state = one execution of each operation")
    figures = {"keys-applied-count": "keys-applied", "duplicates-rejected": None,
               "violation-count": "violation"}

    @staticmethod
    def check(history: Sequence[Op]) -> dict[str, Any]:
        amounts, acked, retries, unknown = sent_operations(history)
        log = final_read(history)
        state = final_state(history)
        base = {"operations-sent": len(amounts), "acknowledged": len(set(acked)),
                "retries": retries, "indeterminate": unknown}
        if log is None or state is None:
            return {"valid": "unknown", **base,
                    "note": "the resource was never read back (the run was cut short)"}
        applied: dict[str, list[dict[str, Any]]] = {}
        problems: list[dict[str, Any]] = []
        duplicates = 0
        for e in sorted((e for e in log if e.get("key") is not None), key=lambda e: e["seq"]):
            key = str(e["key"])
            if e.get("accepted"):
                applied.setdefault(key, []).append(e)
                if len(applied[key]) == 2:
                    first = applied[key][0]
                    problems.append({"kind": "applied-twice", "key": key, "seqs": [first["seq"],
                                                                                 e["seq"]],
                                     "explanation": (f"the resource applied {key} twice: seq "
                                                     f"{first['seq']} (process {first['process']})"
                                                     f" and seq {e['seq']} (process "
                                                     f"{e['process']})")})
            elif e.get("duplicate"):
                duplicates += 1
                if key not in applied:
                    problems.append({"kind": "duplicate-of-nothing", "key": key, "seq": e["seq"],
                                     "explanation": (f"the resource refused {key} as a duplicate "
                                                     f"(seq {e['seq']}) before ever applying it")})
        for key, entries in applied.items():
            sent = amounts.get(key)
            got = int(entries[0].get("amount") or 0)
            if sent is None or sent != got:
                problems.append({"kind": "unknown-key", "key": key, "seq": entries[0]["seq"],
                                 "explanation": (f"the resource applied {key} (seq "
                                                 f"{entries[0]['seq']}, amount {got}) but no "
                                                 "client sent it" if sent is None else
                                                 f"the resource applied {key} with amount {got}; "
                                                 f"the client sent {sent}")})
        for key in sorted(set(acked) - set(applied)):
            problems.append({"kind": "acknowledged-not-applied", "key": key,
                             "explanation": (f"a client was told {key} took effect, but the "
                                             "resource never applied it")})
        once: dict[str, int] = {}  # each lock's balance after one execution of each applied key
        for es in applied.values():
            lock = str(es[0].get("lock", "lock"))
            once[lock] = once.get(lock, 0) + int(es[0].get("amount") or 0)
        rows = state.get("locks") or {}
        balances = {str(k): int((v or {}).get("balance") or 0) for k, v in rows.items()}
        for lock in sorted(set(once) | {k for k, b in balances.items() if b}):
            got, want = balances.get(lock, 0), once.get(lock, 0)
            if got != want:
                n = sum(1 for es in applied.values() if str(es[0].get("lock", "lock")) == lock)
                problems.append({"kind": "state", "lock": lock, "balance": got, "expected": want,
                                 "explanation": (f"the final balance of {lock} is {got}; one "
                                                 f"execution of each of its {n} applied "
                                                 f"operations gives {want}")})
        stored = set((state.get("keys") or {}).keys())
        if stored != set(applied):
            extra, missing = sorted(stored - set(applied)), sorted(set(applied) - stored)
            problems.append({"kind": "state", "keys-not-logged": extra[:MAX_LISTED],
                             "keys-not-stored": missing[:MAX_LISTED],
                             "explanation": (f"the resource's key table has {len(extra)} key(s) "
                                             f"the log never applied and lacks {len(missing)} it "
                                             "did")})
        return {
            "valid": not problems,
            **base,
            "keys-applied-count": len(applied),
            "duplicates-rejected": duplicates,
            "final-balance": sum(balances.values()),
            "expected-balance": sum(once.values()),
            "violation-count": len(problems),
            "violations": problems[:MAX_LISTED],
        }
