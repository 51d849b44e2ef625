"""A real ``GroupCoordinator`` on a manual clock, wired to the operator API the way the daemon wires it.

``World`` holds the core (``ManualClock``/``ManualTimer``/``MemoryLog``), the record-log taps that feed the
in-memory history and the metrics, the topic registry, and the aiohttp app. Groups are driven through the core's
own Join/Sync/Heartbeat/Leave/OffsetCommit APIs with real consumer-protocol bytes; nothing here is mocked.
"""

from __future__ import annotations

import struct
from collections.abc import Sequence
from dataclasses import dataclass, field

from aiohttp import web
from kafka.record.default_records import DefaultRecordBatchBuilder

from broker.partitions import Appended, Broker, MemoryDataLog
from broker.topics import TopicRegistry
from coordinator.clock import ManualClock, ManualTimer
from coordinator.config import GroupConfig
from coordinator.deferred import Deferred
from coordinator.group import GroupState
from coordinator.group_coordinator import GroupCoordinator
from coordinator.messages import (
    JoinGroupRequest,
    JoinGroupResult,
    LeaveGroupRequest,
    LeaveMember,
    OffsetCommitPartition,
    OffsetCommitRequest,
    SyncGroupRequest,
)
from coordinator.record_log import MemoryLog
from protocol.errors import ErrorCode
from runtime.activity import GroupActivity
from runtime.lag import group_lags
from runtime.metrics import Metrics
from runtime.record_stream import RecordStream
from servers.http import MemoryHistory, ReadyState, create_http_app
from servers.http.access import Access
from servers.http.acls import AclAccess

START_MS = 1_767_225_600_000  # 2026-01-01T00:00:00Z
SESSION_MS = 10_000
REBALANCE_MS = 30_000


def _string(s: str) -> bytes:
    raw = s.encode()
    return struct.pack(">h", len(raw)) + raw


def encode_subscription(topics: Sequence[str], version: int = 0) -> bytes:
    """ConsumerProtocolSubscription v0: version, topics, user_data (null)."""
    out = struct.pack(">h", version) + struct.pack(">i", len(topics))
    out += b"".join(_string(t) for t in topics)
    return out + struct.pack(">i", -1)


def encode_assignment(partitions: dict[str, list[int]], version: int = 0) -> bytes:
    """ConsumerProtocolAssignment v0: version, [topic, [partition]], user_data (null)."""
    out = struct.pack(">h", version) + struct.pack(">i", len(partitions))
    for topic, ps in partitions.items():
        out += _string(topic) + struct.pack(">i", len(ps)) + b"".join(struct.pack(">i", p) for p in ps)
    return out + struct.pack(">i", -1)


def range_assign(members: list[str], topics: dict[str, int]) -> dict[str, dict[str, list[int]]]:
    """A simple deterministic assignor: partitions of each topic dealt round-robin over the sorted members."""
    out: dict[str, dict[str, list[int]]] = {m: {} for m in members}
    ordered = sorted(members)
    for topic, n in sorted(topics.items()):
        for p in range(n):
            out[ordered[p % len(ordered)]].setdefault(topic, []).append(p)
    return out


@dataclass
class Consumer:
    client_id: str
    instance_id: str | None = None
    topics: tuple[str, ...] = ("orders",)
    member_id: str = ""


