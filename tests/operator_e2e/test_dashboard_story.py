"""The 3 a.m. dashboard against the real daemon (a subprocess, SQLite, an API token) and real consumers.

The story (module fixture ``story``):

1. a kafka-python member A and an aiokafka static member S1 (group.instance.id ``ops-static``) form ``ops-3am``;
2. a raw-socket JoinGroup offers a protocol nobody in the group has: refused (INCONSISTENT_GROUP_PROTOCOL);
3. S1 stops (a static member sends no LeaveGroup) and a new aiokafka instance S2 with the same group.instance.id
   takes its place (a static replacement: MemberRemoved cause fenced, no rebalance);
4. a second group is formed, emptied, deleted with ``kgc groups delete`` and created again by a new consumer;
5. snapshot: the API, ``kgc ... --json``, ``/metrics`` and the dashboard (headless Chromium through the DevTools
   protocol) are read and must tell the same events;
6. in the dashboard: S2 stops and is removed with the "remove a static member" action; A commits and leaves; a
   shift-by -7 reset of two partitions is planned (dry run: a real consumer's ``committed()`` unchanged) and
   confirmed (``committed()`` moved by -7 on those two partitions only).
"""

from __future__ import annotations

import json
import socket
import struct
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from kafka import KafkaConsumer, KafkaProducer, TopicPartition

from tests.cdp import Browser
from tests.e2e.daemon import Daemon
from tests.e2e.helpers import AiokafkaMember, KafkaPythonMember, wait_for

from .conftest import PARTITIONS, TOPIC, CommittingKafkaPythonMember, api_get, cli, cli_json, scrape

pytestmark = pytest.mark.e2e

GROUP = "ops-3am"
RECREATED = "ops-3am-recreated"
INSTANCE = "ops-static"
TOKEN = "ops-3am-token"
ALL = frozenset(range(PARTITIONS))
Samples = dict[tuple[str, tuple[tuple[str, str], ...]], float]


@pytest.fixture(scope="module")
def daemon(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Daemon]:
    d = Daemon(tmp_path_factory.mktemp("dashboard-daemon"), topics=(f"{TOPIC}:{PARTITIONS}",),
               env_extra={"KGC_HTTP__TOKEN": TOKEN}).start()  # fmt: skip
    try:
        yield d
    finally:
        code = d.stop()
        assert code == 0, f"daemon exit code {code}:\n{d.log_text()[-3000:]}"


# ----------------------------------------------------------------------------------------------------- helpers


def _str(value: str) -> bytes:
    raw = value.encode()
    return struct.pack(">h", len(raw)) + raw


def refused_join(port: int, group: str) -> int:
    """A JoinGroup v1 from a new member offering only protocol ``kgc-odd``: the error code of the answer."""
    metadata = b"\x00\x00\x00\x00\x00\x01" + _str(TOPIC) + b"\xff\xff\xff\xff"  # a ConsumerProtocol subscription
    body = (_str(group) + struct.pack(">ii", 6_000, 6_000) + _str("") + _str("consumer") + struct.pack(">i", 1)
            + _str("kgc-odd") + struct.pack(">i", len(metadata)) + metadata)  # fmt: skip
    header = struct.pack(">hhi", 11, 1, 42) + _str("odd-client")
    with socket.create_connection(("127.0.0.1", port), timeout=10) as sock:
        sock.sendall(struct.pack(">i", len(header) + len(body)) + header + body)
        size = struct.unpack(">i", _read(sock, 4))[0]
        answer = _read(sock, size)
    correlation, error = struct.unpack(">ih", answer[:6])
    assert correlation == 42
    return int(error)


def _read(sock: socket.socket, n: int) -> bytes:
    out = b""
    while len(out) < n:
        chunk = sock.recv(n - len(out))
        assert chunk, "the daemon closed the connection"
        out += chunk
    return out


def settled(base: str, group: str, members: int) -> Any:
    body = api_get(base, f"/v1/groups/{group}")
    if body.get("state") != "Stable" or len(body["members"]) != members:
        return None
    owned = sorted(p for m in body["members"] for p in (m["assignment"] or {}).get(TOPIC, []))
    return body if owned == sorted(ALL) else None


