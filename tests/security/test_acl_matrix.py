"""The ACL matrix with the real admin clients and AUTHENTICATED principals (issue #19's acceptance).

The daemon in-process with one SASL_PLAINTEXT listener (SCRAM-SHA-512 and PLAIN), ``authorizer.enabled``,
``super.users=User:admin`` and ``allow.everyone.if.no.acl.found`` at Kafka's default (false). The super user,
bootstrapped from the settings, creates the users alice and bob with ``alter_user_scram_credentials`` (kafka-python and
confluent-kafka) and their ACLs with ``create_acls`` (both clients); then each API is tried by alice and by bob, allowed
and denied, with the error code Kafka gives:

* alice: Read on the groups PREFIXED ``team-a-`` but a DENY on ``team-a-secret`` (DENY overrides the ALLOW); Delete on
  ``team-a-`` groups; Read and Write on the topic ``a-topic``; Create, Delete and DescribeConfigs on topics PREFIXED
  ``a-``.
* bob: All on the group ``team-b`` and the topic ``b-topic``; of alice's only Describe on ``a-topic`` (so the
  clients reach the Produce and Fetch checks instead of stopping at Metadata).

Every other resource has no ACL, so nobody but the super user may touch it. Also: a wrong password (SCRAM and
PLAIN), a revoked ACL stopping a member's heartbeats, refusals that do not disclose existence, cluster-wide grants,
``/v1/acls`` reaching the same authorizer, the ACL changes in the audit, and no ERROR in the daemon's log."""

from __future__ import annotations

import json
import logging
import urllib.request
import uuid
from collections.abc import Iterator
from typing import Any

import kafka.errors as kerrors
import pytest
from confluent_kafka import (
    Consumer,
    ConsumerGroupTopicPartitions,
    KafkaError,
    KafkaException,
    Producer,
    TopicPartition,
)
from confluent_kafka.admin import (
    AclBinding,
    AclBindingFilter,
    AclOperation,
    AclPermissionType,
    AdminClient,
    ConfigResource,
    NewTopic,
    ResourcePatternType,
    ResourceType,
    ScramCredentialInfo,
    ScramMechanism,
    UserScramCredentialUpsertion,
)
from kafka import KafkaConsumer
from kafka.admin import (
    ACL,
    ACLOperation,
    ACLPermissionType,
    ACLResourcePatternType,
    KafkaAdminClient,
    ResourcePattern,
)
from kafka.admin import NewTopic as KpNewTopic
from kafka.admin import ResourceType as KpResourceType
from kafka.admin._users import UserScramCredentialUpsertion as KpUpsertion
from kafka.structs import TopicPartition as KpTopicPartition

from tests.server.conftest import RunningApp
from tests.storage.conftest import fresh_postgres_database

ADMIN_PASSWORD = "admin-secret"
PASSWORDS = {"admin": ADMIN_PASSWORD, "alice": "alice-secret", "bob": "bob-secret"}


class Cluster:
    def __init__(self, app: RunningApp, storage: dict[str, str]) -> None:
        self.storage = storage
        self._serve(app)

    def _serve(self, app: RunningApp) -> None:
        self.app = app
        self.port = next(s.bound_port for spec, s in app.app.listeners if spec.name == "SASL_PLAINTEXT")  # type: ignore[attr-defined]
        self.bootstrap = f"127.0.0.1:{self.port}"

    def restart(self) -> None:
        """Stop the daemon and start a new one on the same storage (on a new port)."""
        self.app.stop()
        self._serve(RunningApp(durable=True, **_settings(self.storage)).start())

    def conf(self, user: str, password: str | None = None, mechanism: str = "SCRAM-SHA-512") -> dict[str, Any]:
        return {
            "bootstrap.servers": self.bootstrap, "security.protocol": "SASL_PLAINTEXT", "sasl.mechanism": mechanism,
            "sasl.username": user, "sasl.password": PASSWORDS[user] if password is None else password,
        }  # fmt: skip

    def admin(self, user: str) -> AdminClient:
        return AdminClient(self.conf(user))

    def kp_admin(self, user: str) -> KafkaAdminClient:
        return KafkaAdminClient(**self.kp_conf(user))

    def kp_conf(self, user: str, password: str | None = None) -> dict[str, Any]:
        return {
            "bootstrap_servers": self.bootstrap, "security_protocol": "SASL_PLAINTEXT",
            "sasl_mechanism": "SCRAM-SHA-512", "sasl_plain_username": user,
            "sasl_plain_password": PASSWORDS[user] if password is None else password,
        }  # fmt: skip


