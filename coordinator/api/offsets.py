"""OffsetCommit (8, v2-9), OffsetFetch (9, v1-9), OffsetDelete (47, v0).

Broker layer before the core, as in Kafka's KafkaApis: a partition of a topic that does not exist, or beyond its
partition count, is answered UNKNOWN_TOPIC_OR_PARTITION and not passed on; if nothing remains the core is not called.
OffsetCommit never auto-creates topics, whatever ``auto.create.topics.enable`` says (Kafka only creates topics on
Metadata): a consumer has always sent Metadata for its topics before committing, so with auto-creation on they exist.

OffsetCommit answers with the finished response frame (bytes, see ``protocol.hot_responses``) rather than a kio
entity: it is the hot path of durable commits. The server writes bytes as they are.

Version rules: OffsetFetch v1 has no top-level error, so a group error is copied into every partition; v1-7 fetch
one group, v8+ a list of groups (each with its own error); ``topics = null`` (v2+) means every committed offset.
OffsetCommit v2-4 carry a retention time (-1 = broker default).
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from coordinator.core import messages as m
from protocol.errors import ErrorCode
from protocol.hot_responses import offset_commit_response_frame

from ._util import ms, response_cls, then
from .build import build
from .context import RequestContext, Services


def _by_topic(items: Iterable[tuple[str, dict[str, Any]]]) -> list[dict[str, Any]]:
    """Group (topic, partition-entry) pairs into Kafka's topics[partitions[]] shape, keeping first-seen order."""
    topics: dict[str, list[dict[str, Any]]] = {}
    for topic, entry in items:
        topics.setdefault(topic, []).append(entry)
    return [{"name": name, "partitions": parts} for name, parts in topics.items()]


# --------------------------------------------------------------------------------------------------- OffsetCommit


def handle_offset_commit(services: Services, ctx: RequestContext, body: Any) -> Any:
    topics = services.topics
    accepted: list[m.OffsetCommitPartition] = []
    order: list[tuple[str, int]] = []
    rejected: dict[tuple[str, int], ErrorCode] = {}
    for t in body.topics:
        for p in t.partitions:
            key = (t.name, p.partition_index)
            order.append(key)
            if not topics.has_partition(t.name, p.partition_index):
                rejected[key] = ErrorCode.unknown_topic_or_partition
                continue
            accepted.append(
                m.OffsetCommitPartition(
                    topic=t.name,
                    partition=p.partition_index,
                    offset=p.committed_offset,
                    leader_epoch=getattr(p, "committed_leader_epoch", -1),
                    metadata=p.committed_metadata,
                )
            )

    def respond(errors: dict[tuple[str, int], ErrorCode]) -> bytes:
        # The hot path of durable commits: the frame is written directly (protocol.hot_responses), no kio entity.
        topics: dict[str, list[tuple[int, int]]] = {}
        for topic, partition in order:
            topics.setdefault(topic, []).append((partition, errors[(topic, partition)].value))
        return offset_commit_response_frame(ctx.api_version, ctx.correlation_id, list(topics.items()))

    if not accepted:
        return respond(rejected)
    retention = getattr(body, "retention_time", None)
    request = m.OffsetCommitRequest(
        group_id=body.group_id,
        generation_id=body.generation_id_or_member_epoch,
        member_id=body.member_id,
        group_instance_id=getattr(body, "group_instance_id", None),
        partitions=accepted,
        api_version=ctx.api_version,
        retention_time_ms=ms(retention) if retention is not None else -1,
    )

    def merge(result: m.OffsetCommitResult) -> Any:
        errors = dict(rejected)
        for pe in result.partitions:
            errors[(pe.topic, pe.partition)] = pe.error
        return respond(errors)

    return then(services.coordinator.commit_offsets(request), merge)


# ---------------------------------------------------------------------------------------------------- OffsetFetch


def _fetch_one(services: Services, group_id: str, topics: Any, require_stable: bool) -> m.OffsetFetchResult:
    wanted = None if topics is None else [(t.name, list(t.partition_indexes)) for t in topics]
    request = m.OffsetFetchRequest(group_id=group_id, topics=wanted, require_stable=require_stable)
    return services.coordinator.fetch_offsets(request)


def _fetched_topics(result: m.OffsetFetchResult, push_error: bool) -> list[dict[str, Any]]:
    def entry(p: m.FetchedOffset) -> dict[str, Any]:
        error = p.error
        if push_error and result.error is not ErrorCode.none:
            error = result.error
        return {
            "partition_index": p.partition,
            "committed_offset": p.offset,
            "committed_leader_epoch": p.leader_epoch,
            "metadata": p.metadata,
            "error_code": error,
        }

    return _by_topic((p.topic, entry(p)) for p in result.partitions)


def handle_offset_fetch(services: Services, ctx: RequestContext, body: Any) -> Any:
    cls = response_cls(ctx)
    require_stable = bool(getattr(body, "require_stable", False))
    if ctx.api_version >= 8:
        groups = []
        for g in body.groups:
            result = _fetch_one(services, g.group_id, g.topics, require_stable)
            groups.append(
                {"group_id": g.group_id, "error_code": result.error, "topics": _fetched_topics(result, False)}
            )
        return build(cls, {"groups": groups})
    result = _fetch_one(services, body.group_id, body.topics, require_stable)
    push = ctx.api_version < 2
    return build(cls, {"error_code": result.error, "topics": _fetched_topics(result, push)})


# --------------------------------------------------------------------------------------------------- OffsetDelete


def handle_offset_delete(services: Services, ctx: RequestContext, body: Any) -> Any:
    topics = services.topics
    order: list[tuple[str, int]] = []
    rejected: dict[tuple[str, int], ErrorCode] = {}
    accepted: list[tuple[str, int]] = []
    for t in body.topics:
        for p in t.partitions:
            key = (t.name, p.partition_index)
            order.append(key)
            if topics.has_partition(*key):
                accepted.append(key)
            else:
                rejected[key] = ErrorCode.unknown_topic_or_partition

    def respond(result: m.OffsetDeleteResult) -> Any:
        if result.error is not ErrorCode.none:
            return build(response_cls(ctx), {"error_code": result.error, "topics": []})
        errors = dict(rejected)
        for pe in result.partitions:
            errors[(pe.topic, pe.partition)] = pe.error
        return build(
            response_cls(ctx),
            {
                "error_code": ErrorCode.none,
                "topics": _by_topic(
                    (topic, {"partition_index": part, "error_code": errors.get((topic, part), ErrorCode.none)})
                    for topic, part in order
                ),
            },
        )

    # Kafka calls the coordinator even when every partition was rejected: the group-level checks still apply.
    request = m.OffsetDeleteRequest(group_id=body.group_id, partitions=accepted)
    return then(services.coordinator.delete_offsets(request), respond)
