"""Real consumers churn one group on the real daemon (a subprocess); the operator's three views of it agree.

The story (module fixture ``story``), driven by kafka-python, aiokafka and confluent-kafka clients:

1. kafka-python member A joins, then aiokafka member B, then a confluent-kafka member C in a child process
   (three ``new_member`` rebalances);
2. C is SIGKILLed and evicted after its session timeout (``session_timeout``); snapshot while A and B are Stable;
3. A commits offsets for its partitions; B leaves, then A (two ``member_left``; the group ends Empty); snapshot;
4. ``kgc groups reset-offsets`` as a dry run, then with ``--execute``; a fresh kafka-python consumer reads the
   group's offsets with ``committed()`` after each.

At every snapshot the HTTP API, the CLI (``--json``, a subprocess) and the dashboard (headless Chromium,
``--dump-dom`` after its script ran) are read, and ``/metrics`` is scraped through Prometheus' text parser.
"""

from __future__ import annotations

import html
import re
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from kafka import KafkaConsumer, KafkaProducer, TopicPartition
from PIL import Image

from tests.e2e.daemon import Daemon
from tests.e2e.helpers import AiokafkaMember, ChildMember, wait_for

from .conftest import (
    PARTITIONS,
    TOPIC,
    CommittingKafkaPythonMember,
    api_get,
    cli,
    cli_json,
    dashboard_dom,
    dashboard_screenshot,
    scrape,
)

pytestmark = pytest.mark.e2e

GROUP = "ops-churn"
ALL = frozenset(range(PARTITIONS))
CHILD_SESSION_MS = 1500
DASH = "\u2013"  # what the dashboard shows for an empty field
Samples = dict[tuple[str, tuple[tuple[str, str], ...]], float]


@dataclass
class View:
    """What the API, the CLI and the dashboard showed at one moment."""

    api_group: Any
    api_rebalances: Any
    api_groups: Any
    cli_group: Any
    cli_rebalances: Any
    cli_groups: Any
    dom_group: str
    dom_groups: str
    metrics: Samples


@dataclass
class Story:
    daemon: Daemon
    before: Samples
    stable: View | None = None  # A and B Stable, C evicted
    empty: View | None = None  # everybody gone
    committed: dict[int, int] = field(default_factory=dict)  # what A committed
    reset_partitions: list[int] = field(default_factory=list)
    dry_run: Any = None
    dry_run_read: dict[int, int | None] = field(default_factory=dict)
    executed: Any = None
    executed_read: dict[int, int | None] = field(default_factory=dict)
    after_reset: Samples = field(default_factory=dict)
    refused_while_stable: Any = None
    screenshot: Path | None = None
    rebalances_table: str = ""  # ``kgc groups rebalances`` without --json, at the end


def group_settled(base: str, members: int) -> Any:
    """The group's API view once it is Stable with ``members`` members owning every partition between them."""
    body = api_get(base, f"/v1/groups/{GROUP}")
    if body.get("state") != "Stable" or len(body["members"]) != members:
        return None
    owned = [p for m in body["members"] for p in (m["assignment"] or {}).get(TOPIC, [])]
    if sorted(owned) != sorted(ALL) or not all((m["assignment"] or {}).get(TOPIC) for m in body["members"]):
        return None
    return body


def settled_and_quiet(base: str, members: int, quiet_s: float = 0.8, timeout: float = 30) -> Any:
    """Wait until the group is Stable with ``members`` members and its generation has not moved for ``quiet_s``
    (a client may rejoin once more right after a rebalance; see ``test_every_view_shows_the_causes...``)."""
    seen: dict[str, Any] = {}

    def quiet() -> Any:
        body = group_settled(base, members)
        now = time.monotonic()
        if body is None or seen.get("generation") != body["generation_id"]:
            seen.update(generation=body and body["generation_id"], since=now)
            return None
        return body if now - seen["since"] >= quiet_s else None

    return wait_for(quiet, timeout, f"{members} member(s) Stable and quiet for {quiet_s}s")