def binding(rtype: ResourceType, name: str, pattern: ResourcePatternType, user: str, op: AclOperation,
            permission: AclPermissionType = AclPermissionType.ALLOW) -> AclBinding:  # fmt: skip
    return AclBinding(rtype, name, pattern, f"User:{user}", "*", op, permission)


class Errors(logging.Handler):
    """The daemon's records at ERROR and above (the client libraries' own loggers, ``kafka.*``, are not the daemon)."""

    def __init__(self) -> None:
        super().__init__(logging.ERROR)
        self.records: list[logging.LogRecord] = []

    def emit(self, record: logging.LogRecord) -> None:
        if not record.name.startswith(("kafka.", "aiokafka")):
            self.records.append(record)


def _settings(storage: dict[str, str]) -> dict[str, Any]:
    return {
        "listeners": {"listeners": "SASL_PLAINTEXT://127.0.0.1:0", "sasl_enabled_mechanisms": "SCRAM-SHA-512,PLAIN"},
        "authorizer": {"enabled": True, "super_users": "User:admin"},
        "users": {"bootstrap": [f"SCRAM-SHA-512=[name=admin,password={ADMIN_PASSWORD}]"]},
        "storage": storage,
    }


@pytest.fixture(scope="module", params=["sqlite", pytest.param("postgresql", marks=pytest.mark.postgres)])
def storage(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, str]]:
    """Where the daemon keeps its ACLs, users and groups: the embedded SQLite file, or a fresh PostgreSQL database
    (dropped after). One daemon per storage serves the whole module (pytest runs the module's tests per param)."""
    if request.param == "sqlite":
        yield {"data_dir": str(tmp_path_factory.mktemp("acl-matrix"))}
        return
    with fresh_postgres_database("kgc_acl") as url:
        yield {"url": url}


@pytest.fixture(scope="module")
def cluster(storage: dict[str, str]) -> Iterator[Cluster]:
    errors = Errors()
    logging.getLogger().addHandler(errors)
    c = Cluster(RunningApp(durable=True, **_settings(storage)).start(), storage)
    try:
        # the users: alice with kafka-python, bob with confluent-kafka, both by the super user
        kp = c.kp_admin("admin")
        try:
            assert kp.alter_user_scram_credentials([KpUpsertion("alice", "SCRAM-SHA-512", PASSWORDS["alice"])]) == {
                "alice": None
            }
        finally:
            kp.close()
        admin = c.admin("admin")
        info = ScramCredentialInfo(ScramMechanism.SCRAM_SHA_512, 4096)
        for f in admin.alter_user_scram_credentials(
            [UserScramCredentialUpsertion("bob", info, PASSWORDS["bob"].encode())]
        ).values():
            f.result(10)
        for f in admin.create_topics([NewTopic(t, 1, 1) for t in ("a-topic", "b-topic", "other")]).values():
            f.result(10)
        G, T = ResourceType.GROUP, ResourceType.TOPIC
        LIT, PRE = ResourcePatternType.LITERAL, ResourcePatternType.PREFIXED
        Op = AclOperation
        acls = [
            binding(G, "team-a-", PRE, "alice", Op.READ),
            binding(G, "team-a-secret", LIT, "alice", Op.READ, AclPermissionType.DENY),
            binding(T, "a-topic", LIT, "alice", Op.READ),
            binding(T, "a-topic", LIT, "alice", Op.WRITE),
            binding(T, "a-", PRE, "alice", Op.CREATE),
            binding(T, "a-", PRE, "alice", Op.DESCRIBE_CONFIGS),
            binding(G, "team-b", LIT, "bob", Op.ALL),
            binding(T, "a-topic", LIT, "bob", Op.DESCRIBE),  # sees alice's topic, may neither read nor write it
            binding(T, "b-topic", LIT, "bob", Op.ALL),
        ]
        for f in admin.create_acls(acls).values():
            assert f.result(10) is None
        # and two with kafka-python: Delete on alice's groups and topics
        kp = c.kp_admin("admin")
        try:
            result = kp.create_acls([
                ACL("User:alice", "*", ACLOperation.DELETE, ACLPermissionType.ALLOW,
                    ResourcePattern(KpResourceType.GROUP, "team-a-", ACLResourcePatternType.PREFIXED)),
                ACL("User:alice", "*", ACLOperation.DELETE, ACLPermissionType.ALLOW,
                    ResourcePattern(KpResourceType.TOPIC, "a-", ACLResourcePatternType.PREFIXED)),
            ])  # fmt: skip
            assert result["failed"] == [] and len(result["succeeded"]) == 2
        finally:
            kp.close()
        yield c
    finally:
        c.app.stop()
        logging.getLogger().removeHandler(errors)
    # nothing the clients sent, refused or not, is an error of the daemon's
    assert [r.getMessage() for r in errors.records] == []


