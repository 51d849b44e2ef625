"""Metadata (3), v0-12: this node is the only broker, the controller and the leader of every partition.

Requested topics that do not exist are created when ``auto.create.topics.enable`` is on and the request allows it
(v4+ ``allow_auto_topic_creation``), within the registry's limits (``broker.topics.AutoCreateLimits``); a topic
not created is answered with UNKNOWN_TOPIC_OR_PARTITION, an illegal name with INVALID_TOPIC_EXCEPTION, as Kafka does.
``topics = null`` (v1+) means every topic; v0's empty list means every topic too. Names asked for twice are answered
once (Kafka reads them as a set).

Topic ids, as ``KafkaApis.handleTopicMetadataRequest`` does: in v10-11 a null name or a non-zero id is an invalid
request (every topic answered with INVALID_REQUEST, a null name as ""); in v12, if any topic has a non-zero id the
request is answered by id only (unknown ids with UNKNOWN_TOPIC_ID and a null name, first), names being ignored.

Authorized operations (KIP-430, ``authorized``): from v8 a request with ``include_topic_authorized_operations`` gets
each described topic's bitfield (not a refused one's, nor an unknown id's), and in v8-10 one with
``include_cluster_authorized_operations`` the cluster's; the kept entries are encoded 'not requested' and the four
bytes are replaced per answer (``with_operations``). Such a request for every topic is built as a named one, not
taken from the shared answer for every topic.

Encoding. A Metadata answer for every topic is the biggest thing a client can ask for (24 MB for 100,000 topics of
a few partitions), and kio builds it at about 20 us a topic: two seconds of a frozen event loop per request. So the
answer is encoded here, not through kio: each topic's entry once per version family (the versions whose entries are
the same bytes) and kept until that topic changes (``TopicRegistry.on_change``); an answer is the response's fixed
head and tail (encoded by kio, once per version and node) around the joined entries; and the answer for every topic
is kept per version for the registry's current ``generation``, so a repeated request costs one copy with its
correlation id. Whatever still has to be encoded is encoded in slices of ``SLICE_SECONDS`` that yield to the loop
(the handler then returns a coroutine, which the server parks): no request holds the loop for long, and concurrent
requests for every topic share one build. tests/api/test_large_responses.py checks the bytes against kio's for every
version.
"""

from __future__ import annotations

import asyncio
import struct
import uuid
import weakref
from collections.abc import Callable, Generator, Sequence
from time import perf_counter
from types import SimpleNamespace
from typing import Any

from broker.topics import Topic, TopicRegistry, is_internal_topic, is_legal_topic_name
from protocol.codec import encode_response
from protocol.errors import ErrorCode
from protocol.headers import RequestHeader
from protocol.hot_responses import uvarint as _uvarint
from security.acls import AclOperation, ResourceType

from ._util import response_cls
from .acls import allowed, cluster_allowed
from .authorized import NOT_REQUESTED, authorized_operations, cluster_operations
from .build import build
from .context import Node, RequestContext, Services, node_of

_NULL_UUID = uuid.UUID(int=0)
SLICE_SECONDS = 0.005  # longest an encoding step runs before it yields to the event loop
KEEP = 3  # version families whose topic entries are kept, and versions whose answer for every topic is kept

# Metadata versions whose topic entries encode to the same bytes (for a non-null name): v1 adds is_internal, v5
# offline_replicas, v7 leader_epoch, v8 topic_authorized_operations, v9 is flexible, v10 adds topic_id.
FAMILY = (0, 1, 1, 1, 1, 5, 5, 7, 8, 9, 10, 10, 10)

_I16 = struct.Struct(">h")
_I32 = struct.Struct(">i")
_SIZE_AND_CORRELATION = struct.Struct(">ii")
TopicOperations = Callable[[str], int]  # a topic's authorized-operations bitfield, for a request that asks for it


def _array_length(flexible: bool, n: int) -> bytes:
    return _uvarint(n + 1) if flexible else _I32.pack(n)


