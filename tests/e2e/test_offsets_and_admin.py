"""Offsets committed by one client read back by the others, and the admin APIs of kafka-python and confluent-kafka.

confluent-kafka 2.16.1 sends offset metadata with a trailing NUL and may mangle metadata written by others
(README, "Client traps worth knowing"), so metadata is compared without trailing NULs and read through confluent only
where it wrote it itself.
"""

from __future__ import annotations

import asyncio

import pytest
from aiokafka import AIOKafkaConsumer
from aiokafka.structs import TopicPartition as AioTP
from confluent_kafka import ConsumerGroupState, KafkaException
from confluent_kafka import TopicPartition as CfTP
from confluent_kafka.admin import AdminClient
from kafka import KafkaAdminClient, KafkaConsumer, TopicPartition
from kafka.errors import NonEmptyGroupError
from kafka.structs import OffsetAndMetadata

from .conftest import Daemon
from .helpers import KafkaPythonMember, wait_for

pytestmark = pytest.mark.e2e

TOPIC = "e2e6"


def _confluent_committed(bootstrap: str, group: str, partitions: list[int]) -> dict[int, int]:
    from confluent_kafka import Consumer

    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": group, "enable.auto.commit": False})
    try:
        result = consumer.committed([CfTP(TOPIC, p) for p in partitions], timeout=10)
        return {tp.partition: tp.offset for tp in result}
    finally:
        consumer.close()


def _aiokafka_committed(bootstrap: str, group: str, partitions: list[int]) -> dict[int, tuple[int, str]]:
    async def read() -> dict[int, tuple[int, str]]:
        consumer = AIOKafkaConsumer(bootstrap_servers=bootstrap, group_id=group, enable_auto_commit=False)
        await consumer.start()
        try:
            out = {}
            for p in partitions:
                offset = await consumer.committed(AioTP(TOPIC, p))
                out[p] = offset
            return out
        finally:
            await consumer.stop()

    return asyncio.run(read())


def _confluent_admin_offsets(admin: AdminClient, group: str) -> dict[int, tuple[int, str | None]]:
    """{partition: (offset, metadata)}; metadata None when confluent-kafka cannot decode it.

    confluent-kafka 2.16.1 hands the metadata to Python as a C string without its terminating NUL, so it may read past
    the stored bytes (README, "Client traps worth knowing"): a UnicodeDecodeError, or stray bytes after the real value.
    What the daemon stored is checked exactly through kafka-python's admin client above.
    """
    from confluent_kafka import ConsumerGroupTopicPartitions

    futures = admin.list_consumer_group_offsets([ConsumerGroupTopicPartitions(group)])
    result = futures[group].result(10)
    out: dict[int, tuple[int, str | None]] = {}
    for tp in result.topic_partitions:
        try:
            metadata: str | None = (tp.metadata or "").rstrip("\x00")
        except UnicodeDecodeError:
            metadata = None
        out[tp.partition] = (tp.offset, metadata)
    return out


def _same_offsets(read: dict[int, tuple[int, str | None]], expected: dict[int, tuple[int, str]]) -> bool:
    """Offsets equal; metadata equal up to confluent-kafka's over-read (a prefix match, or undecodable)."""
    return read.keys() == expected.keys() and all(
        read[p][0] == offset and (read[p][1] is None or read[p][1].startswith(meta))
        for p, (offset, meta) in expected.items()
    )