def snapshot(daemon: Daemon, chromium: str, profile: Path) -> View:
    """The three views; taken again if the group moved while they were read (so they describe one moment)."""
    base = daemon.http_url
    for _ in range(3):
        before = api_get(base, f"/v1/groups/{GROUP}")
        view = _snapshot(daemon, chromium, profile)
        after = api_get(base, f"/v1/groups/{GROUP}")
        if (before["state"], before["generation_id"]) == (after["state"], after["generation_id"]):
            return view
    raise AssertionError("the group kept rebalancing while the operator views were read")


def _snapshot(daemon: Daemon, chromium: str, profile: Path) -> View:
    base = daemon.http_url
    return View(
        api_group=api_get(base, f"/v1/groups/{GROUP}"),
        api_rebalances=api_get(base, f"/v1/groups/{GROUP}/rebalances"),
        api_groups=api_get(base, "/v1/groups"),
        cli_group=cli_json(base, "groups", "describe", GROUP),
        cli_rebalances=cli_json(base, "groups", "rebalances", GROUP),
        cli_groups=cli_json(base, "groups", "list"),
        dom_group=dashboard_dom(chromium, profile, f"{base}/#/group/{GROUP}"),
        dom_groups=dashboard_dom(chromium, profile, f"{base}/#/"),
        metrics=scrape(base),
    )


def read_committed(bootstrap: str) -> dict[int, int | None]:
    """What a real consumer of the group reads with ``committed()`` (OffsetFetch; it does not join the group)."""
    consumer = KafkaConsumer(bootstrap_servers=bootstrap, group_id=GROUP, enable_auto_commit=False)
    try:
        read = {p: consumer.committed(TopicPartition(TOPIC, p)) for p in sorted(ALL)}
        return {p: (o if o is None or isinstance(o, int) else o.offset) for p, o in read.items()}
    finally:
        consumer.close()


@pytest.fixture(scope="module")
def story(daemon: Daemon, chromium: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Story]:
    base, bootstrap = daemon.http_url, daemon.bootstrap
    tmp = tmp_path_factory.mktemp("operator-views")
    profile = tmp / "chromium-profile"
    wait_for(lambda: api_get(base, "/readyz").get("ready"), 30, "/readyz")
    s = Story(daemon, before=scrape(base))
    a = CommittingKafkaPythonMember(bootstrap, GROUP, TOPIC)
    b = AiokafkaMember(bootstrap, GROUP, TOPIC)
    c: ChildMember | None = None
    try:
        a.start()
        settled_and_quiet(base, 1)  # quiet: a late leader rejoin must not absorb the next join
        b.start()
        settled_and_quiet(base, 2)
        c = ChildMember(bootstrap, GROUP, TOPIC, CHILD_SESSION_MS)
        wait_for(lambda: c.assignment, 30, "C assigned")
        settled_and_quiet(base, 3)
        c.kill()  # no LeaveGroup: the coordinator notices only when C's session times out

        def evicted() -> Any:
            done = [r for r in api_get(base, f"/v1/groups/{GROUP}/rebalances")["rebalances"]
                    if r["cause"] == "session_timeout" and r["outcome"] == "stable"]  # fmt: skip
            return done and group_settled(base, 2) and a.assignment and b.assignment

        wait_for(evicted, 30, "C evicted after its session timeout, A and B Stable")
        settled_and_quiet(base, 2)
        s.stable = snapshot(daemon, chromium, profile)
        s.screenshot = dashboard_screenshot(chromium, profile, f"{base}/#/group/{GROUP}", tmp / "group.png")
        # A reset while consumers are in the group is refused and changes nothing (had it been applied, every
        # partition would read 1, not only A's commits below).
        s.refused_while_stable = cli(base, "groups", "reset-offsets", GROUP, "--topic", TOPIC, "--to-offset", "1",
                                     "--execute")  # fmt: skip

        s.committed = {p: 100 + 10 * p for p in sorted(a.assignment)}
        a.commit(s.committed)
        b.close()
        wait_for(lambda: group_settled(base, 1) and a.assignment == ALL, 30, "A alone after B left")
        settled_and_quiet(base, 1)
        a.close()
        wait_for(lambda: api_get(base, f"/v1/groups/{GROUP}").get("state") == "Empty", 30, "the group Empty")
        s.empty = snapshot(daemon, chromium, profile)
        table = cli(base, "groups", "rebalances", GROUP, json_output=False)
        assert table.returncode == 0, table.stderr
        s.rebalances_table = table.stdout

        # A log to reset into (a reset is clamped into [log start, log end], as kafka-consumer-groups does).
        producer = KafkaProducer(bootstrap_servers=bootstrap, enable_idempotence=False, acks="all")
        for p in sorted(ALL):
            for i in range(200):
                producer.send(TOPIC, value=b"%d" % i, partition=p)
        producer.flush()
        producer.close()
        # Reset two of A's partitions back by 7: a dry run first, then for real.
        s.reset_partitions = sorted(s.committed)[:2]
        scope = f"{TOPIC}:{','.join(map(str, s.reset_partitions))}"
        s.dry_run = cli_json(base, "groups", "reset-offsets", GROUP, "--topic", scope, "--shift-by", "-7")
        s.dry_run_read = read_committed(bootstrap)
        s.executed = cli_json(base, "groups", "reset-offsets", GROUP, "--topic", scope, "--shift-by", "-7",
                              "--execute")  # fmt: skip
        s.executed_read = read_committed(bootstrap)
        s.after_reset = scrape(base)
        yield s
    finally:
        if c is not None:
            c.kill()
        for m in (a, b):
            if m._thread.is_alive():
                m.close()