def read_committed(bootstrap: str) -> dict[int, int | None]:
    consumer = KafkaConsumer(bootstrap_servers=bootstrap, group_id=GROUP, enable_auto_commit=False)
    try:
        read = {p: consumer.committed(TopicPartition(TOPIC, p)) for p in sorted(ALL)}
        return {p: (o if o is None or isinstance(o, int) else o.offset) for p, o in read.items()}
    finally:
        consumer.close()


def metric(samples: Samples, name: str, **labels: str) -> float:
    want = set(labels.items())
    return sum(v for (n, lbls), v in samples.items() if n == name and want <= set(lbls))


class StaticMember(AiokafkaMember):
    """An aiokafka static member: on close it sends no LeaveGroup (KIP-345), as a restarting pod would."""

    def __init__(self, bootstrap: str, group: str, topic: str) -> None:
        super().__init__(bootstrap, group, topic, group_instance_id=INSTANCE)


READY = "document.getElementById('view').dataset.ready === '1'"


def open_page(page: Browser, base: str, route: str, key: str) -> None:
    page.navigate(f"{base}/?refresh=400#{route}")
    page.wait_for(f"{READY} && document.getElementById('view').dataset.route === {json.dumps(key)}", what=route)


@dataclass
class Story:
    daemon: Daemon
    before: Samples
    s1_member: str = ""
    s2_member: str = ""
    api: dict[str, Any] = field(default_factory=dict)
    cli: dict[str, Any] = field(default_factory=dict)
    metrics: Samples = field(default_factory=dict)
    dom: dict[str, Any] = field(default_factory=dict)
    committed: dict[int, int] = field(default_factory=dict)
    reset_partitions: list[int] = field(default_factory=list)
    plan_rows: list[list[str]] = field(default_factory=list)
    dry_run_read: dict[int, int | None] = field(default_factory=dict)
    executed_read: dict[int, int | None] = field(default_factory=dict)
    after: Samples = field(default_factory=dict)
    screenshots: list[Path] = field(default_factory=list)


