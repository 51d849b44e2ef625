"""Acceptance 3: the recorded rebalance history of a group driven through join, crash, static restart, leader rejoin
and leave (with a KIP-800 reason) names exactly those causes, generations and members - read through the operator
HTTP API and straight from the database through storage/queries.py, which must agree.

Cast, all subscribed to ``durh-a`` (4 partitions): L an aiokafka consumer (first, so the leader; short metadata max
age), B a static kafka-python consumer (``group.instance.id``), A a dynamic kafka-python consumer, C a confluent-kafka
consumer in a child process. The leader rejoin: ``durh-a`` grows to 6 partitions (POST /v1/topics); L's metadata no
longer matches the snapshot it assigned from and it rejoins in Stable. (kafka-python 3.0.12 as the rejoining leader,
or as a pattern subscriber seeing a new topic, intermittently never completes the rejoin - its SyncGroup response
arrives but the join never finishes, heartbeats stop - a client bug, so the leader here is aiokafka.)
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from storage import create_engine
from storage.queries import StorageQueries
from tests.e2e.daemon import ROOT, Daemon
from tests.e2e.helpers import AiokafkaMember, wait_for
from tests.storage.conftest import _run_in_thread

from .clients import KpMember, http_get, http_post, ready
from .conftest import Backend, make_daemon

pytestmark = pytest.mark.e2e

GROUP = "history-cast"
REASON = "durability test: consumer A shutting down"
CHILD_SESSION_TIMEOUT_MS = 2000


def _group(d: Daemon) -> dict[str, Any]:
    return http_get(d.http_url, f"/v1/groups/{GROUP}")  # type: ignore[no-any-return]


def _stable(d: Daemon, member_ids: set[str] | int, generation: int | None = None) -> dict[str, Any] | None:
    g = _group(d)
    ids = {m["member_id"] for m in g["members"]}
    if g["state"] != "Stable" or (ids != member_ids if isinstance(member_ids, set) else len(ids) != member_ids):
        return None
    if generation is not None and g["generation_id"] != generation:
        return None
    return g


async def _db_history(url: str) -> list[Any]:
    engine = create_engine(url)
    try:
        views, total = await StorageQueries(engine).rebalance_history(GROUP, limit=100)
        assert total == len(views)
        return list(reversed(views))
    finally:
        await engine.dispose()


def test_history_names_causes_generations_and_members(tmp_path: Path, backend: Backend) -> None:
    d = make_daemon(tmp_path, backend, topics=("durh-a:4",)).start()
    members: list[KpMember | AiokafkaMember] = []
    child: subprocess.Popen[bytes] | None = None

    def ids() -> set[str]:
        return {m["member_id"] for m in _group(d)["members"]}

    try:
        # join: L, the static B, A, then C in a child process
        lead = AiokafkaMember(d.bootstrap, GROUP, "durh-a", metadata_max_age_ms=300)
        lead.start()
        members.append(lead)
        wait_for(lambda: lead.assignment and _stable(d, 1, 1), 30, "L alone in generation 1")
        (l_id,) = ids()
        b = KpMember(d.bootstrap, GROUP, topics=["durh-a"], group_instance_id="static-b").start()
        members.append(b)
        wait_for(lambda: b.assignment and _stable(d, {l_id, b.member_id}, 2), 30, "L and B in generation 2")
        b_first = b.member_id
        a = KpMember(d.bootstrap, GROUP, topics=["durh-a"]).start()
        members.append(a)
        wait_for(lambda: a.assignment and _stable(d, {l_id, b_first, a.member_id}, 3), 30, "L, B, A in generation 3")
        a_id = a.member_id
        child = subprocess.Popen(
            [sys.executable, str(ROOT / "tests/e2e/child_member.py"), d.bootstrap, GROUP, "durh-a",
             str(CHILD_SESSION_TIMEOUT_MS)],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
        )  # fmt: skip
        wait_for(lambda: _stable(d, 4, 4), 30, "L, B, A and C in generation 4")
        (c_id,) = ids() - {l_id, b_first, a_id}

        # crash: SIGKILL the child; its session expires
        child.kill()
        child.wait()
        wait_for(lambda: _stable(d, {l_id, b_first, a_id}, 5), 30, "C expired: generation 5")

        # static restart: B closes without leaving and comes back with the same instance id -> no rebalance
        b.close()
        members.remove(b)
        b = KpMember(d.bootstrap, GROUP, topics=["durh-a"], group_instance_id="static-b").start()
        members.append(b)
        wait_for(lambda: b.assignment and b.member_id not in ("", b_first), 30, "B back with a new member id")
        wait_for(lambda: _stable(d, {l_id, b.member_id, a_id}, 5), 30, "B replaced within generation 5")
        b_second = b.member_id

        # leader rejoin: the topic grows; L (the leader) sees new partitions and rejoins
        http_post(d.http_url, "/v1/topics", {"name": "durh-a", "partitions": 6})
        wait_for(lambda: _stable(d, {l_id, b_second, a_id}, 6), 30, "generation 6")
        wait_for(lambda: len(lead.assignment) + len(b.assignment) + len(a.assignment) == 6, 30, "6 partitions owned")

        # leave with a KIP-800 reason
        a.close(leave_reason=REASON)
        members.remove(a)
        wait_for(lambda: _stable(d, {l_id, b_second}, 7), 30, "L and B in generation 7")

        http_views = list(reversed(http_get(d.http_url, f"/v1/groups/{GROUP}/rebalances?limit=100")["rebalances"]))
        db_url = backend.url or f"sqlite+aiosqlite:///{tmp_path / 'data' / 'coordinator.db'}"
        db_views = _run_in_thread(_db_history(db_url))
    finally:
        if child is not None and child.poll() is None:
            child.kill()
            child.wait()
        for m in members:
            m.close()
        d.stop()

    expected = [
        # cause, member, instance, from -> to generation, members of the new generation
        ("new_member", l_id, None, 0, 1, {l_id}),
        ("new_member", b_first, "static-b", 1, 2, {l_id, b_first}),
        ("new_member", a_id, None, 2, 3, {l_id, b_first, a_id}),
        ("new_member", c_id, None, 3, 4, {l_id, b_first, a_id, c_id}),
        ("session_timeout", c_id, None, 4, 5, {l_id, b_first, a_id}),
        ("leader_rejoin", l_id, None, 5, 6, {l_id, b_second, a_id}),
        ("member_left", a_id, None, 6, 7, {l_id, b_second}),
    ]
    got_http = [
        (v["cause"], v["member_id"], v["group_instance_id"], v["from_generation"], v["to_generation"],
         set(v["members"]), v["reason"])
        for v in http_views
    ]  # fmt: skip
    # On a mismatch, show what the daemon said about the group's rebalances and any write it could not make.
    story = [ln for ln in d.log_text().splitlines() if GROUP in ln or "level=warning" in ln or "level=error" in ln]
    assert [g[:6] for g in got_http] == expected, (got_http, "\n".join(story[-80:]))
    assert [g[6] for g in got_http] == [None] * 6 + [REASON]  # kafka-python sent LeaveGroup v5 with the reason
    assert [v["outcome"] for v in http_views] == ["stable"] * 7
    assert [v["leader"] for v in http_views] == [l_id] * 7

    # Who joined and left, and why, per rebalance. The static replacement has no rebalance of its own, and it is no
    # part of the next one (the leader rejoin): it is an event (GET /events).
    outs = [{(o["member_id"], o["cause"], o["reason"]) for o in v["members_out"]} for v in http_views]
    assert outs == [set(), set(), set(), set(), {(c_id, "session_timeout", None)}, set(),
                    {(a_id, "left", REASON)}]  # fmt: skip
    ins = [{(i["member_id"], i["group_instance_id"]) for i in v["members_in"]} for v in http_views]
    assert ins == [{(l_id, None)}, {(b_first, "static-b")}, {(a_id, None)}, {(c_id, None)}, set(), set(), set()]

    got_db = [
        (v.cause, v.member_id, v.group_instance_id, v.from_generation, v.to_generation, set(v.members), v.reason)
        for v in db_views
    ]
    assert got_db == got_http


def test_a_static_replacement_is_still_an_event_after_a_restart(tmp_path: Path, backend: Backend) -> None:
    """The replacement is folded from the stored records: after a restart /events still lists it (source
    history), and it is in no rebalance's members in or out."""
    group = "history-replaced"
    d = make_daemon(tmp_path, backend, topics=("durh-r:2",)).start()
    members: list[KpMember] = []
    try:
        first = KpMember(d.bootstrap, group, topics=["durh-r"], group_instance_id="static-r").start()
        members.append(first)
        wait_for(lambda: first.assignment and first.member_id, 30, "the static member assigned")
        old = first.member_id
        first.close()
        members.remove(first)
        second = KpMember(d.bootstrap, group, topics=["durh-r"], group_instance_id="static-r").start()
        members.append(second)
        wait_for(lambda: second.assignment and second.member_id not in ("", old), 30, "a new instance")
        new = second.member_id
        before = http_get(d.http_url, f"/v1/groups/{group}/events")
        for m in members:
            m.close()
        members.clear()
        assert d.stop() == 0
        d.start()
        wait_for(lambda: ready(d.http_url), 30, "restarted daemon ready")
        after = http_get(d.http_url, f"/v1/groups/{group}/events")
        rebalances = http_get(d.http_url, f"/v1/groups/{group}/rebalances")["rebalances"]
    finally:
        for m in members:
            m.close()
        d.stop()
    assert after == before, (before, after)
    (event,) = after["events"]
    assert (event["kind"], event["source"], event["group_instance_id"]) == ("static_replacement", "history", "static-r")
    assert (event["previous_member_id"], event["member_id"]) == (old, new)
    assert new not in {i["member_id"] for r in rebalances for i in r["members_in"]}
    assert old not in {o["member_id"] for r in rebalances for o in r["members_out"]}
