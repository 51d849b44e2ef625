"""Retention, DeleteRecords and topic deletion in the pure broker core (broker.retention, broker.admin), with a
manual clock and a log whose writes complete when the test says so: whole batches go, the log start moves only once
durable, a read below it is OFFSET_OUT_OF_RANGE, and nothing beyond the high watermark is touched."""

from __future__ import annotations

from broker.admin import AlterConfig, ConfigResource, CreateTopic, EntryResult, TopicAdmin
from broker.records import LogStartAdvanced, TopicCreated, TopicDeleted
from broker.retention import retention_start, run_retention
from protocol.errors import ErrorCode
from tests.core.test_broker import Env, batch


def fill(env: Env, count: int, *, ts_step: int = 1_000, partition: int = 0) -> list[int]:
    """``count`` batches of 3 records with timestamps 1000, 2000, ...; returns their sizes."""
    sizes = []
    for i in range(count):
        data = batch(3, ts=(i + 1) * ts_step)
        sizes.append(len(data))
        env.produce(("t", partition, data))
        env.log.commit()
    return sizes


def admin(env: Env) -> TopicAdmin:
    return TopicAdmin(env.broker, node_id=1, max_partitions=100)


def answer(call) -> list[EntryResult]:  # type: ignore[no-untyped-def]
    """The answer of a call that writes nothing (answered at once)."""
    got: list[list[EntryResult]] = []
    call(got.append)
    assert got, "waits for a write"
    return got[0]


def test_size_is_a_running_total_kept_on_append_and_trim() -> None:
    env = Env()
    sizes = fill(env, 4)
    p = env.broker.partition("t", 0)
    assert p is not None and p.size_bytes == sum(sizes)
    p.trim(6)
    assert p.size_bytes == sum(sizes[2:]) and list(p.bases) == [6, 9] and p.log_start == 6


def test_time_retention_deletes_whole_old_batches_once_durable() -> None:
    env = Env(**{"retention.ms": "2500"})
    sizes = fill(env, 4)  # batches at offsets 0, 3, 6, 9 with max timestamps 1002, 2002, 3002, 4002
    env.now = 5_000  # older than 2500 ms: max timestamp < 2500 -> the first two batches
    assert run_retention(env.broker) == 1
    p = env.broker.partition("t", 0)
    assert p is not None and p.log_start == 0  # not durable yet: nothing moved, a fetch still reads from 0
    assert env.broker.read("t", 0, 0, 1 << 20, min_one=True).error == ErrorCode.none
    assert run_retention(env.broker) == 0  # the move in flight is not asked twice
    env.log.commit()
    assert env.log.durable[-1] == LogStartAdvanced("t", 0, 6, 0, 5_000)
    assert p.log_start == 6 and list(p.bases) == [6, 9]
    assert (env.broker.deleted_batches, env.broker.deleted_bytes) == (2, sizes[0] + sizes[1])
    assert env.broker.read("t", 0, 5, 1 << 20, min_one=True).error == ErrorCode.offset_out_of_range
    got = env.broker.read("t", 0, 6, 1 << 20, min_one=True)
    assert got.error == ErrorCode.none and got.bases == [6, 9] and got.log_start_offset == 6
    assert env.broker.list_offset("t", 0, -2) == (ErrorCode.none, 6, -1)


def test_time_retention_stops_at_the_first_young_batch_and_may_empty_the_log() -> None:
    env = Env(**{"retention.ms": "0"})
    fill(env, 3)
    env.now = 10_000
    run_retention(env.broker)
    env.log.commit()
    p = env.broker.partition("t", 0)
    assert p is not None and p.log_start == p.high_watermark == 9 and p.size_bytes == 0 and not p.bases
    env.produce(("t", 0, batch(1, ts=10_000)))
    env.log.commit()
    assert env.broker.read("t", 0, 9, 1 << 20, min_one=True).bases == [9]


