"""``__consumer_offsets`` rendered from the coordinator's records (runtime.offsets_topic, broker.offsets_topic).

The bytes are read back with INDEPENDENT decoders: kafka-python's record reader for the batches (``MemoryRecords``,
CRC checked) and the documented key/value layouts parsed here by hand with ``struct``; the partition of a group is
checked against a Java ``String.hashCode`` written here, with values Java gives. A manual clock, no sleeps."""

from __future__ import annotations

import dataclasses
import struct
from typing import Any

import pytest
from kafka.record.default_records import DefaultRecordBatchBuilder
from kafka.record.memory_records import MemoryRecords

from broker.offsets_topic import OffsetsTopic
from broker.partitions import Broker, MemoryDataLog
from broker.topics import OFFSETS_TOPIC, TopicRegistry, parse_topic_spec
from coordinator.records import (
    GroupRemovalCause,
    MemberMetadata,
    OffsetRemovalCause,
    new_group_metadata_record,
    new_group_tombstone,
    new_offset_commit_record,
    new_offset_tombstone,
)
from protocol.errors import ErrorCode
from runtime.offsets_topic import OffsetsTopicRenderer, render_state
from runtime.record_stream import RecordStream

DAY_MS = 86_400_000

# ------------------------------------------------------------------------------------ independent decoders (tests)


def java_hash(s: str) -> int:
    """Java's String.hashCode, written independently: UTF-16 code units, int32 overflow."""
    h = 0
    units = s.encode("utf-16-be", "surrogatepass")
    for i in range(0, len(units), 2):
        h = (h * 31 + int.from_bytes(units[i : i + 2], "big")) % (1 << 32)
    return h - (1 << 32) if h >= 1 << 31 else h


def kafka_partition(group: str, partitions: int = 50) -> int:
    h = java_hash(group)
    return (0 if h == -(1 << 31) else abs(h)) % partitions


class Reader:
    def __init__(self, data: bytes) -> None:
        self.data, self.at = data, 0

    def take(self, fmt: str) -> Any:
        (value,) = struct.unpack_from(fmt, self.data, self.at)
        self.at += struct.calcsize(fmt)
        return value

    def string(self) -> str | None:
        n = self.take(">h")
        if n < 0:
            return None
        s = self.data[self.at : self.at + n].decode()
        self.at += n
        return s

    def blob(self) -> bytes:
        n = self.take(">i")
        b = self.data[self.at : self.at + n]
        self.at += n
        return b

    def done(self) -> bool:
        return self.at == len(self.data)


def parse_key(key: bytes) -> tuple[Any, ...]:
    r = Reader(key)
    version = r.take(">h")
    if version in (0, 1):
        out: tuple[Any, ...] = ("offset", r.string(), r.string(), r.take(">i"))
    elif version == 2:
        out = ("group", r.string())
    else:
        raise AssertionError(f"key version {version}")
    assert r.done()
    return out


def parse_offset_value(value: bytes) -> dict[str, Any]:
    r = Reader(value)
    version = r.take(">h")
    out: dict[str, Any] = {"version": version, "offset": r.take(">q")}
    if version == 3:
        out["leader_epoch"] = r.take(">i")
    out["metadata"] = r.string()
    out["commit_timestamp"] = r.take(">q")
    if version == 1:
        out["expire_timestamp"] = r.take(">q")
    assert version in (1, 3) and r.done()
    return out


def parse_group_value(value: bytes) -> dict[str, Any]:
    r = Reader(value)
    version = r.take(">h")
    assert version == 3
    out: dict[str, Any] = {
        "protocol_type": r.string(),
        "generation": r.take(">i"),
        "protocol": r.string(),
        "leader": r.string(),
        "current_state_timestamp": r.take(">q"),
        "members": [],
    }
    for _ in range(r.take(">i")):
        out["members"].append(
            {
                "member_id": r.string(),
                "group_instance_id": r.string(),
                "client_id": r.string(),
                "client_host": r.string(),
                "rebalance_timeout": r.take(">i"),
                "session_timeout": r.take(">i"),
                "subscription": r.blob(),
                "assignment": r.blob(),
            }
        )
    assert r.done()
    return out