def encode_topic(
    family: int,
    error: int,
    name: str | None,
    topic_id: uuid.UUID | None,
    partitions: int,
    node_id: int,
    internal: bool = False,
    operations: int = NOT_REQUESTED,
) -> bytes:
    """One MetadataResponseTopic in the encoding of ``family`` (see ``FAMILY``), every partition led by ``node_id``
    with it as the only replica, ``operations`` as topic_authorized_operations (v8+). ``name`` None only where the
    version allows it (12);
    ``internal``: ``__consumer_offsets`` (``broker.topics.is_internal_topic``), which clients leave out of a
    subscription by pattern unless ``exclude.internal.topics`` is false."""
    flexible = family >= 9
    raw = b"" if name is None else name.encode()
    if not flexible:
        out = [_I16.pack(error), _I16.pack(len(raw)), raw]
    elif name is None:
        out = [_I16.pack(error), b"\x00"]
    else:
        out = [_I16.pack(error), _uvarint(len(raw) + 1), raw]
    if family >= 10:
        out.append((topic_id or _NULL_UUID).bytes)
    if family >= 1:
        out.append(b"\x01" if internal else b"\x00")  # is_internal
    out.append(_array_length(flexible, partitions))
    if partitions:
        node = _I32.pack(node_id)
        one_node = _array_length(flexible, 1) + node
        rest = node  # leader_id
        if family >= 7:
            rest += b"\x00\x00\x00\x00"  # leader_epoch
        rest += one_node + one_node  # replica_nodes, isr_nodes
        if family >= 5:
            rest += _array_length(flexible, 0)  # offline_replicas
        if flexible:
            rest += b"\x00"  # tagged fields
        out.extend(b"\x00\x00" + _I32.pack(p) + rest for p in range(partitions))  # error_code 0, partition_index
    if family >= 8:
        out.append(_I32.pack(operations))
    if flexible:
        out.append(b"\x00")
    return b"".join(out)


def with_operations(entry: bytes, family: int, operations: int) -> bytes:
    """``entry`` (of ``family`` >= 8) with its topic_authorized_operations set to ``operations``: the kept entries
    are encoded 'not requested', and the bits differ per principal."""
    end = len(entry) - (5 if family >= 9 else 4)  # the field, then the tagged fields (v9+)
    return b"".join((entry[:end], _I32.pack(operations), entry[end + 4 :]))


class _Encoded:
    """What is kept for one registry: topic entries per (family, node id), the fixed parts of an answer per
    (version, node, error answer), and the answer for every topic per (version, node) with its generation."""

    def __init__(self, registry: TopicRegistry) -> None:
        self.entries: dict[tuple[int, int], dict[str, bytes]] = {}
        self.frames: dict[tuple[int, Node, bool], tuple[bytes, bytes]] = {}
        self.every_topic: dict[tuple[int, Node], tuple[int, bytes]] = {}
        self.building: dict[tuple[int, Node, int], asyncio.Task[bytes]] = {}
        self.copy_turn = asyncio.Lock()  # see _shared
        registry.on_change(self._forget)

    def _forget(self, topic: Topic) -> None:
        for entries in self.entries.values():
            entries.pop(topic.name, None)

    def entries_for(self, family: int, node_id: int) -> dict[str, bytes]:
        """The kept entries of ``family``; only the ``KEEP`` families used last are kept (a client cycling through
        every version must not make the daemon keep seven copies of every topic)."""
        key = (family, node_id)
        entries = self.entries.pop(key, None)
        if entries is None:
            entries = {}
            if len(self.entries) >= KEEP:
                del self.entries[next(iter(self.entries))]
        self.entries[key] = entries  # last used last
        return entries

    def keep_answer(self, key: tuple[int, Node], generation: int, rest: bytes) -> None:
        """Keep the answer for every topic of the ``KEEP`` versions used last."""
        self.every_topic.pop(key, None)
        if len(self.every_topic) >= KEEP:
            del self.every_topic[next(iter(self.every_topic))]
        self.every_topic[key] = (generation, rest)


_encoded: weakref.WeakKeyDictionary[TopicRegistry, _Encoded] = weakref.WeakKeyDictionary()


def _encoded_for(registry: TopicRegistry) -> _Encoded:
    cache = _encoded.get(registry)
    if cache is None:
        cache = _encoded[registry] = _Encoded(registry)
    return cache