# -------------------------------------------------------------------------------------------- dashboard parsing


def _cells(row: str) -> list[str]:
    return [html.unescape(re.sub(r"<[^>]+>", "", c)).strip() for c in re.findall(r"<td[^>]*>(.*?)</td>", row, re.S)]


def dom_members(dom: str) -> dict[str, dict[str, Any]]:
    """The group page's member table: member id -> instance, client, host, decoded assignment."""
    out = {}
    for member_id, row in re.findall(r'<tr data-member="([^"]+)">(.*?)</tr>', dom, flags=re.S):
        cells = _cells(row)
        assignment = {
            html.unescape(t): [int(p) for p in parts.split(",")]
            for t, parts in re.findall(r"<code>([^<]+)</code>: ([\d, ]+)", row.split("<td>")[-1])
        }
        out[html.unescape(member_id)] = {
            "group_instance_id": None if cells[1] == DASH else cells[1],
            "client_id": cells[2],
            "client_host": cells[3],
            "assignment": assignment,
        }
    return out


def dom_header(dom: str) -> tuple[str, str, int]:
    """(group id, state badge, generation) from the group page's heading and panel."""
    m = re.search(r'<h1>(.*?) <span class="badge ([A-Za-z]+)">', dom)
    assert m, dom[-2000:]
    gen = re.search(r"<div>Generation</div><div>(\d+)</div>", dom)
    assert gen
    return html.unescape(m.group(1)), m.group(2), int(gen.group(1))


def dom_timeline(dom: str) -> list[tuple[str, int, str, str, list[str], list[str]]]:
    """Timeline rows, newest first: (cause, from generation, to generation, outcome, client ids of the members in,
    causes of the members out)."""
    rows = []
    for part in re.split(r'(?=<div class="tl-row" )', dom)[1:]:
        head = re.match(r'<div class="tl-row" data-cause="([^"]+)">', part)
        body = re.search(r'<div class="tl-detail">(.*?)</div>', part, re.S)
        assert head and body, part[:500]
        cause, detail = head.group(1), html.unescape(re.sub(r"\s+", " ", body.group(1))).strip()
        m = re.search(r"generation (-?\d+) → (\S+) · (\w+)", detail)
        assert m, detail
        ins = re.search(r"in: (.*?)(?: · out: |$)", detail)
        out = re.search(r"out: (.*)$", detail)
        out_causes = re.findall(r"\((\w+)\)(?:,|$)", out.group(1).strip()) if out else []
        in_clients = ins.group(1).strip().split(", ") if ins else []
        rows.append((cause, int(m.group(1)), m.group(2), m.group(3), in_clients, out_causes))
    return rows