def decode_partition(broker: Broker, index: int) -> list[tuple[int, int, bytes, bytes | None]]:
    """(offset, timestamp, key, value) of every record in the partition, through kafka-python's reader (looking the
    partition up renders what is held back, as a Fetch does)."""
    p = broker.partition(OFFSETS_TOPIC, index)
    assert p is not None and p.data is not None
    records = MemoryRecords(b"".join(p.data))
    out = []
    while True:
        batch = records.next_batch()
        if batch is None:
            return out
        assert batch.validate_crc()
        out += [(r.offset, r.timestamp, bytes(r.key), None if r.value is None else bytes(r.value)) for r in batch]


# ------------------------------------------------------------------------------------------------------ the harness


class Env:
    def __init__(self, partitions: int = 50, **kwargs: Any) -> None:
        self.now = 1_700_000_000_000
        self.topics = TopicRegistry(auto_create=True)
        self.broker = Broker(self.topics, MemoryDataLog(), lambda: self.now)
        self.broker.start()
        self.topic = OffsetsTopic(self.broker, partitions, lambda: self.now, render_state, **kwargs)
        self.renderer = OffsetsTopicRenderer(self.topic, partitions)
        self.partitions = partitions

    def commit(self, group: str, topic: str, partition: int, offset: int, expire: int | None = None) -> None:
        self.renderer.on_durable([commit(group, topic, partition, offset, self.now, expire, leader_epoch=5, meta="m")])

    def records(self, group: str) -> list[tuple[int, int, bytes, bytes | None]]:
        return decode_partition(self.broker, kafka_partition(group, self.partitions))


def commit(
    group: str, topic: str, partition: int, offset: int, now: int, expire: int | None = None, *,
    leader_epoch: int = -1, meta: str = "",
) -> Any:  # fmt: skip
    return new_offset_commit_record(
        group, topic, partition, offset=offset, leader_epoch=leader_epoch, metadata=meta, commit_timestamp_ms=now,
        expire_timestamp_ms=expire, member_id="", generation_id=-1,
    )  # fmt: skip


# --------------------------------------------------------------------------------------------------------- tests


def test_java_hash_matches_known_java_values() -> None:
    # What Java 17 prints for "...".hashCode() and Kafka's Utils.abs(hash) % 50 (run by hand with `java H.java`).
    assert (java_hash("console-consumer-12345"), kafka_partition("console-consumer-12345")) == (158455506, 6)
    assert java_hash("été-😀") == -1803456526
    assert java_hash("my-group") == -1906497762
    assert java_hash("test-group") == 627841412
    assert java_hash("polygenelubricants") == -(1 << 31)
    assert kafka_partition("my-group") == 12
    assert kafka_partition("polygenelubricants") == 0  # Utils.abs(Integer.MIN_VALUE) = 0
    assert kafka_partition("été-😀") == 26  # a surrogate pair counts as two code units


@pytest.mark.parametrize("group", ["my-group", "test-group", "polygenelubricants", "été-😀", "console-consumer-12345"])
def test_a_commit_lands_in_the_groups_partition_in_kafkas_format(group: str) -> None:
    env = Env()
    env.commit(group, "orders", 3, 42)
    got = env.records(group)
    assert len(got) == 1
    offset, timestamp, key, value = got[0]
    assert (offset, timestamp) == (0, env.now)
    assert parse_key(key) == ("offset", group, "orders", 3)
    assert value is not None
    assert parse_offset_value(value) == {
        "version": 3, "offset": 42, "leader_epoch": 5, "metadata": "m", "commit_timestamp": env.now,
    }  # fmt: skip
    others = [i for i in range(50) if i != kafka_partition(group) and decode_partition(env.broker, i)]
    assert others == []


def test_a_commit_with_a_retention_time_is_value_version_1_with_its_expire_timestamp() -> None:
    env = Env()
    env.commit("g", "t", 0, 7, expire=env.now + 60_000)
    (_, _, _, value) = env.records("g")[0]
    assert value is not None
    parsed = parse_offset_value(value)
    assert parsed == {
        "version": 1, "offset": 7, "metadata": "m", "commit_timestamp": env.now, "expire_timestamp": env.now + 60_000,
    }  # fmt: skip