def _head_and_tail(cache: _Encoded, ctx: RequestContext, node: Node, invalid: bool) -> tuple[bytes, bytes]:
    """The answer's bytes after the correlation id and before the topics array, and after it: kio encodes the
    response with no topics once; the topics array is followed by cluster_authorized_operations (v8-10) and the
    tagged fields (v9+), all fixed."""
    version = ctx.api_version
    key = (version, node, invalid)
    parts = cache.frames.get(key)
    if parts is None:
        if invalid:  # MetadataRequest.getErrorResponse: no brokers, no cluster id, controller -1
            data: dict[str, Any] = {"brokers": [], "cluster_id": None, "controller_id": -1, "topics": []}
        else:
            broker = {"node_id": node.node_id, "host": node.host, "port": node.port, "rack": node.rack}
            data = {"brokers": [broker], "cluster_id": node.cluster_id, "controller_id": node.node_id, "topics": []}
        frame = encode_response(RequestHeader(3, version, 0, None), build(response_cls(ctx), data))
        flexible = version >= 9
        tail_size = (4 if 8 <= version <= 10 else 0) + (1 if flexible else 0)
        empty_array = len(_array_length(flexible, 0))
        end = len(frame) - tail_size
        parts = cache.frames[key] = (frame[8 : end - empty_array], frame[end:])
    return parts


def _with_correlation(rest: bytes, correlation_id: int) -> bytes:
    return _SIZE_AND_CORRELATION.pack(len(rest) + 4, correlation_id) + rest


def _encode(
    cache: _Encoded, registry: TopicRegistry, family: int, node_id: int, items: Sequence[Topic | bytes],
    topic_operations: TopicOperations | None = None,
) -> Generator[None, None, list[bytes]]:  # fmt: skip
    """The entries of ``items`` (a Topic, or an entry already encoded), yielding every ``SLICE_SECONDS``; a Topic's
    entry with its authorized operations if ``topic_operations`` is given."""
    entries = cache.entries_for(family, node_id)
    out: list[bytes] = []
    append = out.append
    deadline = perf_counter() + SLICE_SECONDS
    for i, item in enumerate(items):
        if isinstance(item, bytes):
            append(item)
            continue
        entry = entries.get(item.name)
        if entry is None:
            internal = is_internal_topic(item.name)
            entry = encode_topic(family, 0, item.name, item.topic_id, item.partitions, node_id, internal)
            if registry.get(item.name) is item:  # not a topic that changed while this answer was being built
                entries[item.name] = entry
        if topic_operations is not None:
            entry = with_operations(entry, family, topic_operations(item.name))
        append(entry)
        if not i & 255 and perf_counter() > deadline:
            yield
            deadline = perf_counter() + SLICE_SECONDS
    return out


def _answer(
    cache: _Encoded, registry: TopicRegistry, ctx: RequestContext, node: Node, items: Sequence[Topic | bytes],
    invalid: bool = False, topic_operations: TopicOperations | None = None, cluster_operations: int = NOT_REQUESTED,
) -> Generator[None, None, bytes]:  # fmt: skip
    """Everything after the correlation id of the answer listing ``items``; ``cluster_operations`` is answered in
    v8-10 (the field's place in the fixed tail)."""
    head, tail = _head_and_tail(cache, ctx, node, invalid)
    version = ctx.api_version
    if cluster_operations != NOT_REQUESTED and 8 <= version <= 10:
        tail = _I32.pack(cluster_operations) + tail[4:]
    parts = yield from _encode(cache, registry, FAMILY[version], node.node_id, items, topic_operations)
    if len(parts) > 4096:
        yield  # joining megabytes is a step of its own (about 1 ms per MB)
    parts.append(tail)
    return b"".join((head, _array_length(version >= 9, len(items)), *parts))  # one copy of the whole answer


async def _continue(steps: Generator[None, None, bytes]) -> bytes:
    """Run the rest of ``steps`` (its first step has run), one slice per loop iteration."""
    try:
        while True:
            await asyncio.sleep(0)  # let everything else that is ready run between two slices
            next(steps)
    except StopIteration as done:
        return done.value  # type: ignore[no-any-return]


