"""Acceptance 2: a Stable group of three kafka-python consumers survives a daemon restart (SIGTERM, start again on the
same database and port) without a rebalance: the members reconnect and heartbeat in the same generation, keep their
partitions, and the rebalance history gains nothing."""

from __future__ import annotations

import time
from typing import Any

import pytest

from tests.e2e.daemon import Daemon
from tests.e2e.helpers import KafkaPythonMember, wait_for

from .clients import http_get, ready

pytestmark = pytest.mark.e2e

GROUP = "restart-three"
TOPIC = "dur6"
SESSION_TIMEOUT_S = 6.0  # KafkaPythonMember's session.timeout.ms


def _group(daemon: Daemon) -> dict[str, Any]:
    return http_get(daemon.http_url, f"/v1/groups/{GROUP}")  # type: ignore[no-any-return]


def _stable_with(daemon: Daemon, members: list[KafkaPythonMember]) -> dict[str, Any] | None:
    g = _group(daemon)
    owned = [m.assignment for m in members]
    if g["state"] != "Stable" or len(g["members"]) != 3 or any(len(a) != 2 for a in owned):
        return None
    if frozenset().union(*owned) != frozenset(range(6)) or {m.generation() for m in members} != {g["generation_id"]}:
        return None
    return g


def _described(daemon: Daemon) -> tuple[str, dict[str, list[int]]]:
    """DescribeGroups through kafka-python's admin client: state, and partitions per member id."""
    from kafka import KafkaAdminClient

    admin = KafkaAdminClient(bootstrap_servers=daemon.bootstrap, client_id="durability-admin")
    try:
        g = admin.describe_groups([GROUP])[GROUP]
    finally:
        admin.close()
    owned = {
        m["member_id"]: sorted(p for a in m["member_assignment"]["assigned_partitions"] for p in a["partitions"])
        for m in g["members"]
    }
    return g["group_state"], owned


def test_stable_group_survives_restart_without_rebalance(daemon: Daemon) -> None:
    members = [KafkaPythonMember(daemon.bootstrap, GROUP, TOPIC) for _ in range(3)]
    for m in members:
        m.start()
    try:
        before = wait_for(lambda: _stable_with(daemon, members), 60, "a Stable group of three owning 6 partitions")
        assert before is not None
        generation = before["generation_id"]
        member_ids = {m["member_id"] for m in before["members"]}
        server_assignment = {m["member_id"]: m["assignment"] for m in before["members"]}
        owned = [m.assignment for m in members]
        history = http_get(daemon.http_url, f"/v1/groups/{GROUP}/rebalances")
        assert history["total"] >= 1
        described = _described(daemon)
        assert described[0] == "Stable" and set(described[1]) == member_ids

        assert daemon.stop() == 0
        daemon.start()
        restarted = time.monotonic()
        wait_for(lambda: ready(daemon.http_url), 30, "restarted daemon ready")

        def all_heartbeating() -> bool:
            g = _group(daemon)
            return all(m["since_last_heartbeat_ms"] < 1000 for m in g["members"]) and len(g["members"]) == 3

        # Every member heartbeats to the new process, and keeps doing so past a whole session timeout from the
        # restart (a member that had not reconnected would have been evicted by then and the group would rebalance).
        wait_for(all_heartbeating, 30, "the three members heartbeating to the restarted daemon")
        wait_for(lambda: time.monotonic() - restarted > SESSION_TIMEOUT_S + 1, 30, "a session timeout to pass")
        wait_for(all_heartbeating, 10, "the three members still heartbeating")

        after = _group(daemon)
        assert after["state"] == "Stable"
        assert after["generation_id"] == generation
        assert {m["member_id"] for m in after["members"]} == member_ids
        assert {m["member_id"]: m["assignment"] for m in after["members"]} == server_assignment
        assert [m.generation() for m in members] == [generation] * 3
        assert [m.assignment for m in members] == owned
        assert _described(daemon) == described  # DescribeGroups: same state, members and assignments
        history_after = http_get(daemon.http_url, f"/v1/groups/{GROUP}/rebalances")
        assert history_after["total"] == history["total"], history_after["rebalances"][:2]
    finally:
        for m in members:
            m.close()