def test_group_metadata_record_and_tombstones() -> None:
    env = Env()
    member = MemberMetadata("m-1", "inst-1", "client-a", "/10.0.0.1", 300_000, 45_000, b"\x00sub", b"\x00asg")
    plain = MemberMetadata("m-2", None, "client-b", "/10.0.0.2", 60_000, 10_000, b"", b"")
    gm = new_group_metadata_record(
        "grp", protocol_type="consumer", generation_id=4, protocol="range", leader="m-1",
        current_state_timestamp_ms=env.now - 5, members=[member, plain], now_ms=env.now,
    )  # fmt: skip
    env.renderer.on_durable([gm, commit("grp", "t", 1, 9, env.now)])
    assert len(env.records("grp")) == 2  # a reader between the two: it sees both states
    env.now += 1_000
    env.renderer.on_durable(
        [
            new_offset_tombstone("grp", "t", 1, cause=OffsetRemovalCause.GROUP_DELETED, now_ms=env.now),
            new_group_tombstone("grp", cause=GroupRemovalCause.DELETED, now_ms=env.now),
        ]
    )
    got = env.records("grp")
    assert [(o, parse_key(k)) for o, _, k, _ in got] == [
        (0, ("group", "grp")),
        (1, ("offset", "grp", "t", 1)),
        (2, ("offset", "grp", "t", 1)),
        (3, ("group", "grp")),
    ]
    assert got[0][3] is not None
    assert parse_group_value(got[0][3]) == {
        "protocol_type": "consumer", "generation": 4, "protocol": "range", "leader": "m-1",
        "current_state_timestamp": env.now - 1_000 - 5,
        "members": [
            {"member_id": "m-1", "group_instance_id": "inst-1", "client_id": "client-a", "client_host": "/10.0.0.1",
             "rebalance_timeout": 300_000, "session_timeout": 45_000, "subscription": b"\x00sub",
             "assignment": b"\x00asg"},
            {"member_id": "m-2", "group_instance_id": None, "client_id": "client-b", "client_host": "/10.0.0.2",
             "rebalance_timeout": 60_000, "session_timeout": 10_000, "subscription": b"", "assignment": b""},
        ],
    }  # fmt: skip
    assert [v for *_, v in got[2:]] == [None, None]  # tombstones: null values
    assert [t for _, t, _, _ in got] == [env.now - 1_000] * 2 + [env.now] * 2


def test_an_empty_group_record_has_null_protocol_and_leader() -> None:
    env = Env()
    gm = new_group_metadata_record(
        "e", protocol_type=None, generation_id=0, protocol=None, leader=None, current_state_timestamp_ms=-1,
        members=[], now_ms=env.now,
    )  # fmt: skip
    env.renderer.on_durable([gm])
    (_, _, key, value) = env.records("e")[0]
    assert parse_key(key) == ("group", "e") and value is not None
    assert parse_group_value(value) == {
        "protocol_type": "", "generation": 0, "protocol": None, "leader": None, "current_state_timestamp": -1,
        "members": [],
    }  # fmt: skip


def test_the_record_stream_renders_only_durable_batches() -> None:
    from coordinator.record_log import MemoryLog

    env = Env()
    log = MemoryLog(auto_commit=False)
    stream = RecordStream(log, env.renderer)
    record = commit("g", "t", 0, 1, env.now)
    stream.append([record])
    stream.append([record])
    assert env.records("g") == []  # appended, not durable yet
    log.fail(count=1)  # the first write fails: nothing of it is rendered
    log.commit()
    assert [o for o, *_ in env.records("g")] == [0]


def test_compaction_keeps_one_record_per_key_at_its_original_offset() -> None:
    env = Env(partitions=1, min_compaction_records=100)
    for i in range(10_000):
        env.now += 1
        env.commit("g", "t", i % 3, i)
        assert env.broker.partition(OFFSETS_TOPIC, 0) is not None  # a tailing reader: every commit is rendered
    held = env.topic.records_held(0)
    assert env.topic.compactions > 0
    assert held <= 100 + 3  # bounded by the live keys (and the compaction threshold), not by 10,000 commits
    got = env.records("g")
    assert len(got) == held
    offsets = [o for o, *_ in got]
    assert offsets == sorted(offsets) and offsets[-1] == 9_999  # original offsets, with gaps
    newest: dict[tuple[Any, ...], int] = {}
    for _o, _t, key, value in got:
        assert value is not None
        newest[parse_key(key)] = parse_offset_value(value)["offset"]
    assert newest == {("offset", "g", "t", 0): 9_999, ("offset", "g", "t", 1): 9_997, ("offset", "g", "t", 2): 9_998}
    p = env.broker.partition(OFFSETS_TOPIC, 0)
    assert p is not None and (p.log_start, p.high_watermark) == (0, 10_000)
    # a Fetch from an offset in a gap starts at the next batch holding a record
    s = env.broker.read(OFFSETS_TOPIC, 0, 5, 1 << 20, min_one=True)
    assert s.error == ErrorCode.none and s.bases and s.bases[0] <= 9_999


