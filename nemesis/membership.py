"""``membership``: a member removed from the cluster while a client holds the lock, and a member
added back on an empty data directory when the fault heals (Jepsen's membership nemesis), on
etcd (``member remove`` / ``add``), ZooKeeper (``reconfig -remove`` / ``-add``) and Redis
Sentinel (a replica's ``REPLICAOF``, ``SENTINEL RESET``). One family;
what comes back is data (option ``member-change``, a row of :data:`CHANGES`):

- ``re-add-empty`` (the default): the same member name, its data directory emptied (a node
  that lost its disk and rejoins);
- ``replace`` (alias ``membership-replace``): a new member, a name (ZooKeeper: a server id)
  and a data directory of its own, in the removed one's place (a dead host replaced; it keeps
  the node's address).

Target ``leader`` (the default), ``follower``, ``any`` or ``node:n2``; the fault strikes at a
fresh grant, and a refused removal is tried again while somebody holds. Each change is read
back from the cluster (``capabilities.Membership``) before it counts: a removal the cluster
refused, or one its member list does not show, raises, so the fault was not injected (the
``faults`` check: unknown, never a pass); a try whose answer was lost and that the list shows
did happen counts, and says so. The heal adds the member, reads it back, starts the node on
its empty data and reads it back as started (a DB that ``adds_running``, Redis Sentinel's
``REPLICAOF``, adds it once the node runs); one that fails leaves the cluster other than the
schedule says, and the run stops (exit 3).
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Callable
from typing import Any

from harness.core.capabilities import HasLeader, Membership
from harness.core.cluster import NemesisContext, Node
from harness.core.errors import HarnessError
from harness.core.fault_run import FaultRun
from harness.core.options import Option
from nemesis.base import BaseNemesis, node_target, wait_for_fresh_grant, wait_for_holder
from nemesis.process_faults import READY_TIMEOUT

READ_BACK = 10.0  # seconds a change may take to show in the member list
REFUSED_WAIT = 8.0  # seconds a refused change is tried again (etcd: 5 s of healthy peers)
CHANGES = {
    "re-add-empty": "remove a member (the leader by default) while the lock is held, then add it "
                    "back and restart it on an empty data directory",
    "replace": "remove a member (the leader by default) while the lock is held, then add a new "
               "member on a new data directory in its place",
}
DEFAULT = "re-add-empty"


def words(run: FaultRun) -> str:
    d = run.detail or {}
    back = (f", {d['added']} added on an empty data directory" if d.get("added") else "")
    return f"a removal of member {run.who()} {run.when()}{back}"


class MembershipChange(BaseNemesis):
    name = "membership"
    summary = f"{CHANGES[DEFAULT]} (member-change {', '.join(CHANGES)})"
    requires = (Membership, HasLeader)
    targets = ("leader", "follower", "any", "node:NAME")
    default_target = "leader"
    min_nodes = 3  # one of two removed leaves no quorum to add it back
    colour = "#8250df"
    change: str | None = None  # what an alias presets
    options = {"member-change": Option(str, None, f"{DEFAULT} (default): {', '.join(CHANGES)}",
                                       choices=tuple(CHANGES))}
    aliases = {f"membership-{k}": {"change": k, "summary": v} for k, v in CHANGES.items()
               if k != DEFAULT}

    def __init__(self) -> None:
        self._removed: str | None = None
        self._joining: dict[str, str] | None = None  # the members the added one joins
        self._detail: dict[str, Any] = {}
        self._replaced = 0

    @classmethod
    def describe(cls, run: FaultRun) -> str:
        return words(run)

    @classmethod
    def refuse(cls, db: Any, options: dict[str, Any], ttl: float,
               op_timeout: float | None) -> str | None:
        return cls.preset_conflict("member-change", cls.change, options.get("member-change"),
                                   "membership")

    def select(self, ctx: NemesisContext, target: str | None = None) -> list[str] | None:
        wait_for_fresh_grant(ctx)  # a change under a hold that has all of its time ahead
        db: Membership = ctx.db  # its leader may leave by failover alone (Sentinel's primary)
        return node_target(ctx, target, "leader" if db.removes_leader else "follower")

    def start(self, ctx: NemesisContext, targets: list[str]) -> None:
        db: Membership = ctx.db
        name = targets[0]
        ask = self._asking(ctx, name)
        self._detail = {"change": self.change or ctx.options.get("member-change") or DEFAULT}
        if name not in db.members(ask):  # (a removal that seems to happen must be this one's)
            raise HarnessError(f"{name} is not a member of the cluster now")

        def remove() -> None:
            self._detail["leader"] = ctx.db.leader(ctx.nodes)  # as the removal is asked for
            self._detail["holders"] = ctx.live.holders()
            db.remove_member(ask, name)
        self._detail.update(retried(ctx, remove, lambda: name not in db.members(ask),
                                    "refused", wait_for_holder))
        self._removed = name
        self._detail["members"] = dict(read_back(
            lambda: db.members(ask), lambda m: name not in m, f"{name} removed"))
        node = ctx.node(name)
        if ctx.cluster.is_running(node):  # a removed etcd member stops itself, or soon would
            ctx.cluster.kill(node)

    def stop(self, ctx: NemesisContext, targets: list[str]) -> None:
        name = self._removed
        if name is None:
            return
        db: Membership = ctx.db
        node, ask = ctx.node(name), self._asking(ctx, name)
        if self._detail.get("change") == "replace" and self._joining is None:
            self._replaced += 1
        member = f"{name}-r{self._replaced}" if self._detail.get("change") == "replace" else name
        late = db.adds_running  # Redis: REPLICAOF, once the node runs

        def add(done: Callable[[dict[str, str | None]], bool]) -> None:
            self._detail.update(retried(ctx, lambda: db.add_member(ask, name, member),
                                        lambda: done(db.members(ask)), "add-refused"))
        if self._joining is None:  # added already by a heal that failed after it: not again
            if not late:
                add(lambda m: name in m)
                read_back(lambda: db.members(ask), lambda m: name in m, f"{name} added")
            self._joining = db.joining(ask, name, member)
        if ctx.cluster.is_running(node):
            ctx.cluster.kill(node)
        self._detail["joined"] = ctx.cluster.join_empty(node, member, self._joining)
        ctx.cluster.start(node)
        ctx.cluster.wait_ready(node, READY_TIMEOUT)
        if late:
            add(lambda m: m.get(name) == member)
        self._detail["members-after"] = dict(read_back(
            lambda: db.members(ask), lambda m: m.get(name) == member, f"{member} started"))
        self._detail["added"] = member
        self._removed = self._joining = None

    def _asking(self, ctx: NemesisContext, name: str) -> list[Node]:
        """The nodes, the target last: a removed member's own list is not the cluster's."""
        return sorted(ctx.nodes, key=lambda n: n.name == name)

    def detail(self) -> dict[str, Any] | None:
        return dict(self._detail) or None

    def teardown(self, ctx: NemesisContext) -> None:
        self.stop(ctx, [])


def retried(ctx: NemesisContext, change: Callable[[], Any], done: Callable[[], bool],
            key: str, aim: Callable[[NemesisContext], Any] | None = None) -> dict[str, Any]:
    """Make ``change``. A try that raised may still have happened (ZooKeeper restarts its
    quorum connections at a reconfiguration, and the answer can be lost with the client's):
    ``done`` (the member list) says. A refusal is tried again (after ``aim``: the wait for a
    holder) for :data:`REFUSED_WAIT` s, then raises: etcd refuses a change until its members
    have been connected for 5 s ("unhealthy cluster": its strict reconfiguration check), as
    just after a start or a member's return. ``{key: refusals, key-why: the first,
    key-answer-lost: the error of a try that happened}`` (those there are)."""
    deadline, refusals, out = time.monotonic() + REFUSED_WAIT, [], {}
    while True:
        try:
            change()
            break
        except HarnessError as e:
            with contextlib.suppress(HarnessError):
                if done():
                    out[f"{key}-answer-lost"] = str(e)[:200]
                    break
            if time.monotonic() >= deadline or (aim and ctx.finishing.is_set()):
                raise
            refusals.append(str(e)[:200])
        time.sleep(0.3)
        if aim is not None:
            aim(ctx)
    return {**out, key: len(refusals), f"{key}-why": refusals[0]} if refusals else out


def read_back(read: Callable[[], dict[str, str | None]],
              shows: Callable[[dict[str, str | None]], bool], what: str) -> dict[str, str | None]:
    """The member list once it shows a change (within :data:`READ_BACK` s), else raise."""
    deadline = time.monotonic() + READ_BACK
    while True:
        try:
            members = read()
        except HarnessError:
            members = {}
        if members and shows(members):
            return members
        if time.monotonic() >= deadline:
            raise HarnessError(f"the member list does not show {what} after {READ_BACK:g} s: "
                               f"{members or 'no answer'}")
        time.sleep(0.2)
