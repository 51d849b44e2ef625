"""ListOffsets (2, v0-7) and Fetch (1, v4-12): real answers from the broker's partitions.

ListOffsets v1+ (``broker.partitions.Broker.list_offset``): -2 earliest = the log start offset, -1 latest = the
high watermark (no transactions: the last stable offset is the same, so read_committed gets it too), -3 (v7, KIP-734)
the batch with the largest max timestamp (its last offset; its first under LogAppendTime, where every record has
that time), a timestamp t >= 0 the first batch whose max timestamp is >= t - batch granularity: its base offset and
max timestamp (Kafka decodes the batch to find the exact record; a consumer seeking there may see a few earlier
records of that batch); nothing found: offset and timestamp -1. ``leader_epoch`` is the partition epoch (0).
ListOffsets v0 (Kafka 4 dropped it; decoded by ``protocol.legacy``) answers a list: ``[high watermark]`` for -1,
``[log start]`` for -2 (none when ``max_num_offsets`` <= 0), ``[]`` for a timestamp, UNSUPPORTED_VERSION for any
other negative timestamp.

Fetch: whole stored batches from the one holding ``fetch_offset`` (clients drop the records before their position),
at most ``partition_max_bytes`` per partition and ``max_bytes`` in all, except that the first batch of the first
partition with data is sent even when larger (KIP-74). The high watermark and last stable offset are the durable
end of the log, ``aborted_transactions`` null under read_uncommitted and empty under read_committed, as Kafka sends
them. OFFSET_OUT_OF_RANGE below the log start or beyond the log end (the client resets through ListOffsets); at the
end, no records and no error. Fetch sessions are declined (session id 0): every answer is a full one, listing every
requested partition (kafka-python discards a full answer that does not). ``records`` is ``b""`` when empty, never
null (kafka-python 3.0.12 fails on null).

Long-poll: when no error and fewer than ``min_bytes`` are available, the Fetch waits - a task parked on the
partitions' watchers (``Broker.watch``), woken by durable appends, never polling - until ``min_bytes`` are there or
``max_wait_ms`` (capped by ``max_fetch_wait_ms``) has passed. Batch bytes are read from storage off the event loop
(``storage.batch_reader``), so a Fetch never holds a heartbeat or a commit on another connection.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any

from broker.partitions import Broker
from protocol.codec import response_class
from protocol.errors import ErrorCode
from security.acls import AclOperation

from ._util import ms, response_cls
from .acls import denied_topics
from .build import build
from .context import RequestContext, Services

_LATEST, _EARLIEST = -1, -2
READ_COMMITTED = 1


def _broker(services: Services) -> Broker:
    broker = services.broker
    assert broker is not None, "ListOffsets and Fetch are served only with a broker"
    return broker


def _list_offsets_v0(services: Services, ctx: RequestContext, body: Any) -> Any:
    broker = _broker(services)
    topics = []
    for t in body.topics:
        parts = []
        for p in t.partitions:
            offsets: tuple[int, ...]
            partition = broker.partition(t.name, p.partition_index)
            if partition is None:
                error, offsets = ErrorCode.unknown_topic_or_partition, ()
            elif p.timestamp < _EARLIEST:
                error, offsets = ErrorCode.unsupported_version, ()
            elif p.timestamp < 0 and p.max_num_offsets > 0:
                latest = p.timestamp == _LATEST
                error, offsets = ErrorCode.none, (partition.high_watermark if latest else partition.log_start,)
            else:
                error, offsets = ErrorCode.none, ()
            parts.append({"partition_index": p.partition_index, "error_code": error, "old_style_offsets": offsets})
        topics.append({"name": t.name, "partitions": parts})
    return build(response_class(ctx.api_key, ctx.api_version), {"topics": topics})


def handle_list_offsets(services: Services, ctx: RequestContext, body: Any) -> Any:
    if ctx.api_version == 0:
        return _list_offsets_v0(services, ctx, body)
    broker = _broker(services)
    topics = []
    denied = denied_topics(services, ctx, AclOperation.DESCRIBE, {t.name for t in body.topics})  # ACLs
    for t in body.topics:
        parts = []
        for p in t.partitions:
            if t.name in denied:
                error, offset, timestamp = ErrorCode.topic_authorization_failed, -1, -1
            else:
                error, offset, timestamp = broker.list_offset(t.name, p.partition_index, p.timestamp)
            if error and not ctx.error:
                ctx.error = error
            partition = broker.partition(t.name, p.partition_index)
            parts.append(
                {
                    "partition_index": p.partition_index,
                    "error_code": error,
                    "timestamp": timestamp,
                    "offset": offset,
                    "leader_epoch": partition.epoch if partition is not None and offset >= 0 else -1,
                }
            )
        topics.append({"name": t.name, "partitions": parts})
    return build(response_cls(ctx), {"topics": topics})


def _requested(body: Any) -> list[tuple[str, int, int, int]]:
    """(topic, partition, fetch offset, partition max bytes) in request order."""
    return [(t.topic, p.partition, p.fetch_offset, p.partition_max_bytes) for t in body.topics for p in t.partitions]


def _ready(broker: Broker, wanted: list[tuple[str, int, int, int]], min_bytes: int) -> tuple[int, bool]:
    """(bytes available, counted up to ``min_bytes``; whether a partition answers with an error)."""
    total = 0
    for topic, index, offset, _limit in wanted:
        partition = broker.partition(topic, index)
        if partition is None or offset < partition.log_start or offset > partition.next_offset:
            return total, True
        total += broker.available(topic, index, offset, min_bytes - total)
        if total >= min_bytes:
            break
    return total, False


def handle_fetch(services: Services, ctx: RequestContext, body: Any) -> Any:
    return _fetch(services, ctx, body)


async def _fetch(services: Services, ctx: RequestContext, body: Any) -> Any:
    broker = _broker(services)
    wanted = _requested(body)
    # ACLs: Read on each topic, else TOPIC_AUTHORIZATION_FAILED on its partitions (which are not waited for).
    denied = denied_topics(services, ctx, AclOperation.READ, {t.topic for t in body.topics})
    if denied:
        wanted = [w for w in wanted if w[0] not in denied]
    min_bytes = max(body.min_bytes, 1)
    wait_ms = min(max(ms(body.max_wait), 0), services.max_fetch_wait_ms)
    if wanted and wait_ms > 0:
        await _wait(services, broker, wanted, min_bytes, wait_ms / 1000.0)
    return await _response(services, broker, ctx, body, denied)


async def _wait(
    services: Services, broker: Broker, wanted: list[tuple[str, int, int, int]], min_bytes: int, wait_s: float
) -> None:
    """Until ``min_bytes`` are durable for the request, a partition errs, or ``wait_s`` have passed: woken by the
    partitions' appends (one future and one timer per wait, no polling)."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + wait_s
    while not services.closing:
        available, error = _ready(broker, wanted, min_bytes)
        left = deadline - loop.time()
        if error or available >= min_bytes or left <= 0:
            return
        woken: asyncio.Future[None] = loop.create_future()

        def wake(woken: asyncio.Future[None] = woken) -> None:
            if not woken.done():
                woken.set_result(None)

        cancels: list[Callable[[], None]] = []
        for topic, index, _offset, _limit in wanted:
            cancel = broker.watch(topic, index, wake)
            if cancel is not None:
                cancels.append(cancel)
        timer = loop.call_at(deadline, wake)
        try:
            await woken
        finally:
            timer.cancel()
            for cancel in cancels:
                cancel()


