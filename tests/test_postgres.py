"""Real runs on PostgreSQL 15 (clusters made by the harness; no mock, no SQLite): each lock under
the fault that matters for it, each resource mode, the idempotent workload, kill -9 and
restart, a partition of the holder, `harness clean` after a controller killed with -9, and
pg-row / pg-advisory on the docker backend. 10-15 s runs."""

from __future__ import annotations

import json
import os
import subprocess
import time
from pathlib import Path
from typing import Any

import pytest

from tests.harness_runs import alive, harness, history, killed_mid_run, ran, run

pytestmark = [
    pytest.mark.servers,
    pytest.mark.skipif(not Path("/usr/lib/postgresql/15/bin/initdb").exists(),
                       reason="PostgreSQL 15 missing: run `bash setup.sh`"),
]
needs_redis = pytest.mark.skipif(subprocess.run(["which", "redis-server"], capture_output=True
                                                ).returncode != 0,
                                 reason="redis-server missing: run `bash setup.sh`")


def errors(run_dir: Path, f: str) -> list[str]:
    return [str(op.get("error")) for op in history(run_dir)
            if op.get("f") == f and op.get("error")]


def check(results: dict[str, Any], name: str) -> dict[str, Any]:
    return dict(results["checks"][name])


def test_no_faults_every_lock_is_valid(store: Path) -> None:
    for lock in ("pg-row", "pg-advisory", "pg-advisory-xact"):
        results, run_dir = ran(store, 0, "--db", "postgres", "--lock", lock, "--nemesis", "none",
                               "--time-limit", "5", "--seed", "1")
        mutex = check(results, "mutex")
        assert mutex["lock-overlap-count"] == 0 and mutex["resource-interleaving-count"] == 0
        assert check(results, "stats")["counts"]["acquire"]["ok"] > 5
        test = json.loads((run_dir / "test.json").read_text())
        assert test["resource"]["name"] == "n1", "the table lives in the lock's database"


def test_pg_row_a_paused_holders_transaction_is_ended_and_its_commit_fails(store: Path) -> None:
    results, run_dir = ran(store, 0, "--db", "postgres", "--lock", "pg-row", "--nemesis", "pause",
                           "--time-limit", "12", "--seed", "1")
    mutex = check(results, "mutex")
    assert mutex["resource-interleaving-count"] == 0
    assert mutex["lock-overlap-count"] > 0 and mutex["lock-overlaps-informational"]
    # the server ended the frozen holder's session after the TTL: its writes and commit failed
    assert any("IdleInTransactionSessionTimeout" in e for e in errors(run_dir, "write"))
    assert any(op["f"] == "release" and op["type"] == "fail" for op in history(run_dir))


def pauses_of(ops: list[dict[str, Any]]) -> list[tuple[int, int, int]]:
    """Each pause of the run: (start, stop, the process it froze)."""
    return [(op["time"], next(op2["time"] for op2 in ops if op2["process"] == "nemesis"
                              and op2["f"] == "pause" and op2["value"] == "stop"
                              and op2["type"] == "info" and op2["time"] > op["time"]),
             int(op["targets"][0][1:]))
            for op in ops if op["process"] == "nemesis" and op["f"] == "pause"
            and op["value"] == "start" and op["type"] == "info"]


def writing(ops: list[dict[str, Any]], process: int, at: int) -> bool:
    """Was a write of ``process`` in flight at ``at`` (its last write op an invoke)?"""
    last = [op for op in ops if op["process"] == process and op["f"] == "write"
            and op["time"] <= at]
    return bool(last) and last[-1]["type"] == "invoke"


def test_pg_advisory_the_lock_goes_with_the_session_the_writes_stay(store: Path) -> None:
    """The paused holder's session ends and its advisory lock with it: another client gets
    the lock (INVALID). The pause strikes between two of the holder's writes (``pause-at``'s
    default): it resumes believing it holds the lock and writes again, among the new
    holder's writes (resource interleaving). (Before the pause was aimed, CI under load saw
    both pauses of a run strike 35-47 ms into a write, and no write interleave.)"""
    code, results, run_dir, out = run(store, "--db", "postgres", "--lock", "pg-advisory",
                                      "--nemesis", "pause", "--time-limit", "12", "--seed", "1")
    assert code == 1, out
    ops = history(run_dir)
    pauses = pauses_of(ops)
    assert pauses and not [p for p in pauses if writing(ops, p[2], p[0])], out
    assert check(results, "mutex")["resource-interleaving-count"] > 0


def test_pg_advisory_a_pause_inside_a_write(store: Path) -> None:
    """``pause-at=in-write``: the holder frozen with a write in flight (a transaction holding
    the resource row ``FOR UPDATE``, its connection alive). Its session ends and a second
    client is granted the lock (INVALID: the grants overlap), whether or not the writes
    interleave (the new holder's write may wait on the frozen row lock)."""
    code, results, run_dir, out = run(store, "--db", "postgres", "--lock", "pg-advisory",
                                      "--nemesis", "pause", "--nemesis-opt", "pause-at=in-write",
                                      "--time-limit", "12", "--seed", "1")
    assert code == 1, out
    ops = history(run_dir)
    assert any(writing(ops, frozen, start) for start, _, frozen in pauses_of(ops)), out
    assert check(results, "mutex")["lock-overlap-count"] > 0


@pytest.mark.slow
def test_pg_advisory_xact_is_safe_through_pauses(store: Path) -> None:
    results, _ = ran(store, 0, "--db", "postgres", "--lock", "pg-advisory-xact", "--nemesis",
                     "pause", "--time-limit", "12", "--seed", "1")
    assert check(results, "mutex")["resource-interleaving-count"] == 0