def test_compaction_rewrites_batches_keeping_offsets_and_records() -> None:
    env = Env(partitions=1, min_compaction_records=4)
    entries = [(b"a", b"1", env.now), (b"b", b"1", env.now + 1), (b"c", b"1", env.now + 2)]
    env.topic.append(0, entries)  # offsets 0-2 in one batch
    env.topic.append(0, [(b"b", b"2", env.now + 3)])  # 3: b superseded
    env.topic.append(0, [(b"c", b"2", env.now + 4)])  # 4: c superseded (5 records > 2 * 3 keys: compaction)
    env.topic.append(0, [(b"d", b"1", env.now + 5)])  # 5
    env.topic.compact(0)
    got = decode_partition(env.broker, 0)
    assert [(o, t, k, v) for o, t, k, v in got] == [
        (0, env.now, b"a", b"1"),
        (3, env.now + 3, b"b", b"2"),
        (4, env.now + 4, b"c", b"2"),
        (5, env.now + 5, b"d", b"1"),
    ]
    p = env.broker.partition(OFFSETS_TOPIC, 0)
    assert p is not None and list(p.bases) == [0, 3, 4, 5] and list(p.lasts) == [2, 3, 4, 5]


def test_tombstones_are_dropped_after_the_delete_retention_but_never_from_the_last_batch() -> None:
    env = Env(partitions=1, min_compaction_records=1)
    env.topic.append(0, [(b"gone", b"1", env.now)])
    env.topic.append(0, [(b"gone", None, env.now)])
    env.topic.append(0, [(b"kept", b"1", env.now)])
    env.topic.compact(0)
    assert [(o, k, v) for o, _, k, v in decode_partition(env.broker, 0)] == [(1, b"gone", None), (2, b"kept", b"1")]
    env.now += DAY_MS + 1
    env.topic.compact(0)
    assert [(o, k, v) for o, _, k, v in decode_partition(env.broker, 0)] == [(2, b"kept", b"1")]
    assert env.topic.live_keys(0) == 1
    env.topic.append(0, [(b"kept", None, env.now)])
    env.now += DAY_MS + 1
    env.topic.compact(0)  # the tombstone is in the last batch: kept, like Kafka's active segment
    assert [(o, k, v) for o, _, k, v in decode_partition(env.broker, 0)] == [(3, b"kept", None)]


def test_load_renders_one_record_per_live_key() -> None:
    env = Env()
    state = [commit("g1", "t", p, p * 10, env.now) for p in range(2_500)]
    env.renderer.load(state, end_offset=10_000)  # the stored log's last position
    got = env.records("g1")
    assert [o for o, *_ in got] == list(range(7_500, 10_000))  # just below the end: offsets grow across restarts
    assert [parse_key(k)[3] for _, _, k, _ in got] == list(range(2_500))
    index = kafka_partition("g1")
    p = env.broker.partition(OFFSETS_TOPIC, index)
    assert p is not None and len(p.bases) == 3  # at most 1,000 records a batch
    assert (p.log_start, p.high_watermark, p.next_offset) == (0, 10_000, 10_000)
    s = env.broker.read(OFFSETS_TOPIC, index, 123, 1 << 20, min_one=True)  # a reader from before the restart
    assert s.error == ErrorCode.none and s.bases[0] == 7_500
    empty = env.broker.partition(OFFSETS_TOPIC, (index + 1) % 50)
    assert empty is not None and (empty.log_start, empty.high_watermark) == (0, 10_000)
    env.commit("g1", "t", 0, 1)
    assert env.records("g1")[-1][0] == 10_000
    with pytest.raises(ValueError, match="not empty"):
        env.renderer.load([], end_offset=20_000)