async def _response(
    services: Services, broker: Broker, ctx: RequestContext, body: Any, denied: set[str] | frozenset[str] = frozenset()
) -> Any:
    read_committed = body.isolation_level == READ_COMMITTED
    remaining = body.max_bytes if body.max_bytes > 0 else 0x7FFFFFFF
    sent = 0
    responses: list[dict[str, Any]] = []
    for t in body.topics:
        parts = []
        for p in t.partitions:
            if t.topic in denied:
                parts.append(_denied_partition(p.partition, read_committed))
                ctx.error = ctx.error or ErrorCode.topic_authorization_failed.value
                continue
            s = broker.read(
                t.topic, p.partition, p.fetch_offset, min(p.partition_max_bytes, remaining), min_one=sent == 0
            )
            records = b""
            if s.bases:
                data = s.data
                if data is None:
                    assert services.batches is not None, "a broker without bytes needs a batch source"
                    data = await services.batches.read_batches(t.topic, p.partition, s.bases[0], s.bases[-1])
                records = b"".join(data)
                sent += len(records)
                remaining = max(remaining - len(records), 0)
            if s.error and not ctx.error:
                ctx.error = s.error
            parts.append(
                {
                    "partition_index": p.partition,
                    "error_code": s.error,
                    "high_watermark": s.high_watermark,
                    "last_stable_offset": s.high_watermark,
                    "log_start_offset": s.log_start_offset,
                    "aborted_transactions": () if read_committed else None,
                    "preferred_read_replica": -1,
                    "records": records,
                }
            )
        responses.append({"topic": t.topic, "partitions": parts})
    return build(response_cls(ctx), {"error_code": ErrorCode.none, "session_id": 0, "responses": responses})


def _denied_partition(partition: int, read_committed: bool) -> dict[str, Any]:
    return {
        "partition_index": partition,
        "error_code": ErrorCode.topic_authorization_failed,
        "high_watermark": -1,
        "last_stable_offset": -1,
        "log_start_offset": -1,
        "aborted_transactions": () if read_committed else None,
        "preferred_read_replica": -1,
        "records": b"",
    }
