"""The load generator's hand-written JoinGroup v9 and SyncGroup v5 request frames are the bytes kio encodes from
the same fields, and the daemon's codec reads them back as those fields."""

from __future__ import annotations

from datetime import timedelta

import pytest

from benchmarks import client as c
from protocol.codec import decode_request

MEMBER = "kgc-bench-0071e9be-475a-4d72-8c84-92990052d676"


def _kio_join(group_id: str, member_id: str, session_ms: int, rebalance_ms: int) -> bytes:
    return c.frame(
        11,
        9,
        {
            "group_id": group_id,
            "session_timeout": timedelta(milliseconds=session_ms),
            "rebalance_timeout": timedelta(milliseconds=rebalance_ms),
            "member_id": member_id,
            "group_instance_id": None,
            "protocol_type": "consumer",
            "protocols": [{"name": "range", "metadata": c.SUBSCRIPTION}],
            "reason": None,
        },
    )


def _kio_sync(group_id: str, generation: int, member_id: str, assignments: list[str]) -> bytes:
    return c.frame(
        14,
        5,
        {
            "group_id": group_id,
            "generation_id": generation,
            "member_id": member_id,
            "group_instance_id": None,
            "protocol_type": "consumer",
            "protocol_name": "range",
            "assignments": [{"member_id": m, "assignment": c.ASSIGNMENT} for m in assignments],
        },
    )


@pytest.mark.parametrize(
    ("group_id", "member_id", "session_ms", "rebalance_ms"),
    [("rebalance-1000", "", 300_000, 30_000), ("g", MEMBER, 10, 2**31 - 1), ("ü" * 100, "m" * 200, 6_000, 0)],
)
def test_join_frame_is_kios(group_id: str, member_id: str, session_ms: int, rebalance_ms: int) -> None:
    frame = c.join_frame(group_id, member_id, session_ms, rebalance_ms)
    assert frame == _kio_join(group_id, member_id, session_ms, rebalance_ms)
    header, body = decode_request(frame[4:])
    assert (header.api_key, header.api_version, header.client_id) == (11, 9, c.CLIENT_ID)
    assert (body.group_id, body.member_id) == (group_id, member_id)
    assert [(p.name, p.metadata) for p in body.protocols] == [("range", c.SUBSCRIPTION)]


@pytest.mark.parametrize("members", [0, 1, 3, 130, 1000])  # 130: the array length takes two varint bytes
@pytest.mark.parametrize("generation", [1, -1, 2**31 - 1])
def test_sync_frame_is_kios(members: int, generation: int) -> None:
    assignments = [f"{MEMBER}-{i}" for i in range(members)]
    frame = c.sync_frame("rebalance-1000", generation, MEMBER, assignments)
    assert frame == _kio_sync("rebalance-1000", generation, MEMBER, assignments)
    _, body = decode_request(frame[4:])
    assert body.generation_id == generation
    assert [(a.member_id, a.assignment) for a in body.assignments] == [(m, c.ASSIGNMENT) for m in assignments]
