"""The adapters on the versions Kafka 4 dropped (OffsetCommit v0-1, OffsetFetch v0, ListOffsets v0), with Kafka
3.9's semantics, and OffsetFetch of everything (null topics) encoded in slices that give the loop back.

Against the real core (manual clock and timer, in-memory log), as tests/api/test_adapters.py.
"""

from __future__ import annotations

import asyncio
from datetime import timedelta
from typing import Any

import pytest

from coordinator import messages as m
from protocol.codec import decode_response_frame, encode_response, request_class
from protocol.errors import ErrorCode
from protocol.headers import RequestHeader
from servers.kafka import HANDLERS, RequestContext
from servers.kafka import offsets as offsets_api
from servers.kafka.build import build

from .conftest import Harness


def call(h: Harness, api_key: int, version: int, **fields: Any) -> Any:
    body = build(request_class(api_key, version), fields)  # protocol.legacy's class where kio has none
    return HANDLERS[api_key](h.services, RequestContext(api_key, version, 1, "old-client", "/10.0.0.2"), body)


async def respond(h: Harness, api_key: int, version: int, **fields: Any) -> Any:
    result = call(h, api_key, version, **fields)
    if hasattr(result, "__await__"):
        result = await result
    if isinstance(result, bytes):
        correlation_id, result = decode_response_frame(api_key, version, result)
        assert correlation_id == 1
    encode_response(RequestHeader(api_key, version, 1, "old-client"), result)
    return result


def commit_v1(group: str, generation: int, member: str, partitions: list[tuple[int, int, int]]) -> dict[str, Any]:
    return {
        "group_id": group,
        "generation_id_or_member_epoch": generation,
        "member_id": member,
        "topics": [
            {
                "name": "t",
                "partitions": [
                    {"partition_index": p, "committed_offset": o, "commit_timestamp": ts, "committed_metadata": "md"}
                    for p, o, ts in partitions
                ],
            }
        ],
    }


def errors(response: Any) -> list[tuple[str, int, ErrorCode]]:
    return [(t.name, p.partition_index, p.error_code) for t in response.topics for p in t.partitions]


# --------------------------------------------------------------------------------------------------- OffsetCommit


async def test_commit_v1_records_the_clients_commit_timestamp_or_now(h: Harness) -> None:
    response = await respond(h, 8, 1, **commit_v1("sarama", -1, "", [(0, 10, 1_600_000_000_000), (1, 11, -1)]))
    assert errors(response) == [("t", 0, ErrorCode.none), ("t", 1, ErrorCode.none)]
    committed = h.coordinator.offsets.committed("sarama")
    assert committed[("t", 0)].offset == 10 and committed[("t", 0)].commit_timestamp_ms == 1_600_000_000_000
    assert committed[("t", 1)].offset == 11 and committed[("t", 1)].commit_timestamp_ms == h.clock.now_ms()
    assert committed[("t", 0)].metadata == "md"


async def test_commit_v0_is_a_commit_outside_group_management(h: Harness) -> None:
    fields = {
        "group_id": "zk-era",
        "topics": [
            {"name": "t", "partitions": [{"partition_index": 2, "committed_offset": 5, "committed_metadata": None}]}
        ],
    }
    response = await respond(h, 8, 0, **fields)
    assert errors(response) == [("t", 2, ErrorCode.none)]
    assert h.coordinator.offsets.committed("zk-era")[("t", 2)].offset == 5
    # ... and an unknown partition is refused before the core, as in every version
    fields["topics"] = [
        {"name": "nope", "partitions": [{"partition_index": 0, "committed_offset": 1, "committed_metadata": ""}]}
    ]
    assert errors(await respond(h, 8, 0, **fields)) == [("nope", 0, ErrorCode.unknown_topic_or_partition)]


async def test_commit_v0_cannot_overwrite_the_offsets_of_a_group_with_members(h: Harness) -> None:
    joined = call(
        h,
        11,
        3,
        group_id="live",
        session_timeout=timedelta(seconds=10),
        rebalance_timeout=timedelta(seconds=10),
        member_id="",
        protocol_type="consumer",
        protocols=[{"name": "range", "metadata": b""}],
    )
    h.timer.advance(0)
    _, join = decode_response_frame(11, 3, await joined)
    assert join.error_code == ErrorCode.none
    fields = {
        "group_id": "live",
        "topics": [
            {"name": "t", "partitions": [{"partition_index": 0, "committed_offset": 1, "committed_metadata": ""}]}
        ],
    }
    assert errors(await respond(h, 8, 0, **fields)) == [("t", 0, ErrorCode.unknown_member_id)]
    # a v1 commit of that member is accepted (after its SyncGroup, in CompletingRebalance it would not be)
    sync = call(h, 14, 0, group_id="live", generation_id=join.generation_id, member_id=join.member_id, assignments=[])
    if hasattr(sync, "__await__"):
        sync = await sync
    assert decode_response_frame(14, 0, sync)[1].error_code == ErrorCode.none
    response = await respond(h, 8, 1, **commit_v1("live", join.generation_id, join.member_id, [(0, 3, -1)]))
    assert errors(response) == [("t", 0, ErrorCode.none)]


# ---------------------------------------------------------------------------------------------------- OffsetFetch


async def test_fetch_v0_reads_what_any_version_committed(h: Harness) -> None:
    await respond(h, 8, 1, **commit_v1("g", -1, "", [(0, 42, -1)]))
    response = await respond(h, 9, 0, group_id="g", topics=[{"name": "t", "partition_indexes": [0, 1]}])
    assert [
        (p.partition_index, p.committed_offset, p.metadata, p.error_code) for p in response.topics[0].partitions
    ] == [
        (0, 42, "md", ErrorCode.none),
        (1, -1, "", ErrorCode.none),
    ]