def dom_groups(dom: str) -> dict[str, tuple[str, int, int]]:
    """The groups page: group id -> (state, generation, members)."""
    out = {}
    for gid, row in re.findall(r'<tr data-group="([^"]+)">(.*?)</tr>', dom, flags=re.S):
        cells = _cells(row)
        out[html.unescape(gid)] = (cells[1], int(cells[4]), int(cells[5]))
    return out


def api_timeline(rebalances: Any) -> list[tuple[str, int, str, str, list[str], list[str]]]:
    return [
        (r["cause"], r["from_generation"], str(r["to_generation"] if r["to_generation"] is not None else "?"),
         r["outcome"], [m["client_id"] for m in r["members_in"]], [m["cause"] for m in r["members_out"]])
        for r in rebalances["rebalances"]
    ]  # fmt: skip


def without_heartbeat_age(group: Any) -> Any:
    """A group view minus the fields that change between two reads of a quiet group: the heartbeat age, and the
    instant the lag is measured at with the lags in time measured then."""
    lag = {k: v for k, v in group["lag"].items() if k not in ("now_ms", "max_lag_ms")}
    lag["partitions"] = [{k: v for k, v in p.items() if k != "lag_ms"} for p in lag["partitions"]]
    return {**group, "members": [{k: v for k, v in m.items() if k != "since_last_heartbeat_ms"}
                                 for m in group["members"]], "lag": lag}  # fmt: skip


# --------------------------------------------------------------------------------------------------------- tests


def test_api_cli_and_dashboard_show_the_same_members_and_assignments(story: Story) -> None:
    v = story.stable
    assert v is not None
    api = v.api_group
    assert api["state"] == "Stable" and len(api["members"]) == 2
    assert {m["client_id"] for m in api["members"]} == {"kp-operator", "aio-member"}  # C (cf) is gone
    # The CLI prints the API's JSON: the same members, ids, hosts and assignments.
    assert without_heartbeat_age(v.cli_group) == without_heartbeat_age(api)
    # The dashboard renders the same.
    assert dom_header(v.dom_group) == (GROUP, "Stable", api["generation_id"])
    assert dom_members(v.dom_group) == {
        m["member_id"]: {k: m[k] for k in ("group_instance_id", "client_id", "client_host", "assignment")}
        for m in api["members"]
    }
    leader_row = re.search(rf'<tr data-member="{re.escape(api["leader"])}">(.*?)</tr>', v.dom_group, re.S)
    assert leader_row and "(leader)" in leader_row.group(1)
    # The group list: API, CLI and dashboard agree on state, generation and member count.
    listed = {g["group_id"]: (g["state"], g["generation_id"], g["members"]) for g in v.api_groups["groups"]}
    assert listed[GROUP] == ("Stable", api["generation_id"], 2)
    assert {g["group_id"]: (g["state"], g["generation_id"], g["members"]) for g in v.cli_groups["groups"]} == listed
    assert dom_groups(v.dom_groups) == listed