def test_commits_are_read_back_by_every_client(daemon: Daemon) -> None:
    group = "offsets-group"
    committer = KafkaConsumer(
        bootstrap_servers=daemon.bootstrap, group_id=group, enable_auto_commit=False, fetch_max_wait_ms=100
    )
    try:
        committer.subscribe([TOPIC])
        wait_for(lambda: committer.poll(100) is not None and committer.assignment(), 20, "kafka-python assignment")
        committer.commit(
            {
                TopicPartition(TOPIC, 0): OffsetAndMetadata(42, "from-kafka-python", -1),
                TopicPartition(TOPIC, 3): OffsetAndMetadata(7, "", -1),
            }
        )
    finally:
        committer.close()  # auto-commit is off: no final commit overwrites the explicit one

    assert _confluent_committed(daemon.bootstrap, group, [0, 3, 5]) == {0: 42, 3: 7, 5: -1001}  # -1001 = invalid
    aio = _aiokafka_committed(daemon.bootstrap, group, [0, 3, 5])
    assert aio == {0: 42, 3: 7, 5: None}

    kp_admin = KafkaAdminClient(bootstrap_servers=daemon.bootstrap)
    try:
        offsets = kp_admin.list_group_offsets(group)[group]
        assert {tp.partition: (o.offset, o.metadata) for tp, o in offsets.items()} == {
            0: (42, "from-kafka-python"),
            3: (7, ""),
        }
    finally:
        kp_admin.close()
    cf_admin = AdminClient({"bootstrap.servers": daemon.bootstrap})
    assert _same_offsets(_confluent_admin_offsets(cf_admin, group), {0: (42, "from-kafka-python"), 3: (7, "")})

    # And the other way round: confluent-kafka commits outside the group (generation -1), kafka-python reads it.
    from confluent_kafka import Consumer

    cf = Consumer({"bootstrap.servers": daemon.bootstrap, "group.id": group, "enable.auto.commit": False})
    try:
        cf.commit(offsets=[CfTP(TOPIC, 5, 99, metadata="from-confluent")], asynchronous=False)
    finally:
        cf.close()
    reader = KafkaConsumer(bootstrap_servers=daemon.bootstrap, group_id=group, enable_auto_commit=False)
    try:
        committed = reader.committed(TopicPartition(TOPIC, 5), metadata=True)
        assert committed is not None
        assert committed.offset == 99
        assert committed.metadata.rstrip("\x00") == "from-confluent"
    finally:
        reader.close()


def test_admin_clients_list_describe_alter_delete(daemon: Daemon) -> None:
    group = "admin-group"
    kp_admin = KafkaAdminClient(bootstrap_servers=daemon.bootstrap)
    cf_admin = AdminClient({"bootstrap.servers": daemon.bootstrap})
    member = KafkaPythonMember(daemon.bootstrap, group, TOPIC)
    member.start()
    try:
        wait_for(lambda: member.assignment == frozenset(range(6)), 20, "the member to own all partitions")

        # list, with and without a state filter
        listed = {g["group_id"]: g for g in kp_admin.list_groups()}
        assert listed[group]["group_state"] == "Stable"
        assert listed[group]["protocol_type"] == "consumer"
        assert group in {g["group_id"] for g in kp_admin.list_groups(states_filter=["Stable"])}
        assert group not in {g["group_id"] for g in kp_admin.list_groups(states_filter=["Empty"])}
        stable = cf_admin.list_consumer_groups(states={ConsumerGroupState.STABLE}).result(10)
        assert group in {g.group_id for g in stable.valid}
        empty = cf_admin.list_consumer_groups(states={ConsumerGroupState.EMPTY}).result(10)
        assert group not in {g.group_id for g in empty.valid}

        # describe
        described = kp_admin.describe_groups([group])[group]
        assert described["group_state"] == "Stable"
        assert described["protocol_type"] == "consumer"
        assert described["protocol_data"] == "roundrobin"
        [m] = described["members"]
        assert m["client_id"] == "kp-member"
        assert m["client_host"] == "/127.0.0.1"
        [assigned] = m["member_assignment"]["assigned_partitions"]
        assert (assigned["topic"], sorted(assigned["partitions"])) == (TOPIC, list(range(6)))
        cf_described = cf_admin.describe_consumer_groups([group])[group].result(10)
        assert cf_described.state == ConsumerGroupState.STABLE
        assert cf_described.partition_assignor == "roundrobin"
        [cm] = cf_described.members
        assert cm.client_id == "kp-member"
        assert cm.host == "/127.0.0.1"
        assert sorted(tp.partition for tp in cm.assignment.topic_partitions) == list(range(6))

        # delete while a member remains: NON_EMPTY_GROUP from both clients
        assert kp_admin.delete_groups([group]) == {group: NonEmptyGroupError.__name__}
        with pytest.raises(KafkaException) as raised:
            cf_admin.delete_consumer_groups([group])[group].result(10)
        assert raised.value.args[0].code() == 68  # NON_EMPTY_GROUP
    finally:
        member.close()

    wait_for(lambda: kp_admin.describe_groups([group])[group]["group_state"] == "Empty", 10, "the group to be Empty")
    assert group in {g["group_id"] for g in kp_admin.list_groups(states_filter=["Empty"])}

    # alter offsets on the Empty group, with both clients, and read them back
    errors = kp_admin.alter_group_offsets(group, {TopicPartition(TOPIC, 1): OffsetAndMetadata(11, "kp-admin", -1)})
    assert [e.errno for e in errors.values()] == [0]
    from confluent_kafka import ConsumerGroupTopicPartitions

    altered = cf_admin.alter_consumer_group_offsets(
        [ConsumerGroupTopicPartitions(group, [CfTP(TOPIC, 2, 22, metadata="cf-admin")])]
    )[group].result(10)
    assert [(tp.partition, tp.error) for tp in altered.topic_partitions] == [(2, None)]
    offsets = kp_admin.list_group_offsets(group)[group]
    assert {tp.partition: (o.offset, o.metadata.rstrip("\x00")) for tp, o in offsets.items()} == {
        1: (11, "kp-admin"),
        2: (22, "cf-admin"),
    }

    # delete once Empty: success from kafka-python, then the group is gone (confluent: GROUP_ID_NOT_FOUND)
    assert kp_admin.delete_groups([group]) == {group: "OK"}
    assert group not in {g["group_id"] for g in kp_admin.list_groups()}
    with pytest.raises(KafkaException) as raised:
        cf_admin.delete_consumer_groups([group])[group].result(10)
    assert raised.value.args[0].code() == 69  # GROUP_ID_NOT_FOUND
    assert kp_admin.list_group_offsets(group)[group] == {}
    kp_admin.close()