@pytest.fixture(scope="module")
def story(daemon: Daemon, chromium: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Story]:
    base, bootstrap = daemon.http_url, daemon.bootstrap
    tmp = tmp_path_factory.mktemp("dashboard-story")
    wait_for(lambda: api_get(base, "/readyz").get("ready"), 30, "/readyz")
    s = Story(daemon, before=scrape(base))
    a = CommittingKafkaPythonMember(bootstrap, GROUP, TOPIC)
    s1, s2 = StaticMember(bootstrap, GROUP, TOPIC), StaticMember(bootstrap, GROUP, TOPIC)
    others: list[KafkaPythonMember] = []
    try:
        a.start()
        wait_for(lambda: settled(base, GROUP, 1), 30, "A alone")
        s1.start()
        group = wait_for(lambda: settled(base, GROUP, 2), 30, "A and S1 Stable")
        s.s1_member = next(m["member_id"] for m in group["members"] if m["group_instance_id"] == INSTANCE)

        assert refused_join(daemon.port, GROUP) == 23  # INCONSISTENT_GROUP_PROTOCOL

        s1.close()  # static: no LeaveGroup, its member stays until its session times out or is replaced
        s2.start()

        def replaced() -> Any:
            body = settled(base, GROUP, 2)
            ids = [m["member_id"] for m in (body or {}).get("members", []) if m["group_instance_id"] == INSTANCE]
            return body if ids and ids[0] != s.s1_member and s2.assignment else None

        group = wait_for(replaced, 30, "S2 in S1's place")
        s.s2_member = next(m["member_id"] for m in group["members"] if m["group_instance_id"] == INSTANCE)

        # A second group: formed, emptied, deleted with the CLI, created again.
        first = KafkaPythonMember(bootstrap, RECREATED, TOPIC)
        others.append(first)
        first.start()
        wait_for(lambda: settled(base, RECREATED, 1), 30, "the second group")
        first.close()
        wait_for(lambda: api_get(base, f"/v1/groups/{RECREATED}").get("state") == "Empty", 30, "it Empty")
        done = cli(base, "groups", "delete", RECREATED, "--token", TOKEN)
        assert done.returncode == 0, done.stderr
        again = KafkaPythonMember(bootstrap, RECREATED, TOPIC)
        others.append(again)
        again.start()
        wait_for(lambda: settled(base, RECREATED, 1), 30, "the second group again")
        wait_for(lambda: settled(base, GROUP, 2), 30, "ops-3am still Stable")

        # ---- the four views of the same moment
        for g in (GROUP, RECREATED):
            s.api[f"events {g}"] = api_get(base, f"/v1/groups/{g}/events")
            s.api[f"rebalances {g}"] = api_get(base, f"/v1/groups/{g}/rebalances")
            s.cli[f"events {g}"] = cli_json(base, "groups", "events", g)
            s.cli[f"rebalances {g}"] = cli_json(base, "groups", "rebalances", g)
        s.api["attention"] = api_get(base, "/v1/attention")
        s.cli["attention"] = cli_json(base, "groups", "attention")
        s.api["group"] = api_get(base, f"/v1/groups/{GROUP}")
        s.metrics = scrape(base)
        with Browser(chromium, tmp / "profile") as page:
            open_page(page, base, "/", "groups:#/")
            page.wait_for("document.querySelector('#attention tr[data-kind]')", what="the attention list")
            s.dom["attention"] = page.evaluate(
                "[...document.querySelectorAll('#attention tr[data-kind]')].map(r => [r.dataset.kind,"
                " r.dataset.attentionGroup])"
            )
            s.dom["rph"] = page.evaluate(
                "Object.fromEntries([...document.querySelectorAll('#groups-body tr')].map(r => [r.dataset.group,"
                " r.querySelector('.rph').innerText]))"
            )
            s.screenshots.append(page.screenshot(tmp / "groups.png"))
            for g in (GROUP, RECREATED):
                open_page(page, base, f"/group/{g}", f"group:{g}")
                page.wait_for("document.querySelector('.tl-mark')", what=f"{g}'s markers")
                s.dom[f"marks {g}"] = page.evaluate(
                    "[...document.querySelectorAll('.tl-mark')].map(m => [m.dataset.kind,"
                    " m.querySelector('time').getAttribute('datetime'), m.innerText])"
                )
                s.dom[f"rows {g}"] = page.evaluate(
                    "[...document.querySelectorAll('.tl-row')].map(r => [r.dataset.cause,"
                    " r.querySelector('time').getAttribute('datetime')])"
                )
                s.dom[f"members {g}"] = page.evaluate(
                    "[...document.querySelectorAll('#members-body tr[data-member]')].map(r => [r.dataset.member,"
                    " r.children[1].innerText])"
                )

            # ---- actions in the dashboard: remove the stopped static member, then reset offsets
            open_page(page, base, f"/group/{GROUP}", f"group:{GROUP}")
            s.screenshots.append(page.screenshot(tmp / "group.png"))
            page.type("#token", TOKEN)
            s2.close()
            page.choose("#member-select", INSTANCE)
            page.click("#remove-member-btn")
            page.wait_for("document.querySelector('#remove-member-plan .confirm')")
            page.click("#remove-member-plan .confirm")
            page.wait_for("document.querySelector('#remove-member-plan [data-done]')", what="S2 removed")
            wait_for(lambda: settled(base, GROUP, 1) and a.assignment == ALL, 30, "A alone after the removal")
            # a log to commit into: a reset is clamped into [log start, log end], as kafka-consumer-groups does
            producer = KafkaProducer(bootstrap_servers=bootstrap, enable_idempotence=False, acks="all")
            for p in sorted(ALL):
                for i in range(200):
                    producer.send(TOPIC, value=b"%d" % i, partition=p)
            producer.flush()
            producer.close()
            s.committed = {p: 100 + 10 * p for p in sorted(ALL)}
            a.commit(s.committed)
            a.close()
            wait_for(lambda: api_get(base, f"/v1/groups/{GROUP}").get("state") == "Empty", 30, "ops-3am Empty")

            s.reset_partitions = [1, 4]
            page.wait_for("document.querySelector('#g-head .badge.Empty')", what="the page showing Empty")
            page.choose("#reset-strategy", "shift-by")
            page.type("#reset-value", "-7")
            page.type("#reset-scope", f"{TOPIC}:1,4")
            page.click("#reset-plan-btn")
            page.wait_for("document.querySelector('#reset-plan .confirm')", what="the dry-run plan")
            s.plan_rows = page.evaluate(
                "[...document.querySelectorAll('#reset-plan tbody tr')].map(r => [...r.children].map(c =>"
                " c.innerText.trim()))"
            )
            s.screenshots.append(page.screenshot(tmp / "reset-plan.png"))
            s.dry_run_read = read_committed(bootstrap)
            page.click("#reset-plan .confirm")
            page.wait_for("document.querySelector('#reset-plan [data-done=reset]')", what="the executed reset")
            s.executed_read = read_committed(bootstrap)
            page.wait_for(
                f"document.querySelector('#offsets-body tr[data-tp=\"{TOPIC}/1\"] td:nth-child(3)').innerText"
                f" === '{s.committed[1] - 7}'",
                what="the offsets table after the reset",
            )
        s.after = scrape(base)
        yield s
    finally:
        for m in (a, s1, s2, *others):
            if m._thread.is_alive():
                m.close()