def test_every_view_shows_the_causes_of_each_rebalance(story: Story) -> None:
    assert story.stable is not None and story.empty is not None
    for v in (story.stable, story.empty):
        assert v.cli_rebalances == v.api_rebalances
        assert dom_timeline(v.dom_group) == api_timeline(v.api_rebalances)
    # kafka-python 3.0's leader sometimes sends one more JoinGroup right after its own rebalance: its poll thread
    # still sees the "rejoin needed" flag while the IO thread is finishing the SyncGroup (its debug log shows
    # "need_rejoin: True (from base.rejoin_needed ...)" then "(Re-)joining" before the assignment is applied). A
    # leader's JoinGroup in Stable starts a rebalance in Kafka too (cause leader_rejoin). Such a rebalance moves no
    # member in or out; it is set aside here, every other rebalance is one the story caused.
    history = story.empty.api_rebalances["rebalances"]
    extra = [r for r in history if r["cause"] == "leader_rejoin"]
    for r in extra:
        assert not r["members_in"] and not r["members_out"] and r["member_id"] == r["leader"], r
    # Oldest first: three joins, the SIGKILLed member's eviction, then B and A leaving (the last one empties it).
    story_causes = [(r[0], r[3], r[4], r[5]) for r in reversed(api_timeline(story.empty.api_rebalances))
                    if r[0] != "leader_rejoin"]  # fmt: skip
    assert story_causes == [
        ("new_member", "stable", ["kp-operator"], []),
        ("new_member", "stable", ["aio-member"], []),
        ("new_member", "stable", ["child-member"], []),
        ("session_timeout", "stable", [], ["session_timeout"]),
        ("member_left", "stable", [], ["left"]),
        ("member_left", "empty", [], ["left"]),
    ], [(r["cause"], r["reason"], r["member_id"], r["from_generation"]) for r in history]
    evicted = next(r for r in history if r["cause"] == "session_timeout")
    (out,) = evicted["members_out"]
    assert out["member_id"].startswith("child-member")  # the confluent-kafka child process
    joined = next(r for r in history if r["to_generation"] == evicted["from_generation"])
    # The session timer is re-armed when the generation turns Stable and at every heartbeat after that, so the
    # eviction comes at least a session timeout after the Stable transition (50 ms: the event loop's timer slack).
    assert evicted["started_ms"] - joined["stabilized_ms"] >= CHILD_SESSION_MS - 50
    assert evicted["partitions_moved"] and {m["from_member"] for m in evicted["partitions_moved"]} >= {out["member_id"]}
    # The CLI's table (no --json) names the same causes and outcomes, newest first.
    header, *rows = story.rebalances_table.splitlines()
    cause_at, reason_at, outcome_at, join_at = (header.index(h) for h in ("CAUSE", "REASON", "OUTCOME", "JOIN"))
    table = [(row[cause_at:reason_at].strip(), row[outcome_at:join_at].strip()) for row in rows if row[:1].isdigit()]
    assert table == [(r["cause"], r["outcome"]) for r in history]
    assert rows[-1] == f"({len(history)} of {len(history)})"
    # The Empty group in all three views.
    v = story.empty
    assert v.api_group["state"] == "Empty" and v.api_group["members"] == []
    assert without_heartbeat_age(v.cli_group) == without_heartbeat_age(v.api_group)
    assert dom_header(v.dom_group)[:2] == (GROUP, "Empty") and dom_members(v.dom_group) == {}
    assert dom_groups(v.dom_groups)[GROUP] == ("Empty", v.api_group["generation_id"], 0)


def test_reset_offsets_dry_run_changes_nothing_and_execute_changes_what_a_consumer_reads(story: Story) -> None:
    refused = story.refused_while_stable
    assert refused.returncode == 1 and "HTTP 409" in refused.stderr, refused  # the group had consumers
    committed = story.committed
    assert committed and set(committed) < ALL  # A owned some of the partitions when it committed
    expected_before = {p: committed.get(p) for p in sorted(ALL)}
    planned = {p["partition"]: (p["current_offset"], p["new_offset"]) for p in story.dry_run["partitions"]}
    assert story.dry_run["dry_run"] is True
    assert planned == {p: (committed[p], committed[p] - 7) for p in story.reset_partitions}
    assert story.dry_run_read == expected_before

    assert story.executed["dry_run"] is False
    assert {p["partition"]: p["new_offset"] for p in story.executed["partitions"]} == {
        p: committed[p] - 7 for p in story.reset_partitions
    }
    expected_after = {p: (o - 7 if p in story.reset_partitions else o) for p, o in expected_before.items() if o}
    read_after = {p: o for p, o in story.executed_read.items() if o is not None}
    assert read_after == expected_after
    # The reset is in the commit log as an admin commit, newest first.
    commits = cli_json(story.daemon.http_url, "groups", "commits", GROUP)["commits"]
    admin = [(c["partition"], c["offset"]) for c in commits if c["admin"]]
    assert sorted(admin) == [(p, committed[p] - 7) for p in story.reset_partitions]
    assert all(c["admin"] for c in commits[: len(story.reset_partitions)])


