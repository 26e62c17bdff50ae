"""Telling a grant from another reply in a Redis connection's two streams (what stall-grant
holds): the requests a lock sends, the replies that take the lock, those that refuse it or fail,
replies split over reads, scripts known by their SHA, and streams that are not Redis's."""

from __future__ import annotations

import hiredis
import pytest

from harness.controller.respgrants import GrantTracker, sha_of
from workloads.locks.redis_conn import COMPARE_AND_DELETE, SET_AND_INCR
from workloads.resources.redis import WRITE


def req(*args: object) -> bytes:
    return hiredis.pack_command(args)


SET_NX = req("SET", "lock:lock", "owner-1", "NX", "PX", 2000)


def tracker() -> GrantTracker:
    return GrantTracker({})


@pytest.mark.parametrize(("request_", "reply"), [
    (SET_NX, b"+OK\r\n"),
    (req("set", "lock:lock", "o", "px", 2000, "nx"), b"+OK\r\n"),
    (req("SETNX", "lock:lock", "o"), b":1\r\n"),
    (req("EVAL", SET_AND_INCR, 2, "lock:lock", "lock:lock:token", "o", 2000), b":7\r\n"),
])
def test_the_reply_that_takes_the_lock_is_a_grant(request_: bytes, reply: bytes) -> None:
    t = tracker()
    t.requests(request_)
    assert t.replies(reply) is True
    assert t.grants == 1


@pytest.mark.parametrize(("request_", "reply"), [
    (SET_NX, b"$-1\r\n"),  # refused: the key is there
    (SET_NX, b"_\r\n"),  # the same in RESP3
    (SET_NX, b"-ERR wrong number of arguments\r\n"),
    (SET_NX, b"-READONLY You can't write against a read only replica.\r\n"),
    (req("SETNX", "lock:lock", "o"), b":0\r\n"),
    (req("EVAL", SET_AND_INCR, 2, "k", "t", "o", 2000), b"$-1\r\n"),  # the script said false
    (req("SET", "lock:lock", "o", "PX", 2000), b"+OK\r\n"),  # no NX: takes nothing
    (req("SET", "lock:lock", "o", "NX", "GET"), b"$-1\r\n"),  # GET: nil when it did set
    (req("GET", "lock:lock"), b"$2\r\nOK\r\n"),
    (req("EVAL", COMPARE_AND_DELETE, 1, "lock:lock", "o"), b":1\r\n"),  # a release
    (req("EVAL", WRITE, 7, *"abcdefg"), b"*3\r\n:1\r\n:1\r\n:0\r\n"),  # SET without NX
])
def test_a_refusal_an_error_or_another_request_is_no_grant(request_: bytes,
                                                           reply: bytes) -> None:
    t = tracker()
    t.requests(request_)
    assert t.replies(reply) is False
    assert t.grants == 0 and t.on


def test_a_grant_split_over_reads_completes_with_its_last_byte() -> None:
    t = tracker()
    t.requests(SET_NX[:7])  # the request split too
    t.requests(SET_NX[7:])
    assert t.replies(b"+O") is False
    assert t.replies(b"K\r") is False
    assert t.replies(b"\n") is True


def test_replies_pair_with_requests_in_order() -> None:
    t = tracker()
    t.requests(req("PING") + SET_NX + req("GET", "x"))  # pipelined
    assert t.replies(b"+PONG\r\n") is False  # PING's +PONG is not SET's +OK
    assert t.replies(b"$-1\r\n+OK\r\n") is False  # SET refused; this +OK answers the GET
    t = tracker()
    t.requests(req("PING") + SET_NX + SET_NX)
    assert t.replies(b"+PONG\r\n$-1\r\n") is False
    assert t.replies(b"+OK\r\n") is True  # the second SET NX took it


def test_a_script_run_by_its_sha_is_known_from_its_source_on_any_connection() -> None:
    scripts: dict[bytes, bool] = {}
    sha = sha_of(SET_AND_INCR.encode())
    first, other = GrantTracker(scripts), GrantTracker(scripts)
    other.requests(req("EVALSHA", sha, 2, "k", "t", "o", 2000))  # before anybody loaded it
    assert other.replies(b"-NOSCRIPT No matching script.\r\n") is False
    first.requests(req("EVAL", SET_AND_INCR, 2, "k", "t", "o", 2000))
    assert first.replies(b":1\r\n") is True
    other.requests(req("EVALSHA", sha.upper(), 2, "k", "t", "o", 2000))
    assert other.replies(b":2\r\n") is True
    loader = GrantTracker(scripts)
    loader.requests(req("SCRIPT", "LOAD", COMPARE_AND_DELETE))
    assert loader.replies(b"$40\r\n" + sha_of(COMPARE_AND_DELETE.encode()) + b"\r\n") is False
    loader.requests(req("EVALSHA", sha_of(COMPARE_AND_DELETE.encode()), 1, "k", "o"))
    assert loader.replies(b":1\r\n") is False  # a release, known by its SHA


@pytest.mark.parametrize("first", [
    b"\x00\x00\x00\x2c\x00\x00\x00\x00",  # ZooKeeper's connect request
    b"\x00\x00\x00\x08\x04\xd2\x16\x2f",  # PostgreSQL's SSL request
    b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n",  # etcd's gRPC
])
def test_a_stream_that_is_not_redis_is_not_followed(first: bytes) -> None:
    t = tracker()
    t.requests(first)
    assert not t.on
    assert t.replies(b"+OK\r\n") is False


def test_a_connection_that_leaves_request_reply_order_is_no_longer_followed() -> None:
    t = tracker()
    t.requests(req("SUBSCRIBE", "__sentinel__:hello"))
    assert not t.on
    t = tracker()
    t.requests(SET_NX)
    assert t.replies(b"+OK\r\n+OK\r\n") is True  # a reply to no request: lost track after
    assert not t.on
    t.requests(SET_NX)
    assert t.replies(b"+OK\r\n") is False
