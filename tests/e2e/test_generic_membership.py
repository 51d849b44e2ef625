"""kafka-python's BaseCoordinator as a generic membership client (protocol type other than "consumer", no topics):
leader election among three members and re-election when the leader leaves.

kafka-python 3.0: the client is ``kafka.net.compat.KafkaNetClient`` (its IO loop runs on its own thread once
started) and the join hooks are async (``_on_join_complete_async``).
"""

from __future__ import annotations

import threading
import time
from typing import Any

import pytest
from kafka import KafkaAdminClient
from kafka.coordinator.base import BaseCoordinator
from kafka.net.compat import KafkaNetClient

from tests.server.wire import WireClient, build_request

from .conftest import Daemon
from .helpers import wait_for

pytestmark = pytest.mark.e2e

PROTOCOL_TYPE = "kgc-leader-election"


class ElectionMember(BaseCoordinator):
    """Every member gets the leader's id as its assignment."""

    def __init__(self, client: Any, name: str, **config: Any) -> None:
        super().__init__(client, **config)
        self.name = name
        self.joined: tuple[int, str, str] | None = None  # (generation, own member id, leader member id)

    def protocol_type(self) -> str:
        return PROTOCOL_TYPE

    def group_protocols(self) -> list[tuple[str, bytes]]:
        return [("leader", self.name.encode())]

    def _perform_assignment(self, leader_id: str, protocol: str, members: list[Any]) -> dict[str, bytes]:
        return {m.member_id: leader_id.encode() for m in members}

    async def _on_join_complete_async(
        self, generation: int, member_id: str, protocol: str, member_assignment_bytes: bytes
    ) -> None:
        self.joined = (generation, member_id, bytes(member_assignment_bytes).decode())


class Runner:
    def __init__(self, bootstrap: str, group: str, name: str) -> None:
        self.client = KafkaNetClient(bootstrap_servers=bootstrap, client_id=name)
        self.client._net.start()
        self.client._manager.bootstrap(10_000)
        self.member = ElectionMember(
            self.client,
            name,
            group_id=group,
            session_timeout_ms=6000,
            heartbeat_interval_ms=300,
            api_version=self.client._manager.broker_version,
        )
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name=name, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        while not self._stop.is_set():
            self.member.ensure_active_group(timeout_ms=200)
            time.sleep(0.02)

    def leave(self) -> None:
        self._stop.set()
        self._thread.join(10)
        self.member.close()
        self.client.close()


def _agreed(runners: list[Runner]) -> tuple[int, str] | None:
    """(generation, leader) when every runner joined the same generation with the same leader, which is one of them."""
    joined = [r.member.joined for r in runners]
    if any(j is None for j in joined):
        return None
    generations = {j[0] for j in joined if j}
    leaders = {j[2] for j in joined if j}
    ids = {j[1] for j in joined if j}
    if len(generations) == 1 and len(leaders) == 1 and leaders <= ids:
        return generations.pop(), leaders.pop()
    return None


def _describe(daemon: Daemon, group: str) -> Any:
    """DescribeGroups over the raw wire: both admin clients refuse groups whose protocol type is not "consumer"
    (kafka-python decodes every member's metadata as a consumer subscription, librdkafka rejects the group)."""
    client = WireClient("127.0.0.1", daemon.port)
    try:
        [described] = client.call(build_request(15, 5, groups=(group,), include_authorized_operations=False)).groups
        return described
    finally:
        client.close()


def test_leader_election_and_reelection(daemon: Daemon) -> None:
    group = "generic-membership"
    runners = [Runner(daemon.bootstrap, group, f"member-{i}") for i in range(3)]
    admin = KafkaAdminClient(bootstrap_servers=daemon.bootstrap)
    try:
        generation, leader = wait_for(lambda: _agreed(runners), 20, "three members to agree on a leader")
        listed = {g["group_id"]: g for g in admin.list_groups()}
        assert (listed[group]["protocol_type"], listed[group]["group_state"]) == (PROTOCOL_TYPE, "Stable")
        described = _describe(daemon, group)
        assert (described.protocol_type, described.protocol_data) == (PROTOCOL_TYPE, "leader")
        assert sorted(m.member_metadata for m in described.members) == [b"member-0", b"member-1", b"member-2"]

        [leader_runner] = [r for r in runners if r.member.joined and r.member.joined[1] == leader]
        leader_runner.leave()
        runners.remove(leader_runner)
        _, new_leader = wait_for(
            lambda: (a := _agreed(runners)) and a[0] > generation and a, 15, "the survivors to elect a new leader"
        )
        assert new_leader != leader
        assert new_leader in {r.member.joined[1] for r in runners if r.member.joined}
        assert len(_describe(daemon, group).members) == 2
    finally:
        for r in runners:
            r.leave()
        admin.close()