def code_of(exc: BaseException) -> int:
    err = exc.args[0]
    assert isinstance(err, KafkaError), exc
    return err.code()  # type: ignore[no-any-return]


def consume_and_commit(c: Cluster, user: str, group: str, topic: str) -> KafkaError | None:
    """JoinGroup, SyncGroup, Heartbeat and OffsetCommit by a confluent-kafka consumer: the error, or None."""
    consumer = Consumer({**c.conf(user), "group.id": group, "auto.offset.reset": "earliest",
                         "enable.auto.commit": False, "session.timeout.ms": 6000})  # fmt: skip
    try:
        consumer.subscribe([topic])
        for _ in range(40):
            msg = consumer.poll(0.5)
            if msg is not None and msg.error() is not None:
                err: KafkaError = msg.error()
                if err.code() != KafkaError._PARTITION_EOF:
                    return err
            if consumer.assignment():
                consumer.commit(offsets=[TopicPartition(topic, 0, 0)], asynchronous=False)
                committed = consumer.committed([TopicPartition(topic, 0)], timeout=10)  # OffsetFetch
                assert committed[0].offset == 0 and committed[0].error is None
                return None
        raise AssertionError("the consumer neither joined nor was refused")
    except KafkaException as e:
        return e.args[0]  # type: ignore[no-any-return]
    finally:
        consumer.close()


def produce(c: Cluster, user: str, topic: str) -> KafkaError | None:
    producer = Producer({**c.conf(user), "enable.idempotence": False, "message.timeout.ms": 10000})
    errors: list[KafkaError | None] = []
    producer.produce(topic, b"v", on_delivery=lambda err, _msg: errors.append(err))
    producer.flush(15)
    return errors[0]


def test_groups_join_sync_heartbeat_commit_and_fetch_offsets(cluster: Cluster) -> None:
    assert consume_and_commit(cluster, "alice", "team-a-1", "a-topic") is None
    assert consume_and_commit(cluster, "bob", "team-b", "b-topic") is None
    # bob has no ACL on alice's group; alice's DENY on team-a-secret overrides her PREFIXED ALLOW
    for user, group, topic in (("bob", "team-a-2", "b-topic"), ("alice", "team-a-secret", "a-topic"),
                               ("alice", "team-b", "a-topic"), ("alice", "nobodys", "a-topic")):  # fmt: skip
        err = consume_and_commit(cluster, user, group, topic)
        assert err is not None and err.code() == KafkaError.GROUP_AUTHORIZATION_FAILED, (user, group, err)


def test_kafka_python_consumer_is_refused_the_group(cluster: Cluster) -> None:
    consumer = KafkaConsumer("b-topic", group_id="team-a-3", consumer_timeout_ms=5000, **cluster.kp_conf("bob"))
    try:
        with pytest.raises(kerrors.GroupAuthorizationFailedError):
            consumer.poll(timeout_ms=5000)
    finally:
        consumer.close()