async def _shared(cache: _Encoded, build_task: asyncio.Task[bytes], correlation_id: int) -> bytes:
    # shield: this request's connection closing cancels this coroutine, not the build other requests wait for
    rest = await asyncio.shield(build_task)
    # Every request waiting for the build wakes in the same loop iteration, and each copies the whole answer (10 ms
    # for 19 MB): they take turns, one copy per iteration, so that the loop polls sockets in between.
    async with cache.copy_turn:
        await asyncio.sleep(0)
        return _with_correlation(rest, correlation_id)


async def _own(steps: Generator[None, None, bytes], correlation_id: int) -> bytes:
    return _with_correlation(await _continue(steps), correlation_id)


def _every_topic(cache: _Encoded, registry: TopicRegistry, ctx: RequestContext, node: Node) -> Any:
    key = (ctx.api_version, node)
    generation = registry.generation
    done = cache.every_topic.get(key)
    if done is not None and done[0] == generation:
        return _with_correlation(done[1], ctx.correlation_id)
    running = cache.building.get((*key, generation))
    if running is not None:
        return _shared(cache, running, ctx.correlation_id)
    steps = _answer(cache, registry, ctx, node, registry.all())
    try:
        next(steps)
    except StopIteration as finished:
        rest: bytes = finished.value
        cache.keep_answer(key, generation, rest)
        return _with_correlation(rest, ctx.correlation_id)

    async def build_the_rest() -> bytes:
        try:
            rest = await _continue(steps)
            if cache.every_topic.get(key, (-1, b""))[0] < generation:
                cache.keep_answer(key, generation, rest)
            return rest
        finally:
            cache.building.pop((*key, generation), None)

    task = cache.building[(*key, generation)] = asyncio.get_running_loop().create_task(build_the_rest())
    return _shared(cache, task, ctx.correlation_id)


def _requested(
    services: Services, ctx: RequestContext, body: Any, family: int, topic_operations: TopicOperations | None = None
) -> Generator[None, None, tuple[list[Topic | bytes], bool]]:
    """The entries answering a request that names topics, and whether it is an invalid request (v10-11 ids);
    yields every ``SLICE_SECONDS`` (a request can name hundreds of thousands of topics)."""
    registry = services.topics
    node_id = node_of(services, ctx).node_id
    version = ctx.api_version
    requested = body.topics
    items: list[Topic | bytes] = []
    deadline = perf_counter() + SLICE_SECONDS
    if version in (10, 11) and any(t.name is None or (t.topic_id or _NULL_UUID) != _NULL_UUID for t in requested):
        for i, t in enumerate(requested):
            items.append(encode_topic(family, ErrorCode.invalid_request, t.name or "", t.topic_id, 0, node_id))
            if not i & 1023 and perf_counter() > deadline:
                yield
                deadline = perf_counter() + SLICE_SECONDS
        return items, True
    ids = dict.fromkeys(t.topic_id for t in requested if version >= 12 and (t.topic_id or _NULL_UUID) != _NULL_UUID)
    if ids:
        known: list[Topic | bytes] = []
        for i, topic_id in enumerate(ids):
            topic = registry.by_id(topic_id)
            if topic is None:
                items.append(encode_topic(family, ErrorCode.unknown_topic_id, None, topic_id, 0, node_id))
            else:
                known.append(topic)
            if not i & 1023 and perf_counter() > deadline:
                yield
                deadline = perf_counter() + SLICE_SECONDS
        return items + known, False
    allow_create = getattr(body, "allow_auto_topic_creation", True)
    created_before = registry.auto_created
    # ACLs (Kafka's order): Describe on the topic, else TOPIC_AUTHORIZATION_FAILED (existence not disclosed); creating
    # a missing one needs Create on the cluster or on the topic, else TOPIC_AUTHORIZATION_FAILED too.
    checking = services.authorizer.enabled
    create_anywhere = checking and cluster_allowed(services, ctx, AclOperation.CREATE)
    for i, name in enumerate(dict.fromkeys(t.name for t in requested)):
        if not i & 1023 and perf_counter() > deadline:
            yield
            deadline = perf_counter() + SLICE_SECONDS
        if name is None:  # v12, neither a name nor an id: the topic with the null id does not exist
            items.append(encode_topic(family, ErrorCode.unknown_topic_id, None, None, 0, node_id))
            continue
        may_create = allow_create
        if checking:
            if not allowed(services, ctx, AclOperation.DESCRIBE, ResourceType.TOPIC, name):
                items.append(encode_topic(family, ErrorCode.topic_authorization_failed, name, None, 0, node_id))
                continue
            may_create = allow_create and (
                create_anywhere or allowed(services, ctx, AclOperation.CREATE, ResourceType.TOPIC, name)
            )
            if allow_create and not may_create and registry.get(name) is None and registry.auto_create:
                items.append(encode_topic(family, ErrorCode.topic_authorization_failed, name, None, 0, node_id))
                continue
        created = registry.auto_created - created_before
        topic = registry.maybe_auto_create(name, may_create, client=ctx.client_host, created_in_request=created)
        if topic is not None:
            items.append(topic)
            continue
        error = ErrorCode.unknown_topic_or_partition
        if registry.auto_create and allow_create and not is_legal_topic_name(name):
            error = ErrorCode.invalid_topic_exception  # what Kafka answers when it refuses to create it
        # A topic the principal may describe has its operations even when it does not exist (as in Kafka); the
        # refused ones above, and unknown ids, keep 'not requested'.
        operations = NOT_REQUESTED if topic_operations is None else topic_operations(name)
        items.append(encode_topic(family, error, name, None, 0, node_id, operations=operations))
    return items, False


