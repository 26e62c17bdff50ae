"""Real short runs against a 3-member etcd cluster on loopback (Debian's etcd-server 3.4), with
python-etcd3 clients in their own processes, each behind its relay. Each run is 12 s of workload
or less."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest

from harness.controller import netfilter
from tests.consensus_runs import run

pytestmark = [
    pytest.mark.servers,
    pytest.mark.skipif(shutil.which("etcd") is None, reason="etcd missing: run `bash setup.sh`"),
]
needs_root = pytest.mark.skipif(os.geteuid() != 0, reason="iptables needs root")


@pytest.mark.slow  # CI holds it in tests/test_fault_matrix.py (pause, etcd: INVALID, overlaps)
def test_pausing_the_holder_past_its_lease_breaks_the_etcd_lock(store: Path) -> None:
    """Jepsen's etcd 3.4.3 finding: a lease lock is no mutex once its holder can pause."""
    r = run(store, "--db", "etcd", "--nemesis", "pause", "--time-limit", "10", "--seed", "1")
    assert r.code == 1, r.output
    assert r.check("mutex")["lock-overlap-count"] >= 1
    assert all(g["value"]["validity"] == 2.0 for g in r.grants())  # the lease TTL


def test_the_key_revision_fences_off_the_paused_holder(store: Path) -> None:
    r = run(store, "--db", "etcd", "--workload", "fenced", "--nemesis", "pause",
            "--time-limit", "10", "--seed", "1")
    assert r.code == 0, r.output
    r.assert_fenced_off()


@needs_root
def test_the_relay_lets_partition_cut_one_etcd_client_off(store: Path) -> None:
    """grpc's sockets are not bound to the client's address; the relay's are, so isolating the
    holder times out that client's requests while the others go on.

    Short holds, so that the victim asks the cluster something while it is cut off: with the
    lock's own long critical sections (1-6 s) the holder's only request of a 4 s cut can come
    after the heal and be answered, and then nothing timed out at all (a CI run saw that)."""
    r = run(store, "--db", "etcd", "--lock", "etcd-keepalive", "--workload", "fenced",
            "--nemesis", "partition", "--hold", "0.2-0.5", "--time-limit", "12", "--seed", "1")
    assert r.code == 0, r.output
    fault = r.test["faults"][0]
    victim = int(fault["targets"][0].removeprefix("c"))
    start, stop = fault["start"] * 1e9, fault["stop"] * 1e9
    lock_ops = [op for op in r.history if op.get("f") in ("acquire", "release")]
    timeouts = [op for op in lock_ops if start < op["time"] < stop + 2e9 and op["type"] == "info"]
    assert victim in {op["process"] for op in timeouts}, timeouts
    # another client may time out too (waiting on the lock the victim holds, or on a cluster
    # slowed by load: a CI run saw two), but none was cut off: each was answered in the window
    answered = {op["process"] for op in lock_ops
                if start < op["time"] < stop + 2e9 and op["type"] == "ok"}
    assert {op["process"] for op in timeouts} - {victim} <= answered, timeouts
    # The victim heard nothing while cut off: no lock request of its was answered during the
    # cut, and the first it made after the cut began timed out (an info: its channel was dead,
    # even when the request was made just after the heal).
    heard = [op for op in lock_ops if op["process"] == victim and op["type"] == "ok"
             and start + 0.2e9 < op["time"] < stop]
    assert not heard, heard
    mine = [op for op in lock_ops if op["process"] == victim]
    asked = [i for i, op in enumerate(mine) if op["type"] == "invoke" and op["time"] > start]
    assert asked, "the victim made no lock request after the cut began"
    answer = next((op for op in mine[asked[0] + 1:] if op["type"] != "invoke"), None)
    assert answer is not None and answer["type"] == "info", (mine[asked[0]], answer)
    assert answer["f"] == mine[asked[0]]["f"]
    others = [op for op in r.grants() if start < op["time"] < stop and op["process"] != victim]
    assert others, "the other clients should go on getting the lock"
    assert not [x for x in netfilter.rules() if r.test["run_id"].replace("/", ":") in x]


def test_a_kept_alive_session_holds_through_long_critical_sections(store: Path) -> None:
    r = run(store, "--db", "etcd", "--lock", "etcd-keepalive", "--nemesis", "none",
            "--time-limit", "8", "--seed", "2")
    assert r.code == 0, r.output
    tokens = [g["token"] for g in r.grants()]
    assert len(tokens) >= 2 and tokens == sorted(tokens)


@pytest.mark.servers

def test_the_json_gateway_answers_plain_http(tmp_path: Path) -> None:
    """etcd 3.4 started from a config file serves /v3/... only with enable-grpc-gateway: the
    HTTP/JSON client libraries (etcd3gw, tooz) need it."""
    import base64
    import json
    import urllib.request

    from dbs.etcd import EtcdDB
    from tests.one_node import one_node

    with one_node(EtcdDB(), tmp_path) as (node,):
        opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))
        url = f"http://{node.host}:{node.port}/v3/kv/range"
        body = json.dumps({"key": base64.b64encode(b"anything").decode()}).encode()
        with opener.open(urllib.request.Request(url, data=body, method="POST"),
                         timeout=10) as resp:
            answer = json.loads(resp.read())
        assert "header" in answer and answer["header"]["revision"]