def test_pg_row_kill_9_aborts_transactions_and_liveness_recovers(store: Path) -> None:
    results, run_dir = ran(store, 0, "--db", "postgres", "--lock", "pg-row", "--nemesis", "kill",
                           "--time-limit", "12", "--seed", "2")
    assert check(results, "liveness")["valid"] is True
    log = (run_dir / "logs" / "n1.log").read_text()
    assert log.count("database system is ready to accept connections") >= 2  # restarted
    kills = [op for op in history(run_dir) if op["f"] == "kill" and op["type"] == "info"
             and op["value"] == "stop"]
    assert kills
    after = [op for op in history(run_dir) if op["f"] == "acquire" and op["type"] == "ok"
             and op["time"] > kills[0]["time"]]
    assert after, "no acquire succeeded after the restart"


@pytest.mark.slow
def test_pg_row_partition_of_the_holder(store: Path) -> None:
    if os.geteuid() != 0:
        pytest.skip("partitions need root")
    code, _, run_dir, out = run(store, "--db", "postgres", "--lock", "pg-row",
                                      "--nemesis", "partition", "--time-limit", "12",
                                      "--seed", "1")
    assert code == 0, out
    # the cut reached libpq's connections (the client's group is rewritten to its address)
    assert any("timed out" in e or "timeout" in e for e in errors(run_dir, "write")
               + errors(run_dir, "release") + errors(run_dir, "acquire")), out


@needs_redis
def test_sql_fencing_rejects_stale_tokens(store: Path) -> None:
    results, _ = ran(store, 0, "--lock", "redis-fenced", "--workload", "fenced", "--resource",
                     "postgres", "--nemesis", "pause", "--time-limit", "12", "--seed", "1")
    fencing = check(results, "fencing")
    assert fencing["stale-rejected"] > 0 and fencing["stale-accepted-count"] == 0


@pytest.mark.slow
@needs_redis
def test_version_mode_rejects_writes_of_a_stale_reader(store: Path) -> None:
    results, run_dir = ran(store, 0, "--resource", "postgres", "--resource-mode", "version",
                           "--nemesis", "pause", "--time-limit", "12", "--seed", "1")
    assert check(results, "mutex")["lock-overlap-count"] > 0
    assert any("version moved" in e for e in errors(run_dir, "write"))


@needs_redis
@pytest.mark.parametrize(("mode", "code"), [("cas", 1), ("version", 0)])
def test_leases_expiring_mid_section_break_check_and_set_not_versions(
        store: Path, mode: str, code: int) -> None:
    """A 0.1 s lease expires while its holder works (50-300 ms): the next holder reads the
    resource between the old holder's writes. antirez's check-and-set lets both write (the
    remembered lock value does not change when its holder writes again); a version does not."""
    results, run_dir = ran(store, code, "--resource", "postgres", "--resource-mode", mode,
                           "--nemesis", "none", "--ttl", "0.1", "--time-limit", "10", "--seed", "1")
    mutex = check(results, "mutex")
    assert mutex["lock-overlap-count"] > 0
    if mode == "cas":
        assert "read the data" in mutex["resource-interleavings"][0]["explanation"]
    else:
        assert mutex["resource-interleaving-count"] == 0
        assert any("version moved" in e for e in errors(run_dir, "write"))


@needs_redis
def test_idempotent_keys_keep_the_state_right_through_overlaps(store: Path) -> None:
    results, _ = ran(store, 0, "--workload", "idempotent", "--nemesis", "pause", "--time-limit",
                     "12", "--seed", "1")
    idem = check(results, "idempotent")
    assert idem["keys-applied-count"] > 10 and idem["final-balance"] == idem["expected-balance"]
    assert check(results, "mutex")["lock-overlap-count"] > 0


@pytest.mark.slow
def test_clean_stops_the_postgres_of_a_killed_run(store: Path) -> None:
    run_dir = killed_mid_run(store, "--db", "postgres", "--lock", "pg-row", "--nemesis", "none",
                             until='"ok","f":"acquire"', journal="c0", within=30)
    pid = json.loads((run_dir / "pids.json").read_text())["processes"]["n1"][0]
    backends = [int(p) for p in os.listdir("/proc") if p.isdigit() and ppid(int(p)) == pid]
    assert backends, "the postmaster should have backends"
    cleaned = harness("clean", "--store", str(store))
    assert cleaned.returncode == 0, cleaned.stderr
    time.sleep(0.5)
    left = [p for p in (pid, *backends) if alive(p)]
    assert not left, f"postgres processes left after clean: {left}"
    assert "removed" in cleaned.stdout  # its scratch directory (the cluster's data)


def ppid(pid: int) -> int | None:
    try:
        return int(Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[1])
    except (OSError, IndexError, ValueError):
        return None



# the docker backend -------------------------------------------------------------------------
def docker_ready() -> str | None:
    try:
        import docker

        c = docker.from_env(timeout=10)
        c.ping()
        c.images.get("lock-harness/node:latest")
    except Exception as e:
        return f"docker backend unavailable ({type(e).__name__}): run `bash setup.sh`"
    return None


@pytest.mark.docker
@pytest.mark.slow
@pytest.mark.parametrize(("lock", "code"), [("pg-row", 0), ("pg-advisory", 1)])
def test_docker_pause(store: Path, lock: str, code: int) -> None:
    reason = docker_ready()
    if reason:
        pytest.skip(reason)
    results, _ = ran(store, code, "--backend", "docker", "--db", "postgres", "--lock", lock,
                     "--nemesis", "pause", "--time-limit", "12", "--seed", "1")
    assert (check(results, "mutex")["resource-interleaving-count"] > 0) == (code == 1)