def _named(
    services: Services, ctx: RequestContext, body: Any, cache: _Encoded,
    topic_operations: TopicOperations | None, cluster_ops: int,
) -> Generator[None, None, bytes]:  # fmt: skip
    items, invalid = yield from _requested(services, ctx, body, FAMILY[ctx.api_version], topic_operations)
    if invalid:  # Kafka answers an invalid request with its error response: nothing but the errors
        topic_operations, cluster_ops = None, NOT_REQUESTED
    node = node_of(services, ctx)
    return (yield from _answer(cache, services.topics, ctx, node, items, invalid, topic_operations, cluster_ops))


def _operations_asked(services: Services, ctx: RequestContext, body: Any) -> tuple[TopicOperations | None, int]:
    """KIP-430, as ``KafkaApis.handleTopicMetadataRequest``: from v8, the topics' bitfields if asked for; in v8-10,
    the cluster's if asked for (``authorized.cluster_operations``: 0 without Describe on the cluster)."""
    version = ctx.api_version
    if version < 8:
        return None, NOT_REQUESTED
    authorizer, principal, host = services.authorizer, ctx.principal, ctx.client_host
    cluster_ops = NOT_REQUESTED
    if version <= 10 and getattr(body, "include_cluster_authorized_operations", False):
        cluster_ops = cluster_operations(authorizer, principal, host)
    topic_operations: TopicOperations | None = None
    if getattr(body, "include_topic_authorized_operations", False):

        def topic_operations(name: str) -> int:
            return authorized_operations(authorizer, principal, host, ResourceType.TOPIC, name)

    return topic_operations, cluster_ops


def handle_metadata(services: Services, ctx: RequestContext, body: Any) -> Any:
    registry = services.topics
    cache = _encoded_for(registry)
    requested = body.topics
    topic_operations, cluster_ops = _operations_asked(services, ctx, body)
    if requested is None or (ctx.api_version == 0 and not requested):
        asked = topic_operations is not None or cluster_ops != NOT_REQUESTED
        if not services.authorizer.enabled and not asked:
            return _every_topic(cache, registry, ctx, node_of(services, ctx))
        # ACLs, or authorized operations asked for: every topic the principal may describe, answered as if it had
        # named them (not the shared answer, which has neither)
        named = [
            SimpleNamespace(name=t.name, topic_id=None)
            for t in registry.all()
            if allowed(services, ctx, AclOperation.DESCRIBE, ResourceType.TOPIC, t.name)
        ]
        body = SimpleNamespace(topics=named, allow_auto_topic_creation=False)
    steps = _named(services, ctx, body, cache, topic_operations, cluster_ops)
    try:
        next(steps)
    except StopIteration as finished:
        return _with_correlation(finished.value, ctx.correlation_id)
    return _own(steps, ctx.correlation_id)