def metric(samples: Samples, name: str, **labels: str) -> float:
    """The sum of ``name``'s samples whose labels include ``labels``."""
    want = set(labels.items())
    return sum(v for (n, lbls), v in samples.items() if n == name and want <= set(lbls))


def test_metrics_parse_and_move_with_the_group(story: Story) -> None:
    assert story.stable is not None and story.empty is not None
    before, stable, empty, after = story.before, story.stable.metrics, story.empty.metrics, story.after_reset

    def moved(a: Samples, b: Samples, name: str, **labels: str) -> float:
        return metric(b, name, **labels) - metric(a, name, **labels)

    rebalances = "kgc_rebalances_total"
    assert moved(before, empty, rebalances, group=GROUP, cause="new_member") == 3
    assert moved(before, empty, rebalances, group=GROUP, cause="session_timeout") == 1
    assert moved(before, stable, rebalances, group=GROUP, cause="member_left") == 0
    assert moved(stable, empty, rebalances, group=GROUP, cause="member_left") == 2
    assert moved(before, empty, "kgc_member_removals_total", group=GROUP, cause="session_timeout") == 1
    assert moved(before, empty, "kgc_member_removals_total", group=GROUP, cause="left") == 2
    assert metric(stable, "kgc_group_members", group=GROUP) == 2
    assert metric(empty, "kgc_group_members", group=GROUP) == 0
    assert metric(stable, "kgc_groups", state="Stable") >= 1
    assert metric(empty, "kgc_groups", state="Empty") >= 1

    # Requests by API: every step of the story is visible.
    for api in ("FindCoordinator", "JoinGroup", "SyncGroup", "Heartbeat"):
        assert moved(before, stable, "kgc_requests_total", api=api) > 0, api
    assert moved(before, stable, "kgc_requests_total", api="LeaveGroup") == 0  # C was killed, it never said goodbye
    assert moved(stable, empty, "kgc_requests_total", api="LeaveGroup") == 2
    assert moved(stable, empty, "kgc_requests_total", api="OffsetCommit") >= 1
    assert moved(empty, after, "kgc_requests_total", api="OffsetFetch") >= 2  # the two committed() readers

    # Offset commits are counted per partition once durable: A's, then the executed reset's (the dry run adds none).
    commits = "kgc_offset_commits_total"
    assert moved(before, stable, commits, group=GROUP) == 0
    assert moved(stable, empty, commits, group=GROUP, kind="member") == len(story.committed)
    assert moved(empty, after, commits, group=GROUP, kind="admin") == len(story.reset_partitions)
    assert moved(empty, after, commits, group=GROUP, kind="member") == 0

    # Storage write batches: rebalances and commits were written in batches of one or more records.
    batches = "kgc_storage_write_batch_records_count"
    assert moved(before, stable, batches) >= 1 and moved(stable, empty, batches) >= 1
    assert moved(empty, after, batches) >= 1  # the executed reset
    records = "kgc_storage_write_batch_records_sum"
    assert moved(stable, empty, records) >= len(story.committed) + 2  # A's offsets, at least one record per rebalance
    assert metric(after, "kgc_storage_write_failures_total") == 0


def test_dashboard_screenshot_of_the_live_group_is_not_blank(story: Story) -> None:
    assert story.screenshot is not None and story.stable is not None
    image = Image.open(story.screenshot).convert("RGB")
    assert image.size == (1280, 1000)
    counted = image.getcolors(maxcolors=1 << 20)
    assert counted is not None
    colours: list[tuple[int, int, int]] = [c for _, c in counted]  # type: ignore[misc]
    assert len(colours) > 50  # text, badges, tables, timeline: far from a blank page
    # the timeline's join-phase bars (#3b7be0) are drawn
    assert any(abs(r - 0x3B) < 12 and abs(g - 0x7B) < 12 and abs(b - 0xE0) < 12 for r, g, b in colours)
    # and the page it shows is the live group: its members and its timeline
    assert len(dom_members(story.stable.dom_group)) == 2
    assert len(dom_timeline(story.stable.dom_group)) == story.stable.api_rebalances["total"] >= 4