def test_describe_list_and_offsets_admin(cluster: Cluster) -> None:
    assert consume_and_commit(cluster, "alice", "team-a-adm", "a-topic") is None
    alice, bob = cluster.admin("alice"), cluster.admin("bob")
    # DescribeGroups: Describe on the group (implied by Read)
    [described] = alice.describe_consumer_groups(["team-a-adm"]).values()
    assert described.result(10).group_id == "team-a-adm"
    [described] = bob.describe_consumer_groups(["team-a-adm"]).values()
    with pytest.raises(KafkaException) as refused:
        described.result(10)
    assert code_of(refused.value) == KafkaError.GROUP_AUTHORIZATION_FAILED
    # ListGroups: without Describe on the cluster, each sees only the groups it may describe
    listed = {g.group_id for g in alice.list_consumer_groups().result(10).valid}
    assert "team-a-adm" in listed and "team-b" not in listed
    listed = {g.group_id for g in bob.list_consumer_groups().result(10).valid}
    assert "team-a-adm" not in listed
    # OffsetFetch by the admin client
    [fetched] = alice.list_consumer_group_offsets([ConsumerGroupTopicPartitions("team-a-adm")]).values()
    assert [(p.topic, p.offset) for p in fetched.result(10).topic_partitions] == [("a-topic", 0)]
    [fetched] = bob.list_consumer_group_offsets([ConsumerGroupTopicPartitions("team-a-adm")]).values()
    with pytest.raises(KafkaException) as refused:
        fetched.result(10)
    assert code_of(refused.value) == KafkaError.GROUP_AUTHORIZATION_FAILED
    # alter offsets (an OffsetCommit of generation -1) and OffsetDelete
    request = [ConsumerGroupTopicPartitions("team-a-adm", [TopicPartition("a-topic", 0, 0)])]
    [altered] = bob.alter_consumer_group_offsets(request).values()
    with pytest.raises(KafkaException) as refused:
        altered.result(10)
    assert code_of(refused.value) == KafkaError.GROUP_AUTHORIZATION_FAILED
    [altered] = alice.alter_consumer_group_offsets(request).values()
    altered.result(10)
    # OffsetDelete (kafka-python): Delete on the group
    kp_bob, kp_alice = cluster.kp_admin("bob"), cluster.kp_admin("alice")
    try:
        with pytest.raises(kerrors.GroupAuthorizationFailedError):
            kp_bob.delete_group_offsets("team-a-adm", [KpTopicPartition("a-topic", 0)])
        errors = kp_alice.delete_group_offsets("team-a-adm", [KpTopicPartition("a-topic", 0)])
        assert errors == {KpTopicPartition("a-topic", 0): kerrors.NoError}
    finally:
        kp_bob.close()
        kp_alice.close()
    # DeleteGroups
    [deleted] = bob.delete_consumer_groups(["team-a-adm"]).values()
    with pytest.raises(KafkaException) as refused:
        deleted.result(10)
    assert code_of(refused.value) == KafkaError.GROUP_AUTHORIZATION_FAILED
    [deleted] = alice.delete_consumer_groups(["team-a-adm"]).values()
    deleted.result(10)
    assert "team-a-adm" not in {g.group_id for g in cluster.admin("admin").list_consumer_groups().result(10).valid}


def test_produce_and_fetch(cluster: Cluster) -> None:
    assert produce(cluster, "alice", "a-topic") is None
    assert produce(cluster, "bob", "b-topic") is None
    for user, topic in (("bob", "a-topic"), ("alice", "b-topic"), ("alice", "other")):
        err = produce(cluster, user, topic)
        assert err is not None and err.code() == KafkaError.TOPIC_AUTHORIZATION_FAILED, (user, topic, err)
    # Fetch without a group (assign, kafka-python): Read on the topic
    for user, allowed in (("alice", True), ("bob", False)):
        consumer = KafkaConsumer(**cluster.kp_conf(user))
        try:
            tp = KpTopicPartition("a-topic", 0)
            consumer.assign([tp])
            consumer.seek(tp, 0)
            if allowed:
                got = consumer.poll(timeout_ms=10000)
                assert got and all(r.value == b"v" for r in got[tp])
            else:
                with pytest.raises(kerrors.TopicAuthorizationFailedError):
                    consumer.poll(timeout_ms=10000)
        finally:
            consumer.close()


def test_topics_create_delete_and_describe_configs(cluster: Cluster) -> None:
    alice, bob = cluster.admin("alice"), cluster.admin("bob")
    name = f"a-new-{uuid.uuid4().hex[:6]}"
    [created] = bob.create_topics([NewTopic(name, 1, 1)]).values()
    with pytest.raises(KafkaException) as refused:
        created.result(10)
    assert code_of(refused.value) == KafkaError.TOPIC_AUTHORIZATION_FAILED
    [created] = alice.create_topics([NewTopic(name, 1, 1)]).values()
    created.result(10)
    # DescribeConfigs
    [described] = alice.describe_configs([ConfigResource(ConfigResource.Type.TOPIC, name)]).values()
    assert "retention.ms" in described.result(10)
    [described] = bob.describe_configs([ConfigResource(ConfigResource.Type.TOPIC, name)]).values()
    with pytest.raises(KafkaException) as refused:
        described.result(10)
    assert code_of(refused.value) == KafkaError.TOPIC_AUTHORIZATION_FAILED
    # DeleteTopics
    [deleted] = bob.delete_topics([name]).values()
    with pytest.raises(KafkaException) as refused:
        deleted.result(10)
    assert code_of(refused.value) == KafkaError.TOPIC_AUTHORIZATION_FAILED
    [deleted] = alice.delete_topics([name]).values()
    deleted.result(10)


