"""The 115-byte JoinGroup of issue #15 against the real daemon: the group's real consumers stay in service.

A raw-socket JoinGroup v1 names the group's protocol twice and its sender disconnects while it is parked. Before
the fix the join phase raised at its end (no protocol was supported by "every" member: the duplicate was counted
as a second supporter) and the group stayed in PreparingRebalance until a restart: its consumers were told
INCONSISTENT_GROUP_PROTOCOL on every rejoin and DELETE over HTTP answered 409. The issue's frame named ``range``;
these kafka-python consumers use ``roundrobin``, so the frame names that (the name the group's members share).
"""

from __future__ import annotations

import json
import socket
import struct
import urllib.error
import urllib.request
from typing import Any

import pytest
from kafka.structs import OffsetAndMetadata

from .conftest import Daemon
from .helpers import KafkaPythonMember, wait_for

pytestmark = pytest.mark.e2e

TOPIC = "e2e6"  # 6 partitions
GROUP = "hostile-join"


def _str(value: str) -> bytes:
    raw = value.encode()
    return struct.pack(">h", len(raw)) + raw


def duplicate_protocol_join(group: str, protocol: str) -> bytes:
    """JoinGroup v1 (no member id, so v<4 adds the member at once), the protocol listed twice."""
    metadata = b"\x00\x00\x00\x00\x00\x01" + _str(TOPIC) + b"\xff\xff\xff\xff"  # a ConsumerProtocol subscription
    entry = _str(protocol) + struct.pack(">i", len(metadata)) + metadata
    body = (
        _str(group)
        + struct.pack(">ii", 6_000, 6_000)  # session, rebalance timeout
        + _str("")  # member id
        + _str("consumer")
        + struct.pack(">i", 2)
        + entry
        + entry
    )
    header = struct.pack(">hhi", 11, 1, 7) + _str("evil")
    return struct.pack(">i", len(header) + len(body)) + header + body


class CommittingMember(KafkaPythonMember):
    """A kafka-python consumer that commits an offset for each partition it owns, every poll."""

    def __init__(self, *args: Any, **kw: Any) -> None:
        super().__init__(*args, **kw)
        self.commits = 0
        self.commit_error: BaseException | None = None

    def _after_poll(self) -> None:
        owned = self.consumer.assignment()
        if not owned:
            return
        try:
            self.consumer.commit({tp: OffsetAndMetadata(self.commits, "", -1) for tp in owned})
        except Exception as exc:  # during a rebalance; the test looks at the count going up afterwards
            self.commit_error = exc
        else:
            self.commits += 1


def _group(daemon: Daemon) -> dict[str, Any]:
    with urllib.request.urlopen(f"{daemon.http_url}/v1/groups/{GROUP}", timeout=10) as response:
        return json.loads(response.read())  # type: ignore[no-any-return]


def _settled(daemon: Daemon, members: list[CommittingMember]) -> bool:
    owned = [m.assignment for m in members]
    all_assigned = all(owned) and frozenset().union(*owned) == frozenset(range(6)) and sum(map(len, owned)) == 6
    return all_assigned and _group(daemon)["state"] == "Stable" and len(_group(daemon)["members"]) == len(members)


def test_duplicate_protocol_join_does_not_wedge_the_group(daemon: Daemon) -> None:
    members = [CommittingMember(daemon.bootstrap, GROUP, TOPIC) for _ in range(2)]
    for m in members:
        m.start()
    try:
        wait_for(lambda: _settled(daemon, members), 30, "two consumers sharing all six partitions")
        generation = _group(daemon)["generation_id"]

        frame = duplicate_protocol_join(GROUP, "roundrobin")
        with socket.create_connection(("127.0.0.1", daemon.port), timeout=5) as sock:
            sock.sendall(frame)
            wait_for(lambda: _group(daemon)["state"] != "Stable", 10, "the hostile member joining")
        # ... and it has gone: its JoinGroup stays parked with nobody to answer.

        wait_for(
            lambda: _group(daemon)["generation_id"] > generation and _settled(daemon, members),
            45,
            "the real consumers Stable again with every partition",
        )
        assert all(m.error is None for m in members), [m.error for m in members]
        before = [m.commits for m in members]
        wait_for(lambda: all(m.commits > b + 3 for m, b in zip(members, before, strict=True)), 20, "commits going on")
    finally:
        for m in members:
            m.close()

    def delete() -> int:
        request = urllib.request.Request(f"{daemon.http_url}/v1/groups/{GROUP}", method="DELETE")
        try:
            with urllib.request.urlopen(request, timeout=10) as response:
                return response.status
        except urllib.error.HTTPError as exc:
            return exc.code

    wait_for(lambda: delete() == 200, 20, "DELETE of the group once its consumers left")
    assert not [line for line in daemon.log_text().splitlines() if "level=error" in line]
