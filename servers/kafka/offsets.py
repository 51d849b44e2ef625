"""OffsetCommit (8, v0-9), OffsetFetch (9, v0-9), OffsetDelete (47, v0).

Broker layer before the core, as in Kafka's KafkaApis: a partition of a topic that does not exist, or beyond its
partition count, is answered UNKNOWN_TOPIC_OR_PARTITION and not passed on; if nothing remains the core is not called.
OffsetCommit never auto-creates topics, whatever ``auto.create.topics.enable`` says (Kafka only creates topics on
Metadata): a consumer has always sent Metadata for its topics before committing, so with auto-creation on they exist.

OffsetCommit answers with the finished response frame (bytes, see ``protocol.hot_responses``) rather than a kio
entity: it is the hot path of durable commits. The server writes bytes as they are.

Version rules: OffsetFetch v0-1 have no top-level error, so a group error is copied into every partition; v0-7 fetch
one group, v8+ a list of groups (each with its own error); ``topics = null`` (v2+) means every committed offset.
OffsetCommit v2-4 carry a retention time (-1 = broker default).

The versions Kafka 4 dropped (KIP-896), decoded by ``protocol.legacy``, with Kafka 3.9's semantics where they still
make sense without ZooKeeper (docs/robustness.md, "Old clients"):

- OffsetCommit v0 has no generation or member. Kafka 3.9 wrote it to ZooKeeper, beside the coordinator's offsets,
  and refused it on a KRaft broker. Here it is what its schema defaults say (generation -1, member ""): a commit
  outside group management, stored with every other commit, so any version and any tool reads it back. The core
  accepts it for an absent or Empty group and answers UNKNOWN_MEMBER_ID while the group has members, so an old tool
  cannot overwrite a live group's offsets.
- OffsetCommit v1's per-partition ``commit_timestamp`` (-1 = now) is the commit time the core records and counts
  retention from for groups whose offsets expire by commit time (as 3.9's OffsetAndMetadata.fromRequest did).
- OffsetFetch v0 (3.9: read from ZooKeeper) reads the coordinator's offsets, exactly as v1.
"""

from __future__ import annotations

import asyncio
import struct
from collections.abc import Iterable, Iterator
from typing import Any

from coordinator import messages as m
from protocol.codec import response_class
from protocol.errors import ErrorCode
from protocol.hot_responses import offset_commit_response_frame, uvarint
from security.acls import AclOperation, ResourceType
from security.audit import Action

from . import audit
from ._util import ms, then
from .acls import allowed, group_read_denied
from .build import build
from .context import RequestContext, Services


def _response_cls(ctx: RequestContext) -> Any:
    return response_class(ctx.api_key, ctx.api_version)  # protocol.legacy's class for OffsetFetch v0


def _topics_of(topics: Iterable[str], most: int = 10) -> str:
    """The distinct topics, in first-seen order, for a log line (at most ``most`` named)."""
    names = list(dict.fromkeys(topics))
    shown = ",".join(names[:most])
    return shown if len(names) <= most else f"{shown},... ({len(names)} topics)"


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
    v1 = ctx.api_version == 1  # the only version with a per-partition commit timestamp
    # ACLs (Kafka's order): Read on the group, else every partition GROUP_AUTHORIZATION_FAILED; then Read on each
    # topic, else its partitions TOPIC_AUTHORIZATION_FAILED (before the existence check).
    checking = services.authorizer.enabled
    group_denied = checking and group_read_denied(services, ctx, body.group_id)
    topic_denied: dict[str, bool] = {}
    for t in body.topics:
        if checking and not group_denied and t.name not in topic_denied:
            topic_denied[t.name] = not allowed(services, ctx, AclOperation.READ, ResourceType.TOPIC, t.name)
        for p in t.partitions:
            key = (t.name, p.partition_index)
            order.append(key)
            if group_denied:
                rejected[key] = ErrorCode.group_authorization_failed
                continue
            if checking and topic_denied[t.name]:
                rejected[key] = ErrorCode.topic_authorization_failed
                continue
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
                    commit_timestamp_ms=p.commit_timestamp if v1 else -1,
                )
            )

    def respond(errors: dict[tuple[str, int], ErrorCode]) -> bytes:
        # The hot path of durable commits: the frame is written directly (protocol.hot_responses), no kio entity.
        topics: dict[str, list[tuple[int, int]]] = {}
        first = 0  # the first partition error, for the metrics (ctx.error)
        for topic, partition in order:
            error = errors[(topic, partition)].value
            if error and not first:
                first = error
            topics.setdefault(topic, []).append((partition, error))
        ctx.error = first
        return offset_commit_response_frame(ctx.api_version, ctx.correlation_id, list(topics.items()))

    if not accepted:
        return respond(rejected)
    retention = getattr(body, "retention_time", None)
    v0 = ctx.api_version == 0  # no generation or member: the defaults Kafka's schema gives them
    request = m.OffsetCommitRequest(
        group_id=body.group_id,
        generation_id=-1 if v0 else body.generation_id_or_member_epoch,
        member_id="" if v0 else body.member_id,
        group_instance_id=getattr(body, "group_instance_id", None),
        partitions=accepted,
        api_version=ctx.api_version,
        retention_time_ms=ms(retention) if retention is not None else -1,
    )

    admin = request.generation_id < 0 and not request.member_id  # kafka-consumer-groups --reset-offsets, assign()

    def merge(result: m.OffsetCommitResult) -> Any:
        errors = dict(rejected)
        stored = 0
        for pe in result.partitions:
            errors[(pe.topic, pe.partition)] = pe.error
            stored += pe.error is ErrorCode.none
        if admin and stored:
            audit.admin_action(
                ctx, request.group_id, "offsets committed outside the group (generation -1) on %d partition(s): %s",
                stored, _topics_of(pe.topic for pe in result.partitions if pe.error is ErrorCode.none), throttle=True,
                services=services, action=Action.OFFSETS_ALTER,
            )  # fmt: skip
        return respond(errors)

    return then(services.coordinator.commit_offsets(request), merge)