def test_create_acls_needs_alter_on_the_cluster(cluster: Cluster) -> None:
    grab = binding(ResourceType.GROUP, "team-a-", ResourcePatternType.PREFIXED, "bob", AclOperation.ALL)
    bob = cluster.admin("bob")
    [created] = bob.create_acls([grab]).values()
    with pytest.raises(KafkaException) as refused:
        created.result(10)
    assert code_of(refused.value) == KafkaError.CLUSTER_AUTHORIZATION_FAILED
    kp = cluster.kp_admin("alice")
    try:
        acl = ACL("User:alice", "*", ACLOperation.ALL, ACLPermissionType.ALLOW,
                  ResourcePattern(KpResourceType.TOPIC, "b-topic", ACLResourcePatternType.LITERAL))  # fmt: skip
        result = kp.create_acls([acl])
        assert result == {"succeeded": [], "failed": [kerrors.ClusterAuthorizationFailedError]}
    finally:
        kp.close()
    # and the refused binding did not take effect
    err = consume_and_commit(cluster, "bob", "team-a-9", "b-topic")
    assert err is not None and err.code() == KafkaError.GROUP_AUTHORIZATION_FAILED


@pytest.mark.parametrize("mechanism", ["SCRAM-SHA-512", "PLAIN"])
def test_a_wrong_password_gets_sasl_authentication_failed_and_no_group(cluster: Cluster, mechanism: str) -> None:
    errors: list[KafkaError] = []
    admin = AdminClient({**cluster.conf("alice", "wrong", mechanism), "error_cb": errors.append})
    [described] = admin.describe_consumer_groups(["team-a-1"], request_timeout=3).values()
    with pytest.raises(KafkaException):  # no answer: the connection is refused before any group API
        described.result(15)
    admin.poll(1)
    assert KafkaError._AUTHENTICATION in {e.code() for e in errors}
    assert any("authentication failed" in e.str() for e in errors)


def test_an_acl_created_over_http_lets_bob_in_at_once(cluster: Cluster) -> None:
    """``POST /v1/acls`` on the daemon's operator API (open here: no tokens configured) goes to the same authorizer
    the Kafka listener asks; ``DELETE /v1/acls`` takes it back."""
    url = f"http://127.0.0.1:{cluster.app.app.http_port}/v1/acls"
    grant = {"resource_type": "GROUP", "resource_name": "shared-http", "principal": "User:bob", "operation": "READ"}
    err = consume_and_commit(cluster, "bob", "shared-http", "b-topic")
    assert err is not None and err.code() == KafkaError.GROUP_AUTHORIZATION_FAILED
    request = urllib.request.Request(url, method="POST", data=json.dumps({"acls": [grant]}).encode(),
                                     headers={"Content-Type": "application/json"})  # fmt: skip
    with urllib.request.urlopen(request, timeout=10) as r:
        assert r.status == 201
    assert consume_and_commit(cluster, "bob", "shared-http", "b-topic") is None
    admin = cluster.admin("admin")
    listed = admin.describe_acls(
        AclBindingFilter(ResourceType.GROUP, "shared-http", ResourcePatternType.LITERAL, None, None,
                         AclOperation.ANY, AclPermissionType.ANY)
    ).result(10)  # fmt: skip
    assert [(b.principal, b.operation) for b in listed] == [("User:bob", AclOperation.READ)]
    request = urllib.request.Request(f"{url}?resource_name=shared-http", method="DELETE")
    with urllib.request.urlopen(request, timeout=10) as r:
        assert [a["principal"] for a in json.loads(r.read())["acls"]] == ["User:bob"]
    err = consume_and_commit(cluster, "bob", "shared-http", "b-topic")
    assert err is not None and err.code() == KafkaError.GROUP_AUTHORIZATION_FAILED


