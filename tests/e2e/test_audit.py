"""The audit trail against the real daemon, for every kind of admin action (issue #19, point 6): each is done once
through the real Kafka admin clients (kafka-python's ``KafkaAdminClient``, confluent-kafka's ``AdminClient``) and once
through the operator API with principals of each role, beside real consumers. Each shows up with its actor
(principal, client id, host):

* in ``GET /v1/audit``, after a restart (stored), in the order done;
* on the dashboard's ``#/audit`` page (headless Chromium, the viewer's token typed into the header);
* in the Spark report (over a ``kgc export``): an admin's offset reset - HTTP reset and Kafka-admin alter alike - is
  told apart from a consumer's own rewind, and names who did it.

Member removal through the Kafka admin API (kafka-python's ``remove_group_members``: LeaveGroup v3+ naming one static
member by group.instance.id and one dynamic member by member id) is audited; the consumers that leave the group
themselves (LeaveGroup on the connection they joined on) are not."""

from __future__ import annotations

import json
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import ConsumerGroupTopicPartitions
from confluent_kafka import TopicPartition as CfTP
from confluent_kafka.admin import AdminClient, NewTopic
from kafka import KafkaAdminClient, KafkaConsumer, TopicPartition
from kafka.admin import (
    ACL,
    ACLFilter,
    ACLOperation,
    ACLPermissionType,
    ACLResourcePatternType,
    MemberToRemove,
    ResourcePattern,
    ResourcePatternFilter,
)
from kafka.admin import ResourceType as KpResourceType
from kafka.admin._users import UserScramCredentialDeletion, UserScramCredentialUpsertion
from kafka.structs import OffsetAndMetadata

from servers.http.access import new_token, token_digest
from tests.browser.conftest import chromium
from tests.spark.conftest import spark

from .daemon import DEFAULT_ARGS, ROOT, Daemon
from .helpers import AiokafkaMember, KafkaPythonMember, wait_for

pytestmark = pytest.mark.e2e
__all__ = ["chromium", "spark"]  # the session fixtures of tests/browser and tests/spark

TOKENS = {"ada": new_token(), "otto": new_token(), "vera": new_token()}
ROLES = {"ada": "admin", "otto": "operator", "vera": "viewer"}
TOPIC = "e2e6"
ANON = "User:ANONYMOUS"

Row = tuple[str, str, str, str, str]  # via, action, resource, principal, client id


@dataclass
class Story:
    daemon: Daemon
    expected: list[Row] = field(default_factory=list)  # oldest first

    def did(self, via: str, action: str, resource: str, principal: str, client_id: str) -> None:
        self.expected.append((via, action, resource, principal, client_id))


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


def commit_then_leave(daemon: Daemon, group: str, offsets: list[dict[int, int]]) -> None:
    """A kafka-python consumer joins ``group`` (subscribed to every partition of TOPIC), commits each round of
    offsets as a member of the group (generation >= 0), then closes: it leaves the group itself."""
    consumer = KafkaConsumer(
        bootstrap_servers=daemon.bootstrap, group_id=group, client_id=f"kp-consumer-{group}",
        enable_auto_commit=False, session_timeout_ms=6000, heartbeat_interval_ms=300, fetch_max_wait_ms=100,
    )  # fmt: skip
    try:
        consumer.subscribe([TOPIC])
        wait_for(lambda: consumer.poll(timeout_ms=100) is not None and len(consumer.assignment()) == 6, 30,
                 f"{group}'s consumer assigned every partition")  # fmt: skip
        for round_ in offsets:
            consumer.commit({TopicPartition(TOPIC, p): OffsetAndMetadata(o, "", -1) for p, o in round_.items()})
    finally:
        consumer.close()


@pytest.fixture(scope="module")
def story(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Story]:
    work = tmp_path_factory.mktemp("audited")
    config = Path(work) / "kgc.toml"
    config.write_text(
        '[http]\nanonymous_role = "none"\n\n'
        + "".join(
            f'[[http.principals]]\nname = "{n}"\nrole = "{ROLES[n]}"\ntoken_sha256 = "{token_digest(t)}"\n\n'
            for n, t in TOKENS.items()
        )
    )
    acl_args = ("--set", "authorizer.enabled=true", "--set", "allow.everyone.if.no.acl.found=true")
    d = Daemon(work, extra_args=(*DEFAULT_ARGS, *acl_args, "--config", str(config))).start()
    try:
        s = Story(d)
        _drive(s)
        yield s
    finally:
        assert d.stop() == 0, d.log_text()[-3000:]