# ---------------------------------------------------------------------------------------------------- OffsetFetch


def _fetch_one(
    services: Services, group_id: str, topics: Any, require_stable: bool, ctx: RequestContext | None = None
) -> m.OffsetFetchResult:
    wanted = None if topics is None else [(t.name, list(t.partition_indexes)) for t in topics]
    if ctx is None or not services.authorizer.enabled:
        request = m.OffsetFetchRequest(group_id=group_id, topics=wanted, require_stable=require_stable)
        return services.coordinator.fetch_offsets(request)
    # ACLs (Kafka's KafkaApis): Describe on the group, else GROUP_AUTHORIZATION_FAILED; then Describe on each topic:
    # a denied topic named in the request gets TOPIC_AUTHORIZATION_FAILED (offset -1), one in a fetch of every
    # offset is left out.
    if not allowed(services, ctx, AclOperation.DESCRIBE, ResourceType.GROUP, group_id):
        return m.OffsetFetchResult(group_id, ErrorCode.group_authorization_failed)
    decided: dict[str, bool] = {}

    def topic_ok(topic: str) -> bool:
        ok = decided.get(topic)
        if ok is None:
            ok = decided[topic] = allowed(services, ctx, AclOperation.DESCRIBE, ResourceType.TOPIC, topic)
        return ok

    if wanted is None:
        result = services.coordinator.fetch_offsets(m.OffsetFetchRequest(group_id, None, require_stable))
        result.partitions = [p for p in result.partitions if topic_ok(p.topic)]
        return result
    permitted = [(topic, parts) for topic, parts in wanted if topic_ok(topic)]
    result = services.coordinator.fetch_offsets(m.OffsetFetchRequest(group_id, permitted, require_stable))
    if len(permitted) == len(wanted):
        return result
    found = {(p.topic, p.partition): p for p in result.partitions}
    result.partitions = [
        found.get((topic, part)) or m.FetchedOffset(topic, part, error=ErrorCode.topic_authorization_failed)
        for topic, parts in wanted
        for part in parts
    ]
    return result


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
    require_stable = bool(getattr(body, "require_stable", False))
    if ctx.api_version >= 8:
        results = [_fetch_one(services, g.group_id, g.topics, require_stable, ctx) for g in body.groups]
    else:
        results = [_fetch_one(services, body.group_id, body.topics, require_stable, ctx)]
    # For the metrics: the first group error, else the first partition error (v0-1 and v8+ have no top-level one).
    ctx.error = next((r.error.value for r in results if r.error is not ErrorCode.none), 0) or next(
        (p.error.value for r in results for p in r.partitions if p.error is not ErrorCode.none), 0
    )
    if sum(len(r.partitions) for r in results) > ALL_OFFSETS_SLICE:
        # Typically a fetch of everything (null topics) of a group with very many offsets: encoded by hand, in
        # slices that give the event loop back in between (heartbeats of other connections are answered meanwhile).
        return _sliced_frame(ctx.api_version, ctx.correlation_id, results)
    cls = _response_cls(ctx)
    if ctx.api_version >= 8:
        return build(
            cls,
            {
                "groups": [
                    {"group_id": r.group_id, "error_code": r.error, "topics": _fetched_topics(r, False)}
                    for r in results
                ]
            },
        )
    result = results[0]
    push = ctx.api_version < 2
    return build(cls, {"error_code": result.error, "topics": _fetched_topics(result, push)})


# Partitions encoded between two returns to the event loop when an OffsetFetch answer is large (about 2-3 ms each,
# see docs/robustness.md); smaller answers are built at once through kio.
ALL_OFFSETS_SLICE = 2_000

_I16 = struct.Struct(">h")
_I32 = struct.Struct(">i")
_PARTITION_V0 = struct.Struct(">iq")  # partition_index, committed_offset
_PARTITION_V5 = struct.Struct(">iqi")  # + committed_leader_epoch