def test_a_revoked_acl_stops_the_members_heartbeats(cluster: Cluster) -> None:
    """Heartbeat and OffsetCommit are checked on every request: a member whose Read on the group is deleted while it
    is in the group gets GROUP_AUTHORIZATION_FAILED on its next one."""
    admin = cluster.admin("admin")
    grant = binding(ResourceType.GROUP, "revoked", ResourcePatternType.LITERAL, "bob", AclOperation.READ)
    for f in admin.create_acls([grant]).values():
        f.result(10)
    consumer = Consumer({**cluster.conf("bob"), "group.id": "revoked", "auto.offset.reset": "earliest",
                         "enable.auto.commit": False, "session.timeout.ms": 6000,
                         "heartbeat.interval.ms": 200})  # fmt: skip
    try:
        consumer.subscribe(["b-topic"])
        for _ in range(40):
            consumer.poll(0.5)
            if consumer.assignment():
                break
        assert consumer.assignment(), "bob's consumer did not join"
        revoke = AclBindingFilter(ResourceType.GROUP, "revoked", ResourcePatternType.LITERAL, None, None,
                                  AclOperation.ANY, AclPermissionType.ANY)  # fmt: skip
        for f in admin.delete_acls([revoke]).values():
            f.result(10)
        got: KafkaError | None = None
        for _ in range(40):
            msg = consumer.poll(0.5)
            if msg is not None and msg.error() is not None and msg.error().code() != KafkaError._PARTITION_EOF:
                got = msg.error()
                break
        assert got is not None and got.code() == KafkaError.GROUP_AUTHORIZATION_FAILED, got
        with pytest.raises(KafkaException) as refused:
            consumer.commit(offsets=[TopicPartition("b-topic", 0, 0)], asynchronous=False)
        assert code_of(refused.value) == KafkaError.GROUP_AUTHORIZATION_FAILED
    finally:
        consumer.close()


def test_the_acl_changes_are_in_the_audit_with_their_principal(cluster: Cluster) -> None:
    """CreateAcls over Kafka (the fixture's, by the SCRAM-authenticated super user) is in ``GET /v1/audit``."""
    url = f"http://127.0.0.1:{cluster.app.app.http_port}/v1/audit?limit=1000"
    with urllib.request.urlopen(url, timeout=10) as r:
        actions = json.loads(r.read())["actions"]
    created = [a for a in actions if a["action"] == "acl.create" and a["via"] == "kafka"]
    assert {a["principal"] for a in created} == {"User:admin"}
    assert any("User:alice" in a["resource"] and "team-a-secret" in a["resource"] for a in created)
    assert len(created) >= 11  # the fixture's nine (confluent-kafka) and two (kafka-python)


def test_refusals_do_not_disclose_existence_and_are_per_partition(cluster: Cluster) -> None:
    """Kafka checks authorization before existence (a refused principal cannot probe names), per topic in a commit,
    and the broker's configs on the cluster resource."""
    alice, bob = cluster.admin("alice"), cluster.admin("bob")
    [deleted] = bob.delete_topics(["a-missing"], operation_timeout=5).values()
    with pytest.raises(KafkaException) as refused:
        deleted.result(10)
    assert code_of(refused.value) == KafkaError.TOPIC_AUTHORIZATION_FAILED
    [deleted] = alice.delete_topics(["a-missing"], operation_timeout=5).values()
    with pytest.raises(KafkaException) as refused:
        deleted.result(10)
    assert code_of(refused.value) == KafkaError.UNKNOWN_TOPIC_OR_PART
    [described] = bob.describe_consumer_groups(["team-a-never-existed"]).values()
    with pytest.raises(KafkaException) as refused:
        described.result(10)
    assert code_of(refused.value) == KafkaError.GROUP_AUTHORIZATION_FAILED
    [described] = bob.describe_configs([ConfigResource(ConfigResource.Type.BROKER, "0")]).values()
    with pytest.raises(KafkaException) as refused:
        described.result(10)
    assert code_of(refused.value) == KafkaError.CLUSTER_AUTHORIZATION_FAILED
    # alice commits in her group for her topic and bob's: only bob's partition is refused
    request = [ConsumerGroupTopicPartitions("team-a-mixed", [TopicPartition("a-topic", 0, 0),
                                                             TopicPartition("b-topic", 0, 0)])]  # fmt: skip
    [altered] = alice.alter_consumer_group_offsets(request).values()
    errors = {p.topic: p.error.code() if p.error else None for p in altered.result(10).topic_partitions}
    assert errors == {"a-topic": None, "b-topic": KafkaError.TOPIC_AUTHORIZATION_FAILED}
    [fetched] = alice.list_consumer_group_offsets([ConsumerGroupTopicPartitions("team-a-mixed")]).values()
    assert [(p.topic, p.offset) for p in fetched.result(10).topic_partitions] == [("a-topic", 0)]


