"""ListOffsets (2, v0-7) and Fetch (4-12): every partition is empty and stays empty.

The coordinator stores no messages, but consumers fetch anyway. ListOffsets answers offset 0 for earliest (-2),
latest (-1) and the other special timestamps, and "not found" (offset -1) for a timestamp lookup, as Kafka does on an
empty log. Fetch is held for ``max_wait`` (capped) before answering empty - answered at once, clients would spin -
with ``records`` as empty bytes (never null: kafka-python 3.0.12 crashes on null), high watermark = last stable =
log start = 0, and fetch session id 0 (no incremental sessions, so clients keep sending full fetches). A Fetch from
an offset beyond 0 (a committed offset from elsewhere) is not OFFSET_OUT_OF_RANGE: that would make the consumer reset
and then auto-commit the reset position over the committed offset.

ListOffsets v0 (Kafka 4 dropped it; decoded by ``protocol.legacy``) answers a list of offsets instead of one, as
Kafka 3.9's ``legacyFetchOffsetsBefore`` did on an empty log, which is one empty segment at offset 0: ``[0]`` for
latest (-1) and earliest (-2), at most ``max_num_offsets`` of them (none for 0 or less); a timestamp lookup finds
nothing (``[]``, as v1+ answer "not found"); any other negative timestamp is UNSUPPORTED_VERSION (v0 knows only -1
and -2); an unknown partition UNKNOWN_TOPIC_OR_PARTITION with no offsets.
"""

from __future__ import annotations

import asyncio
from typing import Any

from protocol.codec import response_class
from protocol.errors import ErrorCode

from ._util import ms, response_cls
from .build import build
from .context import RequestContext, Services

_LATEST, _EARLIEST = -1, -2


def _list_offsets_v0(services: Services, ctx: RequestContext, body: Any) -> Any:
    topics = []
    for t in body.topics:
        parts = []
        for p in t.partitions:
            offsets: tuple[int, ...]
            if not services.topics.has_partition(t.name, p.partition_index):
                error, offsets = ErrorCode.unknown_topic_or_partition, ()
            elif p.timestamp < _EARLIEST:
                error, offsets = ErrorCode.unsupported_version, ()
            elif p.timestamp < 0 and p.max_num_offsets > 0:
                error, offsets = ErrorCode.none, (0,)
            else:
                error, offsets = ErrorCode.none, ()
            parts.append({"partition_index": p.partition_index, "error_code": error, "old_style_offsets": offsets})
        topics.append({"name": t.name, "partitions": parts})
    return build(response_class(ctx.api_key, ctx.api_version), {"topics": topics})


def handle_list_offsets(services: Services, ctx: RequestContext, body: Any) -> Any:
    if ctx.api_version == 0:
        return _list_offsets_v0(services, ctx, body)
    topics = []
    for t in body.topics:
        parts = []
        for p in t.partitions:
            if not services.topics.has_partition(t.name, p.partition_index):
                parts.append(
                    {
                        "partition_index": p.partition_index,
                        "error_code": ErrorCode.unknown_topic_or_partition,
                        "timestamp": -1,
                        "offset": -1,
                        "leader_epoch": -1,
                    }
                )
                continue
            found = p.timestamp < 0 and p.timestamp != -3  # -3 = max timestamp: no message, not found
            parts.append(
                {
                    "partition_index": p.partition_index,
                    "error_code": ErrorCode.none,
                    "timestamp": -1,
                    "offset": 0 if found else -1,
                    "leader_epoch": 0 if found else -1,
                }
            )
        topics.append({"name": t.name, "partitions": parts})
    return build(response_cls(ctx), {"topics": topics})


def _fetch_response(services: Services, ctx: RequestContext, body: Any) -> tuple[Any, bool]:
    any_error = False
    responses = []
    for t in body.topics:
        parts = []
        for p in t.partitions:
            ok = services.topics.has_partition(t.topic, p.partition)
            any_error |= not ok
            parts.append(
                {
                    "partition_index": p.partition,
                    "error_code": ErrorCode.none if ok else ErrorCode.unknown_topic_or_partition,
                    "high_watermark": 0 if ok else -1,
                    "last_stable_offset": 0 if ok else -1,
                    "log_start_offset": 0 if ok else -1,
                    "aborted_transactions": (),
                    "preferred_read_replica": -1,
                    "records": b"",
                }
            )
        responses.append({"topic": t.topic, "partitions": parts})
    response = build(response_cls(ctx), {"error_code": ErrorCode.none, "session_id": 0, "responses": responses})
    return response, any_error


async def _after(delay_s: float, response: Any) -> Any:
    await asyncio.sleep(delay_s)
    return response


def handle_fetch(services: Services, ctx: RequestContext, body: Any) -> Any:
    response, any_error = _fetch_response(services, ctx, body)
    wait_ms = min(max(ms(body.max_wait), 0), services.max_fetch_wait_ms)
    if any_error or wait_ms == 0 or body.min_bytes <= 0 or services.closing:
        return response
    return _after(wait_ms / 1000.0, response)