def test_load_renders_a_partition_when_it_is_first_read_as_an_eager_load_would() -> None:
    """Start-up gives the topic the loaded state (offsets as rows per group) without rendering it; the first look at a
    partition renders its part: the same records at the same offsets as rendering them all at once, and a commit
    made before that look still lands after them."""
    eager, lazy = Env(), Env()
    state = [
        commit(f"g{g}", "t", p, g * 100 + p, eager.now, leader_epoch=3, meta="x") for g in range(40) for p in range(30)
    ]
    by_partition: dict[int, list[Any]] = {}
    for record in state:
        by_partition.setdefault(kafka_partition(record.group_id), []).append(render_state(record))
    eager.topic.load(by_partition, end_offset=5_000)
    per_group = [(f"g{g}", [dataclasses.astuple(r)[1:8] for r in state if r.group_id == f"g{g}"]) for g in range(40)]
    lazy.renderer.load([], end_offset=5_000, offsets=per_group)
    assert sum(lazy.topic.records_held(i) for i in range(50)) == 0  # nothing rendered yet
    lazy.commit("g0", "t", 0, 999_999)  # durable before anyone looked
    for index in range(50):
        expected = decode_partition(eager.broker, index)
        got = decode_partition(lazy.broker, index)
        if index == kafka_partition("g0"):
            assert got[:-1] == expected and got[-1][0] == 5_000 and parse_key(got[-1][2])[1:] == ("g0", "t", 0)
        else:
            assert got == expected
            e, g = eager.broker.partition(OFFSETS_TOPIC, index), lazy.broker.partition(OFFSETS_TOPIC, index)
            assert e is not None and g is not None and (g.high_watermark, g.next_offset) == (e.high_watermark, 5_000)


def test_the_internal_topic_is_reserved() -> None:
    env = Env()
    topic = env.topics.get(OFFSETS_TOPIC)
    assert topic is not None and topic.partitions == 50
    assert env.topics.maybe_auto_create(OFFSETS_TOPIC) is topic
    fresh = TopicRegistry(auto_create=True)
    assert fresh.maybe_auto_create(OFFSETS_TOPIC) is None  # never auto-created as a plain topic
    with pytest.raises(ValueError, match="internal"):
        parse_topic_spec(f"{OFFSETS_TOPIC}:3")
    b = DefaultRecordBatchBuilder(2, 0, False, -1, -1, -1, 1 << 20)
    b.append(0, timestamp=1, key=b"k", value=b"v", headers=[])
    answers: list[Any] = []
    env.broker.produce([(OFFSETS_TOPIC, 0, bytes(b.build()))], answers.append)
    assert [a.error for a in answers[0]] == [ErrorCode.invalid_topic_exception]
    assert decode_partition(env.broker, 0) == []


def test_the_internal_topic_is_not_recorded_as_a_stored_topic() -> None:
    log = MemoryDataLog(keep=True)
    topics = TopicRegistry()
    topics.add("plain", 1)
    broker = Broker(topics, log, lambda: 0)
    OffsetsTopic(broker, 5, lambda: 0, render_state)
    broker.start()
    assert [getattr(r, "name", None) for r in log.records] == ["plain"]


def test_commits_nobody_reads_are_held_back_and_only_the_newest_of_a_key_is_rendered() -> None:
    env = Env(partitions=1)
    for i in range(3_000):
        env.commit("g", "t", i % 3, i)
    assert (env.topic.pending(0), env.topic.records_held(0)) == (3, 0)  # a dict entry per key, nothing encoded
    got = env.records("g")  # looking at the partition renders them, in one batch
    assert [(o, parse_key(k)[3]) for o, _, k, _ in got] == [(0, 0), (1, 1), (2, 2)]
    assert [parse_offset_value(v)["offset"] for *_, v in got if v is not None] == [2_997, 2_998, 2_999]
    env.commit("g", "t", 1, 5)
    env.commit("g", "t", 0, 6)
    assert [(o, parse_key(k)[3]) for o, _, k, _ in env.records("g")][3:] == [(3, 1), (4, 0)]  # arrival order


def test_a_parked_fetch_gets_a_commit_at_once_and_a_look_renders_at_most_max_render() -> None:
    env = Env(partitions=1, max_render=10)
    woken: list[int] = []
    env.broker.watch(OFFSETS_TOPIC, 0, lambda: woken.append(1))
    env.commit("g", "t", 0, 1)
    assert woken == [1] and env.topic.records_held(0) == 1  # rendered and the reader woken, nobody asked again
    for p in range(25):
        env.commit("g", "t", p, 2)
    assert (env.topic.pending(0), env.topic.records_held(0)) == (25, 1)
    s = env.broker.read(OFFSETS_TOPIC, 0, 0, 1 << 20, min_one=True)
    assert s.error == ErrorCode.none and s.high_watermark == 11 and env.topic.pending(0) == 15  # the 10 oldest
    assert env.broker.list_offset(OFFSETS_TOPIC, 0, -1) == (ErrorCode.none, 21, -1)
    assert env.broker.available(OFFSETS_TOPIC, 0, 0, 1 << 20) > 0 and env.topic.pending(0) == 0
    keys = [parse_key(k)[3] for _, _, k, _ in env.records("g")]
    assert keys == [0, *range(25)]  # in the order they were committed