def _drive(s: Story) -> None:
    d = s.daemon
    # Consumers commit, then leave themselves (not audited): "rewound" has a consumer's own rewind on partition 2.
    commit_then_leave(d, "rewound", [{1: 20, 2: 30}, {2: 25}])
    commit_then_leave(d, "ops", [{0: 40}])
    # A group with two static members (removed over HTTP and over Kafka) and a dynamic one (removed over Kafka).
    members = [
        AiokafkaMember(d.bootstrap, "members", TOPIC, group_instance_id="s-http"),
        AiokafkaMember(d.bootstrap, "members", TOPIC, group_instance_id="s-kafka"),
        KafkaPythonMember(d.bootstrap, "members", TOPIC),
    ]
    kp = KafkaAdminClient(bootstrap_servers=d.bootstrap, client_id="kp-admin")
    try:
        for m in members:
            m.start()
        wait_for(lambda: sum(len(m.assignment) for m in members) == 6 and all(m.assignment for m in members), 60,
                 "three members sharing the partitions")  # fmt: skip
        # --- the Kafka admin APIs (kafka-python), as User:ANONYMOUS
        errors = kp.alter_group_offsets("rewound", {TopicPartition(TOPIC, 1): OffsetAndMetadata(7, "", -1)})
        assert [e.errno for e in errors.values()] == [0]
        s.did("kafka", "offsets.alter", "rewound", ANON, "kp-admin")
        assert all(e.errno == 0 for e in kp.delete_group_offsets("rewound", [TopicPartition(TOPIC, 2)]).values())
        s.did("kafka", "offsets.delete", "rewound", ANON, "kp-admin")
        errors = kp.alter_group_offsets("scratch", {TopicPartition(TOPIC, 3): OffsetAndMetadata(5, "", -1)})
        assert [e.errno for e in errors.values()] == [0]
        s.did("kafka", "offsets.alter", "scratch", ANON, "kp-admin")
        assert kp.delete_groups(["scratch"]) == {"scratch": "OK"}
        s.did("kafka", "group.delete", "scratch", ANON, "kp-admin")
        [described] = kp.describe_groups(["members"]).values()
        dynamic = next(m["member_id"] for m in described["members"] if not m["group_instance_id"])
        removed = kp.remove_group_members(
            "members", [MemberToRemove(group_instance_id="s-kafka"), MemberToRemove(member_id=dynamic)]
        )
        assert all(e.errno == 0 for e in removed.values()), removed
        s.did("kafka", "member.remove", "members", ANON, "kp-admin")
        s.did("kafka", "member.remove", "members", ANON, "kp-admin")
        acl = ACL("User:kafka-reader", "*", ACLOperation.READ, ACLPermissionType.ALLOW,
                  ResourcePattern(KpResourceType.TOPIC, "audit-acl-kafka", ACLResourcePatternType.LITERAL))  # fmt: skip
        assert kp.create_acls([acl])["failed"] == []
        s.did("kafka", "acl.create", "ALLOW User:kafka-reader READ from * on TOPIC:LITERAL:audit-acl-kafka", ANON,
              "kp-admin")  # fmt: skip
        [(_, deleted, error)] = kp.delete_acls(
            [ACLFilter("User:kafka-reader", None, ACLOperation.ANY, ACLPermissionType.ANY,
                       ResourcePatternFilter(KpResourceType.ANY, None, ACLResourcePatternType.ANY))]
        )  # fmt: skip
        assert len(deleted) == 1 and error.errno == 0
        s.did("kafka", "acl.delete", "ALLOW User:kafka-reader READ from * on TOPIC:LITERAL:audit-acl-kafka", ANON,
              "kp-admin")  # fmt: skip
        upsert = UserScramCredentialUpsertion("kafka-user", "SCRAM-SHA-256", "kafka-user-secret", iterations=4096)
        assert kp.alter_user_scram_credentials([upsert]) == {"kafka-user": None}
        s.did("kafka", "user.alter", "kafka-user", ANON, "kp-admin")
        deletion = UserScramCredentialDeletion("kafka-user", "SCRAM-SHA-256")
        assert kp.alter_user_scram_credentials([deletion]) == {"kafka-user": None}
        s.did("kafka", "user.delete", "kafka-user", ANON, "kp-admin")
        # --- confluent-kafka's AdminClient
        cf = AdminClient({"bootstrap.servers": d.bootstrap, "client.id": "cf-admin"})
        alter = ConsumerGroupTopicPartitions("cf-group", [CfTP(TOPIC, 2, 11)])
        cf.alter_consumer_group_offsets([alter])["cf-group"].result(timeout=15)
        s.did("kafka", "offsets.alter", "cf-group", ANON, "cf-admin")
        [fut] = cf.delete_consumer_groups(["cf-group"], request_timeout=15).values()
        fut.result(timeout=15)
        s.did("kafka", "group.delete", "cf-group", ANON, "cf-admin")
        cf.create_topics([NewTopic("audited-topic", num_partitions=1, replication_factor=1)])["audited-topic"].result(
            timeout=15
        )
        s.did("kafka", "topic.create", "audited-topic", ANON, "cf-admin")

        # --- the operator API: each role may do only its own (the refusals are not actions)
        reset = {"strategy": "to-earliest", "topics": [{"topic": TOPIC, "partitions": [0]}], "execute": True}
        assert http(d, "POST", "/v1/groups/ops/offsets/reset", "vera", reset)[0] == 403
        assert http(d, "POST", "/v1/groups/ops/offsets/reset", "otto", reset)[0] == 200
        s.did("http", "offsets.reset", "ops", "User:otto", "e2e-otto")
        assert http(d, "DELETE", "/v1/groups/members/members/s-http", "vera")[0] == 403
        assert http(d, "DELETE", "/v1/groups/members/members/s-http", "otto")[0] == 200
        s.did("http", "member.remove", "members", "User:otto", "e2e-otto")
        status, body = http(d, "DELETE", "/v1/groups/ops/offsets", "ada", {"topics": [{"topic": TOPIC}]})
        assert status == 200, body
        s.did("http", "offsets.delete", "ops", "User:ada", "e2e-ada")
        assert http(d, "DELETE", "/v1/groups/ops", "otto")[0] == 403
        assert http(d, "DELETE", "/v1/groups/ops", "ada")[0] == 200
        s.did("http", "group.delete", "ops", "User:ada", "e2e-ada")
        binding = {"resource_type": "GROUP", "resource_name": "audit-acl-http", "principal": "User:mallory",
                   "operation": "READ", "permission": "DENY"}  # fmt: skip
        assert http(d, "POST", "/v1/acls", "otto", {"acls": [binding]})[0] == 403
        assert http(d, "POST", "/v1/acls", "ada", {"acls": [binding]})[0] == 201
        s.did("http", "acl.create", "DENY User:mallory READ from * on GROUP:LITERAL:audit-acl-http", "User:ada",
              "e2e-ada")  # fmt: skip
        assert http(d, "DELETE", "/v1/acls?principal=User:mallory", "ada")[0] == 200
        s.did("http", "acl.delete", "DENY User:mallory READ from * on GROUP:LITERAL:audit-acl-http", "User:ada",
              "e2e-ada")  # fmt: skip
        assert http(d, "PUT", "/v1/users/http-user", "ada", {"password": "http-user-secret"})[0] == 201
        s.did("http", "user.alter", "http-user", "User:ada", "e2e-ada")
        assert http(d, "DELETE", "/v1/users/http-user", "ada")[0] == 200
        s.did("http", "user.delete", "http-user", "User:ada", "e2e-ada")
    finally:
        kp.close()
        for m in members:
            m.close()  # the dynamic member leaves itself (not audited); static members send no LeaveGroup
    wait_for(lambda: len(audit(d)) >= len(s.expected), 10, "every action in the audit")


