"""ACLs end to end: the real daemon (SQLite) with ``authorizer.enabled``, ACLs created, described and deleted with
confluent-kafka's ``AdminClient`` and kafka-python's ``KafkaAdminClient``, and real consumers (confluent-kafka,
kafka-python, aiokafka) and producers getting
Kafka's errors: a PREFIXED DENY on groups (GROUP_AUTHORIZATION_FAILED), a DENY overriding an ALLOW on a topic
(TOPIC_AUTHORIZATION_FAILED), a deleted ACL taking effect at once, and the ACLs surviving a restart.

Every client here is ``User:ANONYMOUS`` (no authentication on this listener), so ``allow.everyone.if.no.acl.found``
is on: resources without ACLs stay open, and the ACLs created decide the rest."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Iterator

import aiokafka.errors
import kafka.errors as kerrors
import pytest
from aiokafka import AIOKafkaConsumer
from confluent_kafka import Consumer, ConsumerGroupTopicPartitions, KafkaError, KafkaException, Producer, TopicPartition
from confluent_kafka.admin import (
    AclBinding,
    AclBindingFilter,
    AclOperation,
    AclPermissionType,
    AdminClient,
    ResourcePatternType,
    ResourceType,
)
from kafka import KafkaConsumer, KafkaProducer
from kafka.admin import (
    ACL,
    ACLFilter,
    ACLOperation,
    ACLPermissionType,
    ACLResourcePatternType,
    KafkaAdminClient,
    ResourcePattern,
    ResourcePatternFilter,
)
from kafka.admin import ResourceType as KpResourceType
from kafka.structs import TopicPartition as KpTopicPartition

from .daemon import DEFAULT_ARGS, Daemon

pytestmark = pytest.mark.e2e

ANON = "User:ANONYMOUS"


@pytest.fixture(scope="module")
def daemon(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Daemon]:
    d = Daemon(
        tmp_path_factory.mktemp("acls"),
        topics=("open:1", "locked:1"),
        extra_args=(
            *DEFAULT_ARGS,
            "--set", "authorizer.enabled=true",
            "--set", "allow.everyone.if.no.acl.found=true",
            "--set", "super.users=User:root",
        ),
    ).start()  # fmt: skip
    try:
        yield d
    finally:
        code = d.stop()
        assert code == 0, f"daemon exit code {code}:\n{d.log_text()[-3000:]}"
    assert " ERROR " not in d.log_text() and "level=ERROR" not in d.log_text()


def confluent_admin(d: Daemon) -> AdminClient:
    return AdminClient({"bootstrap.servers": d.bootstrap})


def join_and_commit(d: Daemon, group: str) -> KafkaError | None:
    """A confluent-kafka consumer subscribes in ``group`` and commits: the error it is given, or None."""
    consumer = Consumer({"bootstrap.servers": d.bootstrap, "group.id": group, "auto.offset.reset": "earliest",
                         "enable.auto.commit": False, "session.timeout.ms": 6000})  # fmt: skip
    try:
        consumer.subscribe(["open"])
        for _ in range(40):
            msg = consumer.poll(0.5)
            if msg is not None and msg.error() is not None:
                err: KafkaError = msg.error()
                if err.code() != KafkaError._PARTITION_EOF:
                    return err
            if consumer.assignment():
                consumer.commit(offsets=[TopicPartition("open", 0, 0)], asynchronous=False)
                return None
        raise AssertionError("the consumer neither joined nor was refused")
    except Exception as e:  # a refused commit raises KafkaException
        if e.args and isinstance(e.args[0], KafkaError):
            return e.args[0]
        raise
    finally:
        consumer.close()


def produce(d: Daemon, topic: str) -> KafkaError | None:
    producer = Producer({"bootstrap.servers": d.bootstrap, "enable.idempotence": False, "message.timeout.ms": 10000})
    errors: list[KafkaError | None] = []
    producer.produce(topic, b"v", on_delivery=lambda err, _msg: errors.append(err))
    producer.flush(15)
    return errors[0]


def test_the_acl_matrix_with_the_real_admin_clients(daemon: Daemon) -> None:
    admin = confluent_admin(daemon)
    group_deny = AclBinding(ResourceType.GROUP, "denied-", ResourcePatternType.PREFIXED, "User:*", "*",
                            AclOperation.READ, AclPermissionType.DENY)  # fmt: skip
    topic_allow = AclBinding(ResourceType.TOPIC, "locked", ResourcePatternType.LITERAL, ANON, "*",
                             AclOperation.ALL, AclPermissionType.ALLOW)  # fmt: skip
    for future in admin.create_acls([group_deny, topic_allow]).values():
        future.result(10)
    # kafka-python: a DENY on Write overriding the ALLOW on All
    kp_admin = KafkaAdminClient(bootstrap_servers=daemon.bootstrap)
    try:
        deny_write = ACL(ANON, "*", ACLOperation.WRITE, ACLPermissionType.DENY,
                         ResourcePattern(KpResourceType.TOPIC, "locked", ACLResourcePatternType.LITERAL))  # fmt: skip
        result = kp_admin.create_acls([deny_write])
        assert result["failed"] == [] and len(result["succeeded"]) == 1
        described, error = kp_admin.describe_acls(
            ACLFilter(None, None, ACLOperation.ANY, ACLPermissionType.ANY,
                      ResourcePatternFilter(KpResourceType.TOPIC, "locked", ACLResourcePatternType.MATCH))
        )  # fmt: skip
        assert error is kerrors.NoError
        assert {(a.operation, a.permission_type) for a in described} == {
            (ACLOperation.ALL, ACLPermissionType.ALLOW),
            (ACLOperation.WRITE, ACLPermissionType.DENY),
        }
    finally:
        kp_admin.close()
    listed = admin.describe_acls(AclBindingFilter(ResourceType.ANY, None, ResourcePatternType.ANY, None, None,
                                                  AclOperation.ANY, AclPermissionType.ANY)).result(10)  # fmt: skip
    assert len(listed) == 3

    assert join_and_commit(daemon, f"free-{uuid.uuid4().hex[:6]}") is None  # no ACL on the group
    err = join_and_commit(daemon, "denied-1")
    assert err is not None and err.code() == KafkaError.GROUP_AUTHORIZATION_FAILED
    err = produce(daemon, "locked")
    assert err is not None and err.code() == KafkaError.TOPIC_AUTHORIZATION_FAILED
    assert produce(daemon, "open") is None

    # kafka-python's consumer is refused the same way
    consumer = KafkaConsumer("open", bootstrap_servers=daemon.bootstrap, group_id="denied-2",
                             consumer_timeout_ms=5000)  # fmt: skip
    try:
        with pytest.raises(kerrors.GroupAuthorizationFailedError):
            consumer.poll(timeout_ms=5000)
    finally:
        consumer.close()

    # and aiokafka's
    async def aiokafka_join() -> None:
        consumer = AIOKafkaConsumer("open", bootstrap_servers=daemon.bootstrap, group_id="denied-3")
        await consumer.start()
        try:
            await asyncio.wait_for(consumer.getmany(timeout_ms=5000), 20)
        finally:
            await consumer.stop()

    with pytest.raises(aiokafka.errors.GroupAuthorizationFailedError):
        asyncio.run(aiokafka_join())

    # deleting the DENY takes effect at once, on the daemon's open connections too
    deleted = admin.delete_acls([AclBindingFilter(ResourceType.GROUP, "denied-", ResourcePatternType.PREFIXED, None,
                                                  None, AclOperation.ANY, AclPermissionType.ANY)])  # fmt: skip
    [matched] = [f.result(10) for f in deleted.values()]
    assert [b.name for b in matched] == ["denied-"]
    assert join_and_commit(daemon, "denied-1") is None


def test_another_teams_offsets_and_groups_are_protected(daemon: Daemon) -> None:
    """The issue's case: an admin client altering or deleting another team's offsets and groups is refused."""
    admin = confluent_admin(daemon)
    group = f"team-b-{uuid.uuid4().hex[:6]}"
    assert join_and_commit(daemon, group) is None  # the team's group exists, with an offset
    protect = [
        AclBinding(ResourceType.GROUP, "team-b-", ResourcePatternType.PREFIXED, ANON, "*", op, AclPermissionType.DENY)
        for op in (AclOperation.READ, AclOperation.DELETE)
    ]
    for future in admin.create_acls(protect).values():
        future.result(10)
    [future] = admin.alter_consumer_group_offsets(
        [ConsumerGroupTopicPartitions(group, [TopicPartition("open", 0, 0)])]
    ).values()
    with pytest.raises(KafkaException) as refused:
        future.result(10)
    assert refused.value.args[0].code() == KafkaError.GROUP_AUTHORIZATION_FAILED
    [future] = admin.delete_consumer_groups([group]).values()
    with pytest.raises(KafkaException) as refused:
        future.result(10)
    assert refused.value.args[0].code() == KafkaError.GROUP_AUTHORIZATION_FAILED
    # Describe stays allowed (a DENY on Read and Delete does not deny Describe): the group is listed and described
    listed = admin.list_consumer_groups().result(10)
    assert group in {g.group_id for g in listed.valid}
    cleanup = AclBindingFilter(ResourceType.GROUP, "team-b-", ResourcePatternType.PREFIXED, None, None,
                               AclOperation.ANY, AclPermissionType.ANY)  # fmt: skip
    for future in admin.delete_acls([cleanup]).values():
        future.result(10)


def test_acls_survive_a_restart(daemon: Daemon) -> None:  # last: it leaves a DENY on Read of "open"
    admin = confluent_admin(daemon)
    binding = AclBinding(ResourceType.TOPIC, "open", ResourcePatternType.LITERAL, ANON, "*",
                         AclOperation.READ, AclPermissionType.DENY)  # fmt: skip
    allow_all = AclBinding(ResourceType.TOPIC, "open", ResourcePatternType.LITERAL, ANON, "*",
                           AclOperation.ALL, AclPermissionType.ALLOW)  # fmt: skip
    for future in admin.create_acls([binding, allow_all]).values():
        future.result(10)
    assert daemon.stop() == 0
    daemon.start()
    admin = confluent_admin(daemon)  # kept: the futures fail if the client is destroyed before they resolve
    listed = admin.describe_acls(
        AclBindingFilter(ResourceType.TOPIC, "open", ResourcePatternType.LITERAL, None, None, AclOperation.ANY,
                         AclPermissionType.ANY)
    ).result(10)  # fmt: skip
    assert sorted((b.name, b.operation.value, b.permission_type.value) for b in listed) == [
        ("open", AclOperation.ALL.value, AclPermissionType.ALLOW.value),
        ("open", AclOperation.READ.value, AclPermissionType.DENY.value),
    ]
    producer = KafkaProducer(bootstrap_servers=daemon.bootstrap)
    producer.send("open", b"x").get(10)  # Write: allowed by the ALLOW on All
    producer.close()
    consumer = KafkaConsumer(bootstrap_servers=daemon.bootstrap, consumer_timeout_ms=3000)
    try:
        consumer.assign([KpTopicPartition("open", 0)])
        consumer.seek_to_beginning()
        with pytest.raises(kerrors.TopicAuthorizationFailedError):  # Read: the DENY wins
            consumer.poll(timeout_ms=5000)
    finally:
        consumer.close()