def test_size_retention_keeps_at_least_the_limit() -> None:
    env = Env()
    sizes = fill(env, 4)
    env.broker.configure("t", {"retention.bytes": str(sizes[0] * 2)})  # room for two batches exactly
    env.log.commit()
    run_retention(env.broker)
    env.log.commit()
    p = env.broker.partition("t", 0)
    assert p is not None and list(p.bases) == [6, 9] and p.size_bytes == sizes[2] + sizes[3]
    env.broker.configure("t", {"retention.bytes": str(sizes[0] * 2 - 1)})  # deleting one would leave too little
    env.log.commit()
    assert retention_start(p, env.broker.config("t"), env.now) is None
    env.broker.configure("t", {"retention.bytes": str(sizes[0] - 1)})
    env.log.commit()
    assert retention_start(p, env.broker.config("t"), env.now) == 9


def test_retention_never_touches_appends_in_flight() -> None:
    env = Env(**{"retention.ms": "0"})
    fill(env, 2)
    env.produce(("t", 0, batch(3, ts=1)))  # in flight: not in the index
    env.now = 100_000
    run_retention(env.broker)
    move = env.log.pending[-1][0]
    assert move == [LogStartAdvanced("t", 0, 6, 0, 100_000)]  # the durable end, not the log end (9)
    env.log.commit()
    p = env.broker.partition("t", 0)
    assert p is not None and p.log_start == 6 and list(p.bases) == [6] and p.high_watermark == 9


def test_a_failed_move_changes_nothing_and_is_asked_again() -> None:
    env = Env(**{"retention.ms": "0"})
    fill(env, 2)
    env.now = 100_000
    run_retention(env.broker)
    env.log.fail()
    p = env.broker.partition("t", 0)
    assert p is not None and p.log_start == 0 and list(p.bases) == [0, 3]
    assert run_retention(env.broker) == 1


def test_delete_records() -> None:
    env = Env()
    fill(env, 3)  # high watermark 9
    a = admin(env)
    got: list[list[EntryResult]] = []
    a.delete_records(
        [("t", 0, 4), ("t", 1, 10), ("t", 0, -7), ("nope", 0, 1), ("__consumer_offsets", 0, 1)], got.append
    )
    assert not got  # waits for the move
    env.log.commit()
    [results] = got
    assert [r.error for r in results] == [
        ErrorCode.none,
        ErrorCode.offset_out_of_range,  # partition 1 is empty: high watermark 0
        ErrorCode.offset_out_of_range,
        ErrorCode.unknown_topic_or_partition,
        ErrorCode.invalid_topic_exception,
    ]
    assert results[0].partitions == 4  # the low watermark, inside the batch at 3
    assert env.broker.read("t", 0, 3, 1 << 20, min_one=True).error == ErrorCode.offset_out_of_range
    assert env.broker.read("t", 0, 4, 1 << 20, min_one=True).bases == [3, 6]  # the batch holding 4, whole
    got = []
    a.delete_records([("t", 0, -1)], got.append)  # -1: the high watermark
    assert not got
    env.log.commit()
    assert got[0][0].partitions == 9
    assert env.broker.partition("t", 0).log_start == 9  # type: ignore[union-attr]
    results = answer(lambda done: a.delete_records([("t", 0, 2)], done))  # below the log start: moves nothing
    assert results[0].error == ErrorCode.none and results[0].partitions == 9