def cluster_operations(c: Cluster, user: str) -> set[str]:
    """DescribeCluster's cluster_authorized_operations for ``user`` (over the wire: librdkafka asks Metadata v10)."""
    from security.acls import AclOperation as Op
    from tests.server.wire import WireClient, build_request

    client = WireClient("127.0.0.1", c.port)
    try:
        assert client.call(build_request(17, 1, mechanism="PLAIN")).error_code == 0
        assert client.call(build_request(36, 2, auth_bytes=f"\0{user}\0{PASSWORDS[user]}".encode())).error_code == 0
        bits = client.call(build_request(60, 1, include_cluster_authorized_operations=True, endpoint_type=1))
        return {op.name for op in Op if bits.cluster_authorized_operations >> op & 1}
    finally:
        client.close()


def test_cluster_wide_grants(cluster: Cluster) -> None:
    """Describe on the cluster lists every group (Kafka's ListGroups); Create on the cluster creates any topic."""
    assert consume_and_commit(cluster, "alice", "team-a-listed", "a-topic") is None
    admin, bob = cluster.admin("admin"), cluster.admin("bob")
    assert "team-a-listed" not in {g.group_id for g in bob.list_consumer_groups().result(10).valid}
    # KIP-430 as Kafka's DescribeCluster: nothing without Describe on the cluster, all for a super user
    assert cluster_operations(cluster, "bob") == set()
    every = {"CREATE", "ALTER", "DESCRIBE", "CLUSTER_ACTION", "DESCRIBE_CONFIGS", "ALTER_CONFIGS", "IDEMPOTENT_WRITE"}
    assert cluster_operations(cluster, "admin") == every
    kp_bob = cluster.kp_admin("bob")
    try:
        with pytest.raises(kerrors.TopicAuthorizationFailedError):
            kp_bob.create_topics([KpNewTopic("bob-new", 1, 1)])
        cluster_wide = [binding(ResourceType.BROKER, "kafka-cluster", ResourcePatternType.LITERAL, "bob", op)
                        for op in (AclOperation.DESCRIBE, AclOperation.CREATE)]  # fmt: skip
        for f in admin.create_acls(cluster_wide).values():
            f.result(10)
        assert "team-a-listed" in {g.group_id for g in bob.list_consumer_groups().result(10).valid}
        assert cluster_operations(cluster, "bob") == {"DESCRIBE", "CREATE"}
        kp_bob.create_topics([KpNewTopic("bob-new", 1, 1)])
        assert "bob-new" in admin.list_topics(timeout=10).topics
    finally:
        kp_bob.close()
        revoke = AclBindingFilter(ResourceType.BROKER, "kafka-cluster", ResourcePatternType.LITERAL, "User:bob", None,
                                  AclOperation.ANY, AclPermissionType.ANY)  # fmt: skip
        for f in admin.delete_acls([revoke]).values():
            f.result(10)


def _ops(*ops: AclOperation) -> set[AclOperation]:
    return set(ops)


Op = AclOperation
TOPIC_OPS = _ops(Op.READ, Op.WRITE, Op.CREATE, Op.DELETE, Op.ALTER, Op.DESCRIBE, Op.DESCRIBE_CONFIGS,
                 Op.ALTER_CONFIGS)  # fmt: skip
GROUP_OPS = _ops(Op.READ, Op.DESCRIBE, Op.DELETE, Op.DESCRIBE_CONFIGS, Op.ALTER_CONFIGS)
CLUSTER_OPS = _ops(Op.CREATE, Op.ALTER, Op.DESCRIBE, Op.CLUSTER_ACTION, Op.DESCRIBE_CONFIGS, Op.ALTER_CONFIGS,
                   Op.IDEMPOTENT_WRITE)  # fmt: skip