def test_the_log_of_a_real_client_run_tells_the_story(daemon: Daemon) -> None:
    """A consumer joins (no group.instance.id), an admin's delete is refused while it is a member, it leaves (no
    KIP-800 reason from kafka-python), an admin resets an offset and deletes the group. The daemon's log (of this
    run and of the earlier tests of this module): no ``None`` and no ERROR anywhere, every line of the group state
    machine and of the Kafka audit log has ``group=``, and the admin lines say who asked."""
    group = "log-story"
    admin = KafkaAdminClient(bootstrap_servers=daemon.bootstrap, client_id="story-admin")
    member = KafkaPythonMember(daemon.bootstrap, group, TOPIC)
    member.start()
    try:
        wait_for(lambda: member.assignment == frozenset(range(6)), 20, "the member to own all partitions")
        assert admin.delete_groups([group]) == {group: NonEmptyGroupError.__name__}
    finally:
        member.close()
    wait_for(lambda: admin.describe_groups([group])[group]["group_state"] == "Empty", 10, "the group to be Empty")
    errors = admin.alter_group_offsets(group, {TopicPartition(TOPIC, 3): OffsetAndMetadata(33, "", -1)})
    assert [e.errno for e in errors.values()] == [0]
    assert admin.delete_groups([group]) == {group: "OK"}
    admin.close()

    def has_line(*parts: str) -> bool:
        return any(all(p in line for p in parts) for line in daemon.log_text().splitlines())

    wait_for(lambda: has_line("group deleted (DeleteGroups)", f"group={group}"), 5, "the delete to be logged")
    lines = [line for line in daemon.log_text().splitlines() if line.startswith("ts=")]
    assert not [line for line in lines if "None" in line]
    assert not [line for line in lines if "level=error" in line]
    story = [line for line in lines if "logger=coordinator.group" in line or "logger=servers.kafka.audit" in line]
    assert story and not [line for line in story if " group=" not in line]
    mine = [line for line in story if f" group={group} " in line]
    who = "client_id=story-admin client_host=/127.0.0.1 principal=User:ANONYMOUS"
    assert any('msg="member joined" member=kp-member-' in line for line in mine)
    assert any('msg="member removed: left" member=kp-member-' in line for line in mine)
    assert any(
        line.startswith("ts=") and 'level=warning logger=servers.kafka.audit' in line
        and 'msg="DeleteGroups refused: NON_EMPTY_GROUP" client_id=story-admin client_host=/127.0.0.1' in line
        for line in mine
    )  # fmt: skip
    assert any('msg="offsets committed outside the group (generation -1) on 1 partition(s): e2e6"' in line
               and line.endswith(who) for line in mine)  # fmt: skip
    assert any('msg="group deleted (DeleteGroups)"' in line and line.endswith(who) for line in mine)