def test_create_topics_checks_like_kafka() -> None:
    env = Env()
    a = admin(env)
    requests = [
        CreateTopic("new", 3, 1, configs=[("retention.ms", "1000")]),
        CreateTopic("t", 1),
        CreateTopic("__consumer_offsets", 1),
        CreateTopic("bad name", 1),
        CreateTopic("dup", 1),
        CreateTopic("dup", 1),
        CreateTopic("rf", 1, 3),
        CreateTopic("zero", 0),
        CreateTopic("compact", 1, configs=[("cleanup.policy", "compact")]),
        CreateTopic("unknown", 1, configs=[("segment.bytes", "1")]),
        CreateTopic("default", -1, -1),
        CreateTopic("huge", 101),
        CreateTopic("assigned", -1, -1, assignments=[(0, [1]), (1, [1])]),
        CreateTopic("elsewhere", -1, -1, assignments=[(0, [2])]),
    ]
    got: list[list[EntryResult]] = []
    a.create_topics(requests, False, got.append)
    assert not got
    env.log.commit()
    [results] = got
    assert [(r.name, r.error) for r in results] == [
        ("new", ErrorCode.none),
        ("t", ErrorCode.topic_already_exists),
        ("__consumer_offsets", ErrorCode.topic_already_exists),
        ("bad name", ErrorCode.invalid_topic_exception),
        ("dup", ErrorCode.invalid_request),
        ("dup", ErrorCode.invalid_request),
        ("rf", ErrorCode.invalid_replication_factor),
        ("zero", ErrorCode.invalid_partitions),
        ("compact", ErrorCode.invalid_config),
        ("unknown", ErrorCode.invalid_config),
        ("default", ErrorCode.none),
        ("huge", ErrorCode.invalid_partitions),
        ("assigned", ErrorCode.none),
        ("elsewhere", ErrorCode.invalid_replica_assignment),
    ]
    assert env.topics.get("new").partitions == 3  # type: ignore[union-attr]
    assert env.topics.get("default").partitions == 1 and env.topics.get("assigned").partitions == 2  # type: ignore[union-attr]
    assert env.broker.config("new").retention_ms == 1000
    assert TopicCreated("new", 3, (("retention.ms", "1000"),), 1_000) in env.log.durable
    only = answer(lambda done: a.create_topics([CreateTopic("check", 2)], True, done))
    assert only[0].error == ErrorCode.none and env.topics.get("check") is None  # validate_only


def test_partitions_in_all_topics_are_bounded() -> None:
    env = Env()  # "t" has 2 partitions
    a = TopicAdmin(env.broker, node_id=1, max_partitions=100, max_total_partitions=10)
    got: list[list[EntryResult]] = []
    a.create_topics([CreateTopic("a", 5), CreateTopic("b", 4)], False, got.append)
    env.log.commit()
    assert [r.error for r in got[0]] == [ErrorCode.none, ErrorCode.policy_violation]  # 2 + 5 + 4 > 10
    got = []
    a.create_partitions([("t", 5, None)], False, got.append)  # 2 + 5 + 3 = 10: still fits
    env.log.commit()
    assert got[0][0].error == ErrorCode.none
    results = answer(lambda done: a.create_partitions([("t", 6, None)], False, done))
    assert results[0].error == ErrorCode.policy_violation


def test_delete_topic_wakes_fetches_and_is_durable() -> None:
    env = Env()
    fill(env, 1)
    woken: list[int] = []
    env.broker.watch("t", 0, lambda: woken.append(1))
    a = admin(env)
    generation = env.topics.generation
    got: list[list[EntryResult]] = []
    a.delete_topics(["t", "nope", "__consumer_offsets"], [None, None, None], got.append)
    assert woken == [1] and env.topics.get("t") is None and env.topics.generation > generation
    assert env.broker.read("t", 0, 0, 100, min_one=True).error == ErrorCode.unknown_topic_or_partition
    env.log.commit()
    assert [r.error for r in got[0]] == [
        ErrorCode.none,
        ErrorCode.unknown_topic_or_partition,
        ErrorCode.topic_authorization_failed,
    ]
    assert env.log.durable[-1] == TopicDeleted("t", 1_000)
    env.topics.add("t", 1)  # created again: starts afresh, recorded again
    env.log.commit()
    assert env.broker.partition("t", 0).high_watermark == 0  # type: ignore[union-attr]
    assert env.log.durable[-1] == TopicCreated("t", 1, (), 1_000)


def test_a_deletion_that_cannot_be_written_puts_the_topic_back() -> None:
    env = Env()
    fill(env, 1)
    a = admin(env)
    got: list[list[EntryResult]] = []
    a.delete_topics([None], [env.topics.get("t").topic_id], got.append)  # type: ignore[union-attr]
    assert env.topics.get("t") is None
    env.log.fail()
    assert got[0][0].error == ErrorCode.kafka_storage_error and got[0][0].name == "t"
    assert env.topics.get("t") is not None and env.broker.partition("t", 0).high_watermark == 3  # type: ignore[union-attr]
    assert not env.log.pending  # put back without a record: it was never deleted in storage