def test_authorized_operations_are_each_principals(cluster: Cluster) -> None:
    """KIP-430 through confluent-kafka's admin calls with ``include_authorized_operations``: DescribeGroups,
    Metadata's topic bits (describe_topics) and its cluster bits (describe_cluster), per principal."""
    from confluent_kafka import TopicCollection

    admin, alice, bob = cluster.admin("admin"), cluster.admin("alice"), cluster.admin("bob")
    assert consume_and_commit(cluster, "alice", "team-a-ops", "a-topic") is None
    assert consume_and_commit(cluster, "bob", "team-b", "b-topic") is None
    secret = [ConsumerGroupTopicPartitions("team-a-secret", [TopicPartition("a-topic", 0, 0)])]
    for f in admin.alter_consumer_group_offsets(secret).values():  # the super user makes the group exist
        f.result(10)

    def group_ops(client: AdminClient, group: str) -> set[AclOperation] | None:
        [f] = client.describe_consumer_groups([group], include_authorized_operations=True).values()
        ops = f.result(10).authorized_operations
        return None if ops is None else set(ops)

    # alice: Read (so Describe) and Delete on team-a- groups; her DENY Read on team-a-secret takes Read only
    assert group_ops(alice, "team-a-ops") == _ops(Op.READ, Op.DESCRIBE, Op.DELETE)
    assert group_ops(alice, "team-a-secret") == _ops(Op.DESCRIBE, Op.DELETE)
    assert group_ops(bob, "team-b") == GROUP_OPS  # All
    assert group_ops(admin, "team-a-ops") == GROUP_OPS  # the super user
    [f] = alice.describe_consumer_groups(["team-a-ops"]).values()
    assert f.result(10).authorized_operations is None  # not asked for

    def topic_ops(client: AdminClient, topic: str) -> set[AclOperation]:
        [f] = client.describe_topics(TopicCollection([topic]), include_authorized_operations=True).values()
        return set(f.result(10).authorized_operations)

    # alice: Read, Write on a-topic; Create, Delete, DescribeConfigs on a- topics (Read and Write imply Describe)
    assert topic_ops(alice, "a-topic") == _ops(Op.READ, Op.WRITE, Op.CREATE, Op.DELETE, Op.DESCRIBE,
                                              Op.DESCRIBE_CONFIGS)  # fmt: skip
    assert topic_ops(bob, "a-topic") == _ops(Op.DESCRIBE)
    assert topic_ops(bob, "b-topic") == TOPIC_OPS
    assert topic_ops(admin, "other") == TOPIC_OPS

    def cluster_ops(client: AdminClient) -> set[AclOperation] | None:
        ops = client.describe_cluster(include_authorized_operations=True).result(10).authorized_operations
        return None if ops is None else set(ops)

    assert cluster_ops(admin) == CLUSTER_OPS
    # no Describe on the cluster: Kafka answers 0, which confluent-kafka reports as None, as it does "not asked for"
    # (kafka-python below tells them apart; tests/api/test_authorized_operations.py checks the field itself)
    assert cluster_ops(alice) is None
    grant = binding(ResourceType.BROKER, "kafka-cluster", ResourcePatternType.LITERAL, "alice", Op.ALTER)
    for f in admin.create_acls([grant]).values():
        f.result(10)
    try:
        assert cluster_ops(alice) == _ops(Op.ALTER, Op.DESCRIBE)  # Alter implies Describe; at once
    finally:
        revoke = AclBindingFilter(ResourceType.BROKER, "kafka-cluster", ResourcePatternType.LITERAL, "User:alice",
                                  None, AclOperation.ANY, AclPermissionType.ANY)  # fmt: skip
        for f in admin.delete_acls([revoke]).values():
            f.result(10)
    # kafka-python asks DescribeCluster (api 60) for them: the same answer
    kp = cluster.kp_admin("alice")
    try:
        assert kp.describe_cluster()["authorized_operations"] == []
    finally:
        kp.close()


def test_acls_and_users_survive_a_restart_on_this_storage(cluster: Cluster) -> None:
    """Last in the module: the ACLs and SCRAM users are in the storage (SQLite or PostgreSQL), loaded again by a new
    daemon on it: alice's grants and DENY, bob's refusals, the HTTP-made and revoked ones gone."""
    cluster.restart()
    assert consume_and_commit(cluster, "alice", "team-a-again", "a-topic") is None
    for user, group, topic in (("alice", "team-a-secret", "a-topic"), ("bob", "team-a-again", "b-topic"),
                               ("bob", "shared-http", "b-topic")):  # fmt: skip
        err = consume_and_commit(cluster, user, group, topic)
        assert err is not None and err.code() == KafkaError.GROUP_AUTHORIZATION_FAILED, (user, group, err)
    alice = cluster.admin("alice")  # kept: a collected AdminClient never completes its futures
    [f] = alice.describe_consumer_groups(["team-a-1"], include_authorized_operations=True).values()
    described = f.result(10)
    assert set(described.authorized_operations) == _ops(Op.READ, Op.DESCRIBE, Op.DELETE)
    assert described.state.name == "EMPTY"  # its committed offsets came back too