def audit(daemon: Daemon, query: str = "") -> list[dict[str, Any]]:
    status, body = http(daemon, "GET", f"/v1/audit?limit=200{query}", "vera")
    assert status == 200, body
    return list(reversed(body["actions"]))  # oldest first


def _rows(actions: list[dict[str, Any]]) -> list[Row]:
    return [(a["via"], a["action"], a["resource"], a["principal"], a["client_id"]) for a in actions]


def test_every_kind_of_admin_action_is_in_the_api_with_its_actor(story: Story) -> None:
    d = story.daemon
    assert http(d, "GET", "/v1/audit", None)[0] == 401
    kinds = {(via, action) for via, action, *_ in story.expected}
    assert {"offsets.alter", "offsets.reset", "offsets.delete", "group.delete", "member.remove", "acl.create",
            "acl.delete", "user.alter", "user.delete"} <= {a for _, a in kinds}  # fmt: skip
    d.stop()  # stored: still there after a restart
    d.start()
    wait_for(lambda: http(d, "GET", "/readyz", None)[0] == 200, 20, "the daemon ready again")
    got = audit(d)
    assert _rows(got) == story.expected  # and nothing else: the consumers' own leaves are not admin actions
    hosts = {a["client_host"] for a in got}
    assert hosts <= {"/127.0.0.1", "127.0.0.1"} and hosts
    of_members = audit(d, "&group=members")
    assert [(a["via"], a["principal"]) for a in of_members] == [
        ("kafka", ANON), ("kafka", ANON), ("http", "User:otto")
    ]  # fmt: skip
    kafka_removals = [a["detail"] for a in of_members if a["via"] == "kafka"]
    assert "static member s-kafka removed" in kafka_removals[0] and "member kp-member-" in kafka_removals[1]
    # The group's history tells the same: the rebalances after the removals have the cause admin_action.
    status, rebalances = http(d, "GET", "/v1/groups/members/rebalances?limit=50", "vera")
    assert status == 200, rebalances
    causes = [r["cause"] for r in rebalances["rebalances"]]
    assert "admin_action" in causes, causes