# --------------------------------------------------------------------------------------------------------- tests


def test_refused_join_and_static_replacement_agree_across_api_cli_metrics_and_dashboard(story: Story) -> None:
    events = story.api[f"events {GROUP}"]["events"]
    assert story.cli[f"events {GROUP}"] == story.api[f"events {GROUP}"]
    assert [(e["kind"], e["source"]) for e in events] == [("static_replacement", "history"),
                                                          ("join_refused", "memory")], events  # fmt: skip
    replacement, refusal = events
    assert replacement["group_instance_id"] == INSTANCE
    assert (replacement["previous_member_id"], replacement["member_id"]) == (story.s1_member, story.s2_member)
    assert refusal["error"] == "INCONSISTENT_GROUP_PROTOCOL" and refusal["client_id"] == "odd-client"
    assert "kgc-odd" in refusal["detail"]
    # /metrics counts the same: one refusal, one member fenced by its replacement (and no rebalance for it)
    moved = lambda name, **labels: metric(story.metrics, name, **labels) - metric(story.before, name, **labels)  # noqa: E731
    assert moved("kgc_join_refused_total", error="inconsistent_group_protocol") == 1
    assert moved("kgc_member_removals_total", group=GROUP, cause="fenced") == 1
    rebalances = story.api[f"rebalances {GROUP}"]
    assert story.cli[f"rebalances {GROUP}"] == rebalances
    assert moved("kgc_rebalances_total", group=GROUP) == rebalances["total"] == 2  # A joined, then S1
    # the replacement is no rebalance's members in or out
    assert story.s2_member not in {i["member_id"] for r in rebalances["rebalances"] for i in r["members_in"]}
    assert story.s1_member not in {o["member_id"] for r in rebalances["rebalances"] for o in r["members_out"]}
    # the dashboard: the same markers at the same instants, the same rebalances, S2 in the members table
    marks = story.dom[f"marks {GROUP}"]
    assert [(k, iso) for k, iso, _ in marks] == [(e["kind"], iso_of(e["timestamp_ms"])) for e in events]
    assert INSTANCE in marks[0][2] and "INCONSISTENT_GROUP_PROTOCOL" in marks[1][2] and "odd-client" in marks[1][2]
    assert story.dom[f"rows {GROUP}"] == [[r["cause"], iso_of(r["started_ms"])] for r in rebalances["rebalances"]]
    shown = dict(story.dom[f"members {GROUP}"])
    assert shown[story.s2_member] == INSTANCE and story.s1_member not in shown
    assert set(shown) == {m["member_id"] for m in story.api["group"]["members"]}