def test_create_partitions_grow_only() -> None:
    env = Env()
    a = admin(env)
    got: list[list[EntryResult]] = []
    a.create_partitions([("t", 4, None), ("t", 4, None)], False, got.append)
    assert [r.error for r in got[0]] == [ErrorCode.invalid_request] * 2
    results = answer(lambda done: a.create_partitions([("t", 2, None), ("nope", 3, None)], False, done))
    assert [r.error for r in results] == [ErrorCode.invalid_partitions, ErrorCode.unknown_topic_or_partition]
    got = []
    a.create_partitions([("t", 5, None), ("__consumer_offsets", 60, None)], False, got.append)
    env.log.commit()
    assert [r.error for r in got[0]] == [ErrorCode.none, ErrorCode.topic_authorization_failed]
    assert env.topics.get("t").partitions == 5  # type: ignore[union-attr]
    assert env.log.durable[-1] == TopicCreated("t", 5, (), 1_000)


def test_alter_and_describe_configs() -> None:
    env = Env(**{"retention.ms": "60000"})
    a = admin(env)
    described = {c.name: c for c in a.describe_configs([ConfigResource(2, "t")])[0].configs}
    assert described["retention.ms"].value == "60000" and described["retention.ms"].source == 4  # the broker's
    assert described["max.message.bytes"].value == "1048588" and described["max.message.bytes"].source == 5
    got: list[list[EntryResult]] = []
    changes = [AlterConfig("retention.ms", 0, "1000"), AlterConfig("cleanup.policy", 2, "delete")]
    a.alter_configs(
        [
            ConfigResource(2, "t", changes),
            ConfigResource(2, "u", [AlterConfig("retention.ms", 0, "1")]),
            ConfigResource(2, "__consumer_offsets", [AlterConfig("retention.ms", 0, "1")]),
            ConfigResource(4, "", [AlterConfig("log.retention.ms", 0, "1")]),
        ],
        False,
        got.append,
    )
    env.log.commit()
    assert [r.error for r in got[0]] == [
        ErrorCode.none,
        ErrorCode.unknown_topic_or_partition,
        ErrorCode.topic_authorization_failed,
        ErrorCode.invalid_config,
    ]
    assert env.broker.topic_configs("t") == {"retention.ms": "1000", "cleanup.policy": "delete"}
    assert env.broker.config("t").retention_ms == 1000
    described = {c.name: c for c in a.describe_configs([ConfigResource(2, "t", names=["retention.ms"])])[0].configs}
    assert list(described) == ["retention.ms"] and described["retention.ms"].source == 1
    assert [s[2] for s in described["retention.ms"].synonyms] == [1, 4, 5]
    for bad in (
        [AlterConfig("retention.ms", 2, "5")],  # APPEND on a non-list config
        [AlterConfig("cleanup.policy", 2, "compact")],
        [AlterConfig("retention.ms", 0, "x")],
        [AlterConfig("segment.ms", 1, None)],
    ):
        results = answer(lambda done, bad=bad: a.alter_configs([ConfigResource(2, "t", bad)], False, done))
        assert results[0].error == ErrorCode.invalid_config, bad
    results = answer(
        lambda done: a.alter_configs([ConfigResource(2, "t", [AlterConfig("retention.ms", 1, None)])], True, done)
    )
    assert results[0].error == ErrorCode.none and env.broker.topic_configs("t")["retention.ms"] == "1000"  # validate
    got = []
    a.alter_configs([ConfigResource(2, "t", [AlterConfig("retention.ms", 1, None)])], False, got.append)
    env.log.commit()
    assert (
        env.broker.topic_configs("t") == {"cleanup.policy": "delete"} and env.broker.config("t").retention_ms == 60000
    )


def test_offset_for_leader_epoch() -> None:
    env = Env()
    fill(env, 2)
    a = admin(env)
    assert a.offset_for_leader_epoch("t", 0, -1, 0) == (ErrorCode.none, 0, 6)
    assert a.offset_for_leader_epoch("t", 0, 0, 0) == (ErrorCode.none, 0, 6)
    assert a.offset_for_leader_epoch("t", 0, -1, 3) == (ErrorCode.none, -1, -1)
    assert a.offset_for_leader_epoch("t", 0, 1, 0)[0] == ErrorCode.unknown_leader_epoch
    assert a.offset_for_leader_epoch("x", 0, -1, 0)[0] == ErrorCode.unknown_topic_or_partition