def test_the_dashboard_shows_each_action_with_its_actor(story: Story, chromium: str, tmp_path: Path) -> None:
    from tests.cdp import Browser

    with Browser(chromium, tmp_path / "profile") as page:
        page.navigate(story.daemon.http_url + "/?refresh=500#/audit")
        page.wait_for("document.getElementById('view')?.dataset.ready === '1'", what="the page's first refresh")
        page.type("#header-token", TOKENS["vera"])
        n = len(story.expected)
        page.wait_for(f"document.querySelectorAll('#audit-body tr[data-action]').length === {n}",
                      what="every action on the audit page")  # fmt: skip
        shown = json.loads(
            page.evaluate("""JSON.stringify([...document.querySelectorAll('#audit-body tr[data-action]')]
            .map((tr) => [tr.children[1].textContent, tr.dataset.action, tr.dataset.principal,
                          tr.querySelector('.client').textContent, tr.children[6].textContent]))""")
        )
    assert [tuple(r[:4]) for r in reversed(shown)] == [(v, a, p, c) for v, a, _, p, c in story.expected]
    assert all("127.0.0.1" in r[4] for r in shown)


@pytest.mark.spark
@pytest.mark.timeout(600)  # a cold JVM on a loaded machine
def test_the_spark_report_tells_admin_resets_with_who_from_consumer_rewinds(
    story: Story, spark: Any, tmp_path: Path
) -> None:
    """The report's own tables (``compute_metrics`` over the ``kgc export`` of the daemon's database: what
    ``rebalance_report`` writes; its HTML page is tests/spark/test_report_figures.py's)."""
    from spark_jobs.config import ReportConfig, ReportRange
    from spark_jobs.extract import read_source
    from spark_jobs.metrics import compute_metrics

    out = tmp_path / "export"
    cmd = [sys.executable, "-m", "daemon", "export", "--out", str(out), "--data-dir",
           str(story.daemon.workdir / "data")]  # fmt: skip
    done = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    rng = ReportRange(0, int(time.time() * 1000) + 1)
    tables = compute_metrics(read_source(spark, str(out)), ReportConfig(until_ms=rng.until_ms), rng)

    resets = sorted((r["group_id"], r["partition_index"], r["committed_offset"], r["via"], r["principal"],
                     r["client_id"]) for r in tables["offset_resets"].collect())  # fmt: skip
    assert resets == [
        ("ops", 0, 0, "http", "User:otto", "e2e-otto"),  # the operator API's reset
        ("rewound", 1, 7, "kafka", ANON, "kp-admin"),  # kafka-python's alter_group_offsets
    ]
    rewinds = [(r["group_id"], r["partition_index"], r["rewind_by"]) for r in tables["commit_rewinds"].collect()]
    assert rewinds == [("rewound", 2, 5)]  # the consumer's own, with no actor
    assert "principal" not in tables["commit_rewinds"].columns