def iso_of(ms: int) -> str:
    from datetime import UTC, datetime

    return datetime.fromtimestamp(ms / 1000, UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")


def test_delete_and_recreate_agree_across_api_cli_metrics_and_dashboard(story: Story) -> None:
    events = story.api[f"events {RECREATED}"]["events"]
    assert story.cli[f"events {RECREATED}"] == story.api[f"events {RECREATED}"]
    assert [(e["kind"], e["source"], e["cause"]) for e in events] == [
        ("group_recreated", "history", None),
        ("group_deleted", "history", "deleted"),
    ]
    moved = metric(story.metrics, "kgc_groups_removed_total", cause="deleted") - metric(
        story.before, "kgc_groups_removed_total", cause="deleted"
    )
    assert moved == 1
    # the stored history keeps the rebalances of both lives of the group id, as /metrics counts them
    rebalances = story.api[f"rebalances {RECREATED}"]
    assert story.cli[f"rebalances {RECREATED}"] == rebalances
    # oldest first: the first life (a join, the leave that emptied it), then the new life from generation 0
    # (kafka-python's leader may rejoin once more right after a rebalance: leader_rejoin, see test_operator_views)
    lives = [(r["cause"], r["from_generation"]) for r in reversed(rebalances["rebalances"])
             if r["cause"] != "leader_rejoin"]  # fmt: skip
    assert lives == [("new_member", 0), ("member_left", 1), ("new_member", 0)], lives
    new_life = next(r for r in rebalances["rebalances"] if r["cause"] == "new_member")
    old_life = next(r for r in rebalances["rebalances"] if r["cause"] == "member_left")
    assert old_life["started_ms"] <= events[1]["timestamp_ms"] <= events[0]["timestamp_ms"] <= new_life["started_ms"]
    moved = metric(story.metrics, "kgc_rebalances_total", group=RECREATED) - metric(
        story.before, "kgc_rebalances_total", group=RECREATED
    )
    assert moved == rebalances["total"]
    assert story.dom[f"rows {RECREATED}"] == [[r["cause"], iso_of(r["started_ms"])] for r in rebalances["rebalances"]]
    marks = story.dom[f"marks {RECREATED}"]
    assert [(k, iso) for k, iso, _ in marks] == [(e["kind"], iso_of(e["timestamp_ms"])) for e in events]


def test_attention_and_rebalances_per_hour_agree(story: Story) -> None:
    attention = story.api["attention"]
    cli_attention = story.cli["attention"]
    strip = lambda body: {**body, "now_ms": 0, "groups": [{**g, "last_commit_age_ms": 0} for g in body["groups"]]}  # noqa: E731
    assert strip(cli_attention) == strip(attention)
    items = [[i["kind"], i["group_id"]] for i in attention["items"]]
    assert ["join_refused", GROUP] in items
    assert story.dom["attention"] == items
    health = {g["group_id"]: g for g in attention["groups"]}
    assert health[GROUP]["refused_joins_last_hour"] == 1
    for g in (GROUP, RECREATED):
        # every rebalance of the story started within the hour: the counter, the history and the page agree
        assert health[g]["rebalances_last_hour"] == story.api[f"rebalances {g}"]["total"]
        assert story.dom["rph"][g] == str(health[g]["rebalances_last_hour"])


def test_a_reset_clicked_through_in_the_dashboard_changes_what_a_consumer_reads(story: Story) -> None:
    committed = story.committed
    expected_plan = [[TOPIC, str(p), str(committed[p]), str(committed[p] - 7)] for p in story.reset_partitions]
    assert story.plan_rows == expected_plan
    assert story.dry_run_read == committed  # the dry run changed nothing a consumer reads
    assert story.executed_read == {p: o - 7 if p in story.reset_partitions else o for p, o in committed.items()}
    moved = metric(story.after, "kgc_offset_commits_total", group=GROUP, kind="admin") - metric(
        story.metrics, "kgc_offset_commits_total", group=GROUP, kind="admin"
    )
    assert moved == len(story.reset_partitions)
    # the removal clicked in the dashboard is in the history as an admin action
    causes = [r["cause"] for r in cli_json(story.daemon.http_url, "groups", "rebalances", GROUP)["rebalances"]]
    assert "admin_action" in causes
    for shot in story.screenshots:
        assert shot.stat().st_size > 10_000