def _string(value: str | None, flexible: bool) -> bytes:
    if value is None:
        return b"\x00" if flexible else b"\xff\xff"
    raw = value.encode()
    return (uvarint(len(raw) + 1) if flexible else _I16.pack(len(raw))) + raw


def _array_length(n: int, flexible: bool) -> bytes:
    return uvarint(n + 1) if flexible else _I32.pack(n)


def _offset_fetch_body(version: int, results: list[m.OffsetFetchResult], out: list[bytes]) -> Iterator[None]:
    """Append the OffsetFetch response body of ``version`` (v1-9 layouts; v0 is v1's) answering ``results`` to
    ``out``, yielding after every ``ALL_OFFSETS_SLICE`` partitions. Byte-identical to kio's encoding of the response
    ``handle_offset_fetch`` builds for small answers (tests/api/test_legacy_adapters.py)."""
    flexible = version >= 6
    tags = b"\x00" if flexible else b""
    pack = _PARTITION_V5.pack if version >= 5 else _PARTITION_V0.pack
    metadata_cache: dict[str | None, bytes] = {}
    done = 0
    if version >= 3:
        out.append(b"\x00\x00\x00\x00")  # throttle_time_ms
    if version >= 8:
        out.append(_array_length(len(results), flexible))
    for result in results:
        push = version < 2 and result.error is not ErrorCode.none
        by_topic: dict[str, list[m.FetchedOffset]] = {}
        for i, p in enumerate(result.partitions, 1):
            parts = by_topic.get(p.topic)
            if parts is None:
                parts = by_topic[p.topic] = []
            parts.append(p)
            if i % ALL_OFFSETS_SLICE == 0:
                yield
        if version >= 8:
            out.append(_string(result.group_id, flexible))
        out.append(_array_length(len(by_topic), flexible))
        for topic, partitions in by_topic.items():
            out.append(_string(topic, flexible))
            out.append(_array_length(len(partitions), flexible))
            for p in partitions:
                metadata = metadata_cache.get(p.metadata)
                if metadata is None:
                    metadata = metadata_cache[p.metadata] = _string(p.metadata, flexible)
                fields = (p.partition, p.offset, p.leader_epoch) if version >= 5 else (p.partition, p.offset)
                error = result.error if push else p.error
                out.append(pack(*fields) + metadata + _I16.pack(error.value) + tags)
                done += 1
                if done % ALL_OFFSETS_SLICE == 0:
                    yield
            out.append(tags)  # topic
        if version >= 8:
            out.append(_I16.pack(result.error.value) + tags)  # group error, group tags
    if 2 <= version < 8:
        out.append(_I16.pack(results[0].error.value))
    out.append(tags)  # body


async def _sliced_frame(version: int, correlation_id: int, results: list[m.OffsetFetchResult]) -> bytes:
    out: list[bytes] = []
    for _ in _offset_fetch_body(version, results, out):
        await asyncio.sleep(0)
    body = b"".join(out)
    header = _I32.pack(correlation_id) + (b"\x00" if version >= 6 else b"")  # response header v1 from v6
    return _I32.pack(len(header) + len(body)) + header + body


# --------------------------------------------------------------------------------------------------- OffsetDelete


def handle_offset_delete(services: Services, ctx: RequestContext, body: Any) -> Any:
    topics = services.topics
    order: list[tuple[str, int]] = []
    rejected: dict[tuple[str, int], ErrorCode] = {}
    accepted: list[tuple[str, int]] = []
    checking = services.authorizer.enabled  # ACLs: Delete on the group, then Read on each topic (as Kafka)
    if checking and not allowed(services, ctx, AclOperation.DELETE, ResourceType.GROUP, body.group_id):
        ctx.error = ErrorCode.group_authorization_failed.value
        return build(_response_cls(ctx), {"error_code": ErrorCode.group_authorization_failed, "topics": []})
    for t in body.topics:
        denied = checking and not allowed(services, ctx, AclOperation.READ, ResourceType.TOPIC, t.name)
        for p in t.partitions:
            key = (t.name, p.partition_index)
            order.append(key)
            if denied:
                rejected[key] = ErrorCode.topic_authorization_failed
            elif topics.has_partition(*key):
                accepted.append(key)
            else:
                rejected[key] = ErrorCode.unknown_topic_or_partition

    def respond(result: m.OffsetDeleteResult) -> Any:
        if result.error is not ErrorCode.none:
            return build(_response_cls(ctx), {"error_code": result.error, "topics": []})
        errors = dict(rejected)
        for pe in result.partitions:
            errors[(pe.topic, pe.partition)] = pe.error
        deleted = [pe.topic for pe in result.partitions if pe.error is ErrorCode.none]
        if deleted:
            audit.admin_action(
                ctx, body.group_id, "offsets deleted (OffsetDelete) on %d partition(s): %s", len(deleted),
                _topics_of(deleted), services=services, action=Action.OFFSETS_DELETE,
            )  # fmt: skip
        ctx.error = next((errors[key].value for key in order if errors.get(key, ErrorCode.none).value), 0)
        return build(
            _response_cls(ctx),
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
