"""One group mixing kafka-python, aiokafka and confluent-kafka consumers (all on the roundrobin assignor, the only
one aiokafka offers) plus a confluent-kafka member in a child process that gets SIGKILLed."""

from __future__ import annotations

import pytest
from kafka import KafkaAdminClient

from .conftest import Daemon
from .helpers import AiokafkaMember, ChildMember, ConfluentMember, KafkaPythonMember, Member, wait_for

pytestmark = pytest.mark.e2e

TOPIC = "e2e6"
ALL = frozenset(range(6))


def partitioned(owners: list[frozenset[int]]) -> bool:
    """Every partition owned by exactly one of ``owners``, and every owner has at least one."""
    union: set[int] = set()
    for owned in owners:
        if not owned or union & owned:
            return False
        union |= owned
    return union == ALL


def member_count(admin: KafkaAdminClient, group: str) -> int:
    return len(admin.describe_groups([group])[group]["members"])


def test_mixed_clients_share_partitions_and_survive_leave_and_kill(daemon: Daemon) -> None:
    group = "mixed-group"
    admin = KafkaAdminClient(bootstrap_servers=daemon.bootstrap)
    kp = KafkaPythonMember(daemon.bootstrap, group, TOPIC)
    aio = AiokafkaMember(daemon.bootstrap, group, TOPIC)
    cf = ConfluentMember(daemon.bootstrap, group, TOPIC)
    child = ChildMember(daemon.bootstrap, group, TOPIC, session_timeout_ms=3000)
    members: list[Member] = [kp, aio, cf]
    try:
        for m in members:
            m.start()

        def everyone() -> list[frozenset[int]]:
            return [m.assignment for m in members] + [child.assignment]

        wait_for(lambda: partitioned(everyone()), 30, "4 members to split the 6 partitions")
        assert member_count(admin, group) == 4
        described = admin.describe_groups([group])[group]
        assert described["group_state"] == "Stable"
        assert described["protocol_data"] == "roundrobin"
        generation = kp.generation()
        assert aio.generation() == generation

        # A clean leave: the survivors own everything at a higher generation within seconds.
        cf.close()
        members.remove(cf)
        wait_for(lambda: partitioned(everyone()), 15, "3 survivors to own all partitions after a leave")
        assert kp.generation() > generation
        wait_for(lambda: aio.generation() == kp.generation(), 10, "aiokafka at the same generation")
        generation = kp.generation()

        # A crash: the killed member stays until its session times out (3 s), then is evicted.
        child.kill()
        assert member_count(admin, group) == 3  # not yet evicted: nobody told the coordinator
        wait_for(lambda: member_count(admin, group) == 2, 15, "the killed member to be evicted")
        wait_for(lambda: partitioned([kp.assignment, aio.assignment]), 15, "2 survivors to own all partitions")
        assert kp.generation() > generation
    finally:
        if child.process.poll() is None:
            child.kill()
        for m in members:
            m.close()
        admin.close()
    assert "session_timeout" in daemon.log_text()
