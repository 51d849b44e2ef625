"""The audit trail against the real daemon: admin actions through the real Kafka admin clients and through the
operator API with principals of each role, read back from ``GET /v1/audit`` after a restart (stored), each with its
actor (principal, client id, host)."""

from __future__ import annotations

import json
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import TopicPartition as CfTP
from confluent_kafka.admin import AdminClient
from kafka import KafkaAdminClient, TopicPartition
from kafka.structs import OffsetAndMetadata

from servers.http.access import new_token, token_digest

from .daemon import DEFAULT_ARGS, Daemon
from .helpers import wait_for

pytestmark = pytest.mark.e2e

TOKENS = {"ada": new_token(), "otto": new_token(), "vera": new_token()}
ROLES = {"ada": "admin", "otto": "operator", "vera": "viewer"}


@pytest.fixture(scope="module")
def secured(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Daemon]:
    work = tmp_path_factory.mktemp("audited")
    config = Path(work) / "kgc.toml"
    config.write_text(
        '[http]\nanonymous_role = "none"\n\n'
        + "".join(
            f'[[http.principals]]\nname = "{n}"\nrole = "{ROLES[n]}"\ntoken_sha256 = "{token_digest(t)}"\n\n'
            for n, t in TOKENS.items()
        )
    )
    d = Daemon(work, extra_args=(*DEFAULT_ARGS, "--config", str(config))).start()
    try:
        yield d
    finally:
        assert d.stop() == 0, d.log_text()[-3000:]


def http(daemon: Daemon, method: str, path: str, who: str | None, body: Any = None) -> tuple[int, Any]:
    headers = {"User-Agent": f"e2e-{who or 'anonymous'}", "Accept": "application/json"}
    if who is not None:
        headers["Authorization"] = f"Bearer {TOKENS[who]}"
    data = None
    if body is not None:
        headers["Content-Type"] = "application/json"
        data = json.dumps(body).encode()
    req = urllib.request.Request(daemon.http_url + path, data=data, method=method, headers=headers)
    try:
        with urllib.request.urlopen(req, timeout=10) as r:
            return r.status, json.loads(r.read())
    except urllib.error.HTTPError as e:
        return e.code, json.loads(e.read())


def test_each_admin_action_is_in_the_audit_with_its_actor(secured: Daemon) -> None:
    topic = "e2e6"
    kp = KafkaAdminClient(bootstrap_servers=secured.bootstrap, client_id="kp-admin")
    try:
        errors = kp.alter_group_offsets("altered", {TopicPartition(topic, 1): OffsetAndMetadata(7, "", -1)})
        assert [e.errno for e in errors.values()] == [0]
        assert kp.delete_groups(["altered"]) == {"altered": "OK"}
    finally:
        kp.close()
    cf = AdminClient({"bootstrap.servers": secured.bootstrap, "client.id": "cf-admin"})
    cf.alter_consumer_group_offsets([_cf_request("cf-group", topic)])["cf-group"].result(timeout=15)
    [fut] = cf.delete_consumer_groups(["cf-group"], request_timeout=15).values()
    fut.result(timeout=15)
    cf.create_topics([_new_topic("audited-topic")])["audited-topic"].result(timeout=15)

    reset = {"strategy": "to-earliest", "topics": [{"topic": topic, "partitions": [0]}], "execute": True}
    assert http(secured, "POST", "/v1/groups/ops/offsets/reset", "vera", reset)[0] == 403
    assert http(secured, "POST", "/v1/groups/ops/offsets/reset", "otto", reset)[0] == 200
    assert http(secured, "DELETE", "/v1/groups/ops", "otto")[0] == 403
    assert http(secured, "DELETE", "/v1/groups/ops", "ada")[0] == 200
    assert http(secured, "GET", "/v1/audit", None)[0] == 401

    def audit() -> list[dict[str, Any]]:
        status, body = http(secured, "GET", "/v1/audit?limit=100", "vera")
        assert status == 200, body
        return list(reversed(body["actions"]))  # oldest first

    wait_for(lambda: len(audit()) >= 7, 10, "every action in the audit")
    secured.stop()  # stored: still there after a restart
    secured.start()
    wait_for(lambda: http(secured, "GET", "/readyz", None)[0] == 200, 20, "the daemon ready again")
    got = [(a["via"], a["action"], a["resource"], a["principal"], a["client_id"]) for a in audit()]
    assert got == [
        ("kafka", "offsets.alter", "altered", "User:ANONYMOUS", "kp-admin"),
        ("kafka", "group.delete", "altered", "User:ANONYMOUS", "kp-admin"),
        ("kafka", "offsets.alter", "cf-group", "User:ANONYMOUS", "cf-admin"),
        ("kafka", "group.delete", "cf-group", "User:ANONYMOUS", "cf-admin"),
        ("kafka", "topic.create", "audited-topic", "User:ANONYMOUS", "cf-admin"),
        ("http", "offsets.reset", "ops", "User:otto", "e2e-otto"),
        ("http", "group.delete", "ops", "User:ada", "e2e-ada"),
    ]
    hosts = {a["client_host"] for a in audit()}
    assert hosts <= {"/127.0.0.1", "127.0.0.1"} and hosts
    status, of_ops = http(secured, "GET", "/v1/audit?group=ops", "vera")
    assert status == 200 and [a["action"] for a in of_ops["actions"]] == ["group.delete", "offsets.reset"]


def _cf_request(group: str, topic: str) -> Any:
    from confluent_kafka import ConsumerGroupTopicPartitions

    return ConsumerGroupTopicPartitions(group, [CfTP(topic, 2, 11)])


def _new_topic(name: str) -> Any:
    from confluent_kafka.admin import NewTopic

    return NewTopic(name, num_partitions=1, replication_factor=1)