@dataclass
class World:
    clock: ManualClock
    timer: ManualTimer
    log: MemoryLog
    core: GroupCoordinator
    history: MemoryHistory
    metrics: Metrics
    topics: TopicRegistry
    token: str | None
    activity: GroupActivity
    ready: ReadyState = field(default_factory=lambda: ReadyState(True, "loaded"))
    access: Access | None = None  # principals and roles (servers.http.access); None: from ``token``
    acls: AclAccess | None = None  # the ACLs /v1/acls manages (servers.http.acls); None: /v1/acls is empty
    app: web.Application = field(init=False)
    broker: Broker = field(init=False)

    def __post_init__(self) -> None:
        async def probe() -> ReadyState:
            return self.ready

        # The partitions' logs (lag, offset resets): durable at once, appended with the manual clock's time.
        self.broker = Broker(self.topics, MemoryDataLog(), self.clock.now_ms, keep_bytes=True)
        self.broker.start()
        self.app = create_http_app(
            self.core,
            clock=self.clock,
            topics=self.topics,
            history=self.history,
            metrics=self.metrics,
            readiness=probe,
            token=self.token,
            access=self.access,
            acls=self.acls,
            deferred_timeout_s=0.5,
            activity=self.activity,
            broker=self.broker,
        )
        self.metrics.watch_groups(self.core.groups.all_groups)
        self.metrics.watch_lag(
            lambda: group_lags(self.core.groups.all_groups(), self.core.offsets.committed, self.broker,
                               self.clock.now_ms()),
            cluster_name="test-cluster",
        )  # fmt: skip

    def produce(self, topic: str, partition: int, count: int, timestamp_ms: int | None = None) -> int:
        """Append one batch of ``count`` records (CreateTime ``timestamp_ms``, default now) to the partition's log at
        the clock's current time; returns its base offset."""
        ts = self.clock.now_ms() if timestamp_ms is None else timestamp_ms
        builder = DefaultRecordBatchBuilder(2, 0, False, -1, -1, -1, 1 << 20)
        for i in range(count):
            builder.append(i, timestamp=ts, key=None, value=b"v", headers=[])
        got: list[list[Appended]] = []
        self.broker.produce([(topic, partition, bytes(builder.build()))], got.append)
        assert got and got[0][0].error is ErrorCode.none, got
        return got[0][0].base_offset

    # ------------------------------------------------------------------------------------------------ driving
    def advance(self, ms: int) -> None:
        self.timer.advance(ms)

    def _join(self, group_id: str, c: Consumer) -> Deferred[JoinGroupResult]:
        req = JoinGroupRequest(
            group_id=group_id,
            member_id=c.member_id,
            group_instance_id=c.instance_id,
            protocol_type="consumer",
            protocols=[("range", encode_subscription(c.topics))],
            session_timeout_ms=SESSION_MS,
            rebalance_timeout_ms=REBALANCE_MS,
            client_id=c.client_id,
            client_host="/10.0.0.1",
            api_version=9,
        )
        d = self.core.join_group(req)
        if d.done and d.result().error is ErrorCode.member_id_required:
            c.member_id = req.member_id = d.result().member_id
            d = self.core.join_group(req)
        return d

    def join_all(self, group_id: str, consumers: list[Consumer]) -> int:
        """Every consumer (re)joins, like real clients: one answered with an old generation while the group is
        still preparing a rebalance joins again. Time advances until the join phase completes."""
        replies = [self._join(group_id, c) for c in consumers]
        waited = 0
        while True:
            group = self.core.groups.group(group_id)
            assert group is not None
            if all(r.done for r in replies) and group.state is not GroupState.PREPARING_REBALANCE:
                break
            for i, c in enumerate(consumers):
                if replies[i].done and group.state is GroupState.PREPARING_REBALANCE:
                    replies[i] = self._join(group_id, c)
            assert waited < 600_000, "join phase did not complete"
            self.advance(100)
            waited += 100
        results = [r.result() for r in replies]
        assert all(r.error is ErrorCode.none for r in results), results
        assert len({r.generation_id for r in results}) == 1, results
        for c, r in zip(consumers, results, strict=True):
            c.member_id = r.member_id
        return results[0].generation_id

    def sync_all(self, group_id: str, consumers: list[Consumer], generation: int) -> None:
        group = self.core.groups.group(group_id)
        assert group is not None
        leader = group.leader_id
        registered = {t.name: t.partitions for t in self.topics.all()}
        wanted = {t: registered[t] for c in consumers for t in c.topics}
        plan = range_assign([c.member_id for c in consumers], wanted)
        replies = []
        for c in sorted(consumers, key=lambda c: c.member_id == leader):  # the leader last
            assignments = [(m, encode_assignment(a)) for m, a in plan.items()] if c.member_id == leader else []
            replies.append(
                self.core.sync_group(
                    SyncGroupRequest(group_id, generation, c.member_id, c.instance_id, "consumer", "range",
                                     assignments, 5)
                )
            )  # fmt: skip
        assert all(r.done and r.result().error is ErrorCode.none for r in replies), replies

    def form_group(self, group_id: str, consumers: list[Consumer]) -> int:
        generation = self.join_all(group_id, consumers)
        self.sync_all(group_id, consumers, generation)
        return generation

    def leave(self, group_id: str, consumers: list[Consumer], reason: str | None = "shutting down") -> None:
        d = self.core.leave_group(
            LeaveGroupRequest(group_id, [LeaveMember(c.member_id, c.instance_id, reason) for c in consumers])
        )
        assert d.done and d.result().error is ErrorCode.none, d

    def commit(self, group_id: str, offsets: dict[tuple[str, int], int], consumer: Consumer | None = None,
               generation: int = -1) -> None:  # fmt: skip
        req = OffsetCommitRequest(
            group_id=group_id,
            generation_id=generation if consumer is not None else -1,
            member_id=consumer.member_id if consumer is not None else "",
            group_instance_id=consumer.instance_id if consumer is not None else None,
            partitions=[OffsetCommitPartition(t, p, o, -1, "meta") for (t, p), o in offsets.items()],
            api_version=8,
        )
        d = self.core.commit_offsets(req)
        assert d.done and all(p.error is ErrorCode.none for p in d.result().partitions), d


def make_world(
    *, token: str | None = None, per_group_labels: bool = True, auto_commit: bool = True, access: Access | None = None
) -> World:
    clock = ManualClock(START_MS)
    timer = ManualTimer(clock)
    memory = MemoryLog(auto_commit=auto_commit)
    history = MemoryHistory()
    metrics = Metrics(per_group_labels=per_group_labels)
    activity = GroupActivity(clock.now_ms)
    log = RecordStream(memory, metrics, history, activity)
    core = GroupCoordinator(GroupConfig(), clock, timer, log)
    topics = TopicRegistry(auto_create=False)
    topics.add("orders", 4)
    topics.add("payments", 2)
    return World(clock, timer, memory, core, history, metrics, topics, token, activity, access=access)