# ---------------------------------------------------------------------------------------------------- ListOffsets


async def test_list_offsets_v0_on_an_empty_log(h: Harness) -> None:
    partitions = [
        {"partition_index": 0, "timestamp": -1, "max_num_offsets": 1},  # latest
        {"partition_index": 1, "timestamp": -2, "max_num_offsets": 5},  # earliest
        {"partition_index": 2, "timestamp": -1, "max_num_offsets": 0},  # asked for none
        {"partition_index": 0, "timestamp": 1_700_000_000_000, "max_num_offsets": 1},  # lookup: nothing there
        {"partition_index": 1, "timestamp": -3, "max_num_offsets": 1},  # max timestamp: v1+ only
        {"partition_index": 7, "timestamp": -1, "max_num_offsets": 1},  # no such partition
    ]
    response = await respond(h, 2, 0, replica_id=-1, topics=[{"name": "t", "partitions": partitions}])
    got = [(p.partition_index, p.error_code, p.old_style_offsets) for p in response.topics[0].partitions]
    assert got == [
        (0, ErrorCode.none, (0,)),
        (1, ErrorCode.none, (0,)),
        (2, ErrorCode.none, ()),
        (0, ErrorCode.none, ()),
        (1, ErrorCode.unsupported_version, ()),
        (7, ErrorCode.unknown_topic_or_partition, ()),
    ]
    # consistent with v1+: the same latest/earliest offset 0, and "not found" for the lookup
    v1 = await respond(
        h,
        2,
        1,
        replica_id=-1,
        topics=[
            {
                "name": "t",
                "partitions": [
                    {"partition_index": 0, "timestamp": -1},
                    {"partition_index": 0, "timestamp": 1_700_000_000_000},
                ],
            }
        ],
    )
    assert [p.offset for p in v1.topics[0].partitions] == [0, -1]


# ------------------------------------------------------------------------------------- OffsetFetch of everything


def seed(h: Harness, group: str, n_topics: int, per_topic: int) -> None:
    for i in range(n_topics):
        h.topics.add(f"topic-{i}", per_topic)
        metadata: list[str | None] = ["", "x", None]
        parts = [
            m.OffsetCommitPartition(f"topic-{i}", p, 100 * i + p, leader_epoch=p % 3 - 1, metadata=metadata[p % 3])
            for p in range(per_topic)
        ]
        assert h.coordinator.commit_offsets(m.OffsetCommitRequest(group, -1, "", None, parts, 7)).done


def all_offsets_fields(version: int, groups: list[tuple[str, Any]]) -> dict[str, Any]:
    if version >= 8:
        return {"groups": [{"group_id": g, "topics": t} for g, t in groups], "require_stable": False}
    return {"group_id": groups[0][0], "topics": groups[0][1], "require_stable": False}


async def frame_of(h: Harness, version: int, fields: dict[str, Any]) -> tuple[bytes, int]:
    """The response frame, and how many times the handler gave the loop back while building it."""
    result = call(h, 9, version, **fields)
    if not hasattr(result, "__await__"):
        return encode_response(RequestHeader(9, version, 1, "old-client"), result), 0
    task = asyncio.ensure_future(result)
    turns = 0
    while not task.done():
        turns += 1
        await asyncio.sleep(0)
    return task.result(), turns


@pytest.mark.parametrize("version", range(10))
async def test_everything_in_slices_is_the_same_bytes_as_kio(h: Harness, version: int, monkeypatch: Any) -> None:
    """Null topics (v2+), or for v0-1, which have no null topics, a long explicit list (the same sliced path)."""
    seed(h, "big", 3, 5)
    seed(h, "other", 1, 2)
    explicit = [{"name": f"topic-{i}", "partition_indexes": list(range(5))} for i in range(3)]
    groups: list[tuple[str, Any]] = [("big", None if version >= 2 else explicit)]
    if version >= 8:
        groups += [("absent", None), ("other", [{"name": "topic-0", "partition_indexes": [1, 0, 9]}])]
    fields = all_offsets_fields(version, groups)
    whole, turns = await frame_of(h, version, fields)
    assert turns == 0  # small: built at once through kio, as before
    monkeypatch.setattr(offsets_api, "ALL_OFFSETS_SLICE", 4)
    sliced, turns = await frame_of(h, version, fields)
    assert turns >= 4
    assert sliced == whole
    _, decoded = decode_response_frame(9, version, sliced)
    topics = decoded.groups[0].topics if version >= 8 else decoded.topics
    assert [t.name for t in topics] == ["topic-0", "topic-1", "topic-2"]
    assert [(p.partition_index, p.committed_offset) for p in topics[2].partitions] == [(i, 200 + i) for i in range(5)]


async def test_slices_of_one_partition(h: Harness, monkeypatch: Any) -> None:
    """Slices of one partition: the top-level error field (v2-7) still follows the last topic."""
    seed(h, "big", 2, 3)
    monkeypatch.setattr(offsets_api, "ALL_OFFSETS_SLICE", 1)
    sliced, _ = await frame_of(h, 7, all_offsets_fields(7, [("big", None)]))
    _, decoded = decode_response_frame(9, 7, sliced)
    assert decoded.error_code == ErrorCode.none and len(decoded.topics) == 2


async def test_a_fetch_of_40000_offsets_gives_the_loop_back(h: Harness) -> None:
    seed(h, "huge", 20, 2_000)
    sliced, turns = await frame_of(h, 8, all_offsets_fields(8, [("huge", None)]))
    assert turns >= 40_000 // offsets_api.ALL_OFFSETS_SLICE
    _, decoded = decode_response_frame(9, 8, sliced)
    assert sum(len(t.partitions) for t in decoded.groups[0].topics) == 40_000
