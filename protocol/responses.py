"""Error responses for every advertised API, and the answers to unsupported requests.

``error_response`` builds a kio response of the requested api/version in which every error field carries the given
error: the top-level one where the version has it, and one entry per group / topic-partition / member / coordinator
key listed by the request when ``request_body`` is given (that is what clients match their results against). The
other fields get Kafka's "no value" sentinels (generation -1, offsets -1, node -1, empty strings and arrays, empty
``records`` — never null, kafka-python crashes on null records). Built by walking kio's schema, so a field added in a
new version gets a neutral default without code here.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Iterable
from datetime import timedelta
from typing import Any

from kio.static.constants import uuid_zero

from protocol._cache import typed_cache
from protocol.apis import SUPPORTED_VERSIONS, ApiKey
from protocol.codec import api_versions_error_frame, encode_response, response_class
from protocol.errors import ErrorCode, InvalidRequest, UnsupportedApi
from protocol.headers import RequestHeader
from protocol.tolerant import field_shape

__all__ = ["api_versions_response", "error_response", "invalid_request_frame", "unsupported_response_frame"]

_AUTHORIZED_OPERATIONS_OMITTED = -(2**31)

# Kafka's sentinels for "unknown" in error responses, by field name.
_SENTINELS: dict[str, int] = {
    "generation_id": -1,
    "node_id": -1,
    "port": -1,
    "controller_id": -1,
    "leader_id": -1,
    "leader_epoch": -1,
    "committed_offset": -1,
    "committed_leader_epoch": -1,
    "high_watermark": -1,
    "last_stable_offset": -1,
    "log_start_offset": -1,
    "preferred_read_replica": -1,
    "offset": -1,
    "timestamp": -1,
    "authorized_operations": _AUTHORIZED_OPERATIONS_OMITTED,
    "topic_authorized_operations": _AUTHORIZED_OPERATIONS_OMITTED,
    "cluster_authorized_operations": _AUTHORIZED_OPERATIONS_OMITTED,
}

_ZERO_BY_KAFKA_TYPE: dict[str, Any] = {
    "int8": 0,
    "int16": 0,
    "int32": 0,
    "int64": 0,
    "uint8": 0,
    "uint16": 0,
    "uint32": 0,
    "uint64": 0,
    "float64": 0.0,
    "string": "",
    "bytes": b"",
    "records": b"",
    "bool": False,
    "uuid": uuid_zero,
    "timedelta_i32": timedelta(0),
    "timedelta_i64": timedelta(0),
}


def _neutral(field: dataclasses.Field[Any], error: ErrorCode) -> Any:
    item_type, is_array, nullable = field_shape(field)
    kafka_type = field.metadata.get("kafka_type")
    if is_array:
        return ()  # also for nullable arrays (Fetch aborted_transactions): clients handle empty better than null
    if kafka_type == "error_code":
        return error
    if kafka_type == "records":
        return b""
    if field.name in _SENTINELS and kafka_type in ("int32", "int64"):
        return _SENTINELS[field.name]
    if field.name == "metadata" and kafka_type == "string":
        return ""  # OffsetFetch's NO_METADATA, as Kafka sends it with an error
    if nullable:
        return None
    if item_type is not None:
        return _fill(item_type, error)
    if kafka_type in _ZERO_BY_KAFKA_TYPE:
        return _ZERO_BY_KAFKA_TYPE[kafka_type]
    raise TypeError(f"no neutral value for {field.name}: {kafka_type}")


@typed_cache
def _required_fields(cls: type[Any]) -> tuple[dataclasses.Field[Any], ...]:
    """Fields without a default, and error codes even with one (OffsetFetch's top-level error defaults to none)."""
    return tuple(
        f
        for f in dataclasses.fields(cls)
        if (f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING)
        or f.metadata.get("kafka_type") == "error_code"
    )


@typed_cache
def _field_names(cls: type[Any]) -> frozenset[str]:
    return frozenset(f.name for f in dataclasses.fields(cls))


def _fill(cls: type[Any], error: ErrorCode, **overrides: Any) -> Any:
    """An instance of ``cls`` with neutral values, ``error`` in error fields, and the overrides ``cls`` has."""
    names = _field_names(cls)
    values = {f.name: _neutral(f, error) for f in _required_fields(cls) if f.name not in overrides}
    values.update((k, v) for k, v in overrides.items() if k in names)
    return cls(**values)


@typed_cache
def _item(cls: type[Any], name: str) -> type[Any]:
    for f in dataclasses.fields(cls):
        if f.name == name:
            item_type, _, _ = field_shape(f)
            if item_type is None:
                raise TypeError(f"{cls.__name__}.{name} is not an entity field")
            return item_type
    raise TypeError(f"{cls.__name__} has no field {name}")


def _has(cls: type[Any], name: str) -> bool:
    return name in _field_names(cls)


def _items(body: Any, name: str) -> Iterable[Any]:
    return getattr(body, name, None) or () if body is not None else ()


# --- per-API builders: (response class, error, request body or None) -> response --------------------------------


def _topic_partitions(
    topic_cls: type[Any],
    topics: Iterable[Any],
    error: ErrorCode,
    *,
    partition_field: str = "partitions",
    request_partitions: Callable[[Any], Iterable[int]],
    topic_name: Callable[[Any], dict[str, Any]],
    partition_key: str = "partition_index",
) -> tuple[Any, ...]:
    partition_cls = _item(topic_cls, partition_field)
    return tuple(
        _fill(
            topic_cls,
            error,
            **topic_name(t),
            **{
                partition_field: tuple(_fill(partition_cls, error, **{partition_key: p}) for p in request_partitions(t))
            },
        )
        for t in topics
    )


def _partition_indexes(t: Any) -> Iterable[int]:
    return [p.partition_index for p in t.partitions]


def _by_name(t: Any) -> dict[str, Any]:
    # Newer versions name topics by id (OffsetCommit/OffsetFetch v10, Fetch v13); keep whichever the request used.
    return {"name": getattr(t, "name", ""), "topic_id": getattr(t, "topic_id", uuid_zero)}


def _build_top_level(cls: type[Any], error: ErrorCode, body: Any) -> Any:
    return _fill(cls, error)


def _build_metadata(cls: type[Any], error: ErrorCode, body: Any) -> Any:
    topic_cls = _item(cls, "topics")
    topics = tuple(
        _fill(topic_cls, error, name=t.name, topic_id=getattr(t, "topic_id", None) or uuid_zero)
        for t in _items(body, "topics")
    )
    return _fill(cls, error, topics=topics)


def _build_find_coordinator(cls: type[Any], error: ErrorCode, body: Any) -> Any:
    if not _has(cls, "coordinators"):
        return _fill(cls, error)
    key_cls = _item(cls, "coordinators")
    return _fill(cls, error, coordinators=tuple(_fill(key_cls, error, key=k) for k in _items(body, "coordinator_keys")))


def _build_leave_group(cls: type[Any], error: ErrorCode, body: Any) -> Any:
    if not _has(cls, "members"):
        return _fill(cls, error)
    member_cls = _item(cls, "members")
    members = tuple(
        _fill(member_cls, error, member_id=m.member_id, group_instance_id=m.group_instance_id)
        for m in _items(body, "members")
    )
    return _fill(cls, error, members=members)


def _build_offset_commit(cls: type[Any], error: ErrorCode, body: Any) -> Any:
    topics = _topic_partitions(
        _item(cls, "topics"),
        _items(body, "topics"),
        error,
        request_partitions=_partition_indexes,
        topic_name=_by_name,
    )
    return _fill(cls, error, topics=topics)


def _build_offset_fetch(cls: type[Any], error: ErrorCode, body: Any) -> Any:
    if _has(cls, "groups"):
        group_cls = _item(cls, "groups")
        topic_cls = _item(group_cls, "topics")
        groups = tuple(
            _fill(
                group_cls,
                error,
                group_id=g.group_id,
                topics=_topic_partitions(
                    topic_cls,
                    g.topics or (),
                    error,
                    request_partitions=lambda t: t.partition_indexes,
                    topic_name=_by_name,
                ),
            )
            for g in _items(body, "groups")
        )
        return _fill(cls, error, groups=groups)
    topics = _topic_partitions(
        _item(cls, "topics"),
        _items(body, "topics"),
        error,
        request_partitions=lambda t: t.partition_indexes,
        topic_name=_by_name,
    )
    return _fill(cls, error, topics=topics)


def _build_list_offsets(cls: type[Any], error: ErrorCode, body: Any) -> Any:
    topics = _topic_partitions(
        _item(cls, "topics"),
        _items(body, "topics"),
        error,
        request_partitions=_partition_indexes,
        topic_name=_by_name,
    )
    return _fill(cls, error, topics=topics)


def _fetch_topic(t: Any) -> dict[str, Any]:
    return {"topic": getattr(t, "topic", ""), "topic_id": getattr(t, "topic_id", uuid_zero)}  # Fetch says "topic"


def _build_fetch(cls: type[Any], error: ErrorCode, body: Any) -> Any:
    responses = _topic_partitions(
        _item(cls, "responses"),
        _items(body, "topics"),
        error,
        request_partitions=lambda t: [p.partition for p in t.partitions],
        topic_name=_fetch_topic,
    )
    return _fill(cls, error, responses=responses)


def _build_produce(cls: type[Any], error: ErrorCode, body: Any) -> Any:
    responses = _topic_partitions(
        _item(cls, "responses"),
        _items(body, "topic_data"),
        error,
        partition_field="partition_responses",
        request_partitions=lambda t: [p.index for p in t.partition_data],
        topic_name=lambda t: {"name": getattr(t, "name", "")},
        partition_key="index",
    )
    return _fill(cls, error, responses=responses)


def _build_describe_groups(cls: type[Any], error: ErrorCode, body: Any) -> Any:
    group_cls = _item(cls, "groups")
    return _fill(cls, error, groups=tuple(_fill(group_cls, error, group_id=g) for g in _items(body, "groups")))


def _build_delete_groups(cls: type[Any], error: ErrorCode, body: Any) -> Any:
    result_cls = _item(cls, "results")
    return _fill(cls, error, results=tuple(_fill(result_cls, error, group_id=g) for g in _items(body, "groups_names")))


def _build_offset_delete(cls: type[Any], error: ErrorCode, body: Any) -> Any:
    topics = _topic_partitions(
        _item(cls, "topics"),
        _items(body, "topics"),
        error,
        request_partitions=_partition_indexes,
        topic_name=_by_name,
    )
    return _fill(cls, error, topics=topics)


def _build_init_producer_id(cls: type[Any], error: ErrorCode, body: Any) -> Any:
    return _fill(cls, error, producer_id=-1, producer_epoch=-1)  # Kafka's NO_PRODUCER_ID / NO_PRODUCER_EPOCH


def _build_api_versions(cls: type[Any], error: ErrorCode, body: Any) -> Any:
    if error is ErrorCode.unsupported_version:
        # Kafka answers an ApiVersions version it does not know in v0 format, with its key list, and clients parse
        # an errored ApiVersions answer as v0 (kafka-python always, Java on failure): see api_versions_error_frame.
        v0 = response_class(ApiKey.API_VERSIONS, 0)
        return _fill(v0, error, api_keys=_api_version_entries(v0))
    return _fill(cls, error, api_keys=())


def _build_create_topics(cls: type[Any], error: ErrorCode, body: Any) -> Any:
    topic_cls = _item(cls, "topics")
    return _fill(cls, error, topics=tuple(_fill(topic_cls, error, name=t.name) for t in _items(body, "topics")))


def _build_delete_topics(cls: type[Any], error: ErrorCode, body: Any) -> Any:
    result_cls = _item(cls, "responses")
    named = [{"name": n} for n in _items(body, "topic_names")]
    named += [{"name": t.name, "topic_id": t.topic_id or uuid_zero} for t in _items(body, "topics")]
    return _fill(cls, error, responses=tuple(_fill(result_cls, error, **n) for n in named))


def _build_name_results(field: str) -> Callable[[type[Any], ErrorCode, Any], Any]:
    def builder(cls: type[Any], error: ErrorCode, body: Any) -> Any:
        result_cls = _item(cls, field)
        return _fill(
            cls, error, **{field: tuple(_fill(result_cls, error, name=t.name) for t in _items(body, "topics"))}
        )

    return builder


def _build_resources(field: str) -> Callable[[type[Any], ErrorCode, Any], Any]:
    def builder(cls: type[Any], error: ErrorCode, body: Any) -> Any:
        result_cls = _item(cls, field)
        results = tuple(
            _fill(result_cls, error, resource_type=r.resource_type, resource_name=r.resource_name, configs=())
            for r in _items(body, "resources")
        )
        return _fill(cls, error, **{field: results})

    return builder


def _build_delete_records(cls: type[Any], error: ErrorCode, body: Any) -> Any:
    topics = _topic_partitions(
        _item(cls, "topics"), _items(body, "topics"), error, request_partitions=_partition_indexes, topic_name=_by_name
    )
    return _fill(cls, error, topics=topics)


def _build_offset_for_leader_epoch(cls: type[Any], error: ErrorCode, body: Any) -> Any:
    topics = _topic_partitions(
        _item(cls, "topics"),
        _items(body, "topics"),
        error,
        request_partitions=lambda t: [p.partition for p in t.partitions],
        topic_name=lambda t: {"topic": t.topic},
        partition_key="partition",
    )
    return _fill(cls, error, topics=topics)


def _build_describe_acls(cls: type[Any], error: ErrorCode, body: Any) -> Any:
    return _fill(cls, error, resources=())


def _build_create_acls(cls: type[Any], error: ErrorCode, body: Any) -> Any:
    result_cls = _item(cls, "results")
    return _fill(cls, error, results=tuple(_fill(result_cls, error) for _ in _items(body, "creations")))


def _build_delete_acls(cls: type[Any], error: ErrorCode, body: Any) -> Any:
    result_cls = _item(cls, "filter_results")
    return _fill(
        cls, error, filter_results=tuple(_fill(result_cls, error, matching_acls=()) for _ in _items(body, "filters"))
    )


def _build_alter_user_scram_credentials(cls: type[Any], error: ErrorCode, body: Any) -> Any:
    result_cls = _item(cls, "results")
    users = dict.fromkeys(c.name for c in (*_items(body, "deletions"), *_items(body, "upsertions")))
    return _fill(cls, error, results=tuple(_fill(result_cls, error, user=u) for u in users))


_BUILDERS: dict[int, Callable[[type[Any], ErrorCode, Any], Any]] = {
    ApiKey.API_VERSIONS: _build_api_versions,
    ApiKey.METADATA: _build_metadata,
    ApiKey.FIND_COORDINATOR: _build_find_coordinator,
    ApiKey.JOIN_GROUP: _build_top_level,
    ApiKey.SYNC_GROUP: _build_top_level,
    ApiKey.HEARTBEAT: _build_top_level,
    ApiKey.LEAVE_GROUP: _build_leave_group,
    ApiKey.OFFSET_COMMIT: _build_offset_commit,
    ApiKey.OFFSET_FETCH: _build_offset_fetch,
    ApiKey.LIST_OFFSETS: _build_list_offsets,
    ApiKey.FETCH: _build_fetch,
    ApiKey.PRODUCE: _build_produce,
    ApiKey.LIST_GROUPS: _build_top_level,
    ApiKey.DESCRIBE_GROUPS: _build_describe_groups,
    ApiKey.DELETE_GROUPS: _build_delete_groups,
    ApiKey.OFFSET_DELETE: _build_offset_delete,
    ApiKey.DESCRIBE_CLUSTER: _build_top_level,
    ApiKey.CREATE_TOPICS: _build_create_topics,
    ApiKey.DELETE_TOPICS: _build_delete_topics,
    ApiKey.DELETE_RECORDS: _build_delete_records,
    ApiKey.OFFSET_FOR_LEADER_EPOCH: _build_offset_for_leader_epoch,
    ApiKey.DESCRIBE_CONFIGS: _build_resources("results"),
    ApiKey.CREATE_PARTITIONS: _build_name_results("results"),
    ApiKey.INCREMENTAL_ALTER_CONFIGS: _build_resources("responses"),
    ApiKey.ALTER_CONFIGS: _build_resources("responses"),
    ApiKey.INIT_PRODUCER_ID: _build_init_producer_id,
    ApiKey.DESCRIBE_ACLS: _build_describe_acls,
    ApiKey.CREATE_ACLS: _build_create_acls,
    ApiKey.DELETE_ACLS: _build_delete_acls,
    ApiKey.DESCRIBE_USER_SCRAM_CREDENTIALS: _build_top_level,
    ApiKey.ALTER_USER_SCRAM_CREDENTIALS: _build_alter_user_scram_credentials,
    ApiKey.SASL_HANDSHAKE: _build_top_level,
    ApiKey.SASL_AUTHENTICATE: _build_top_level,
}


def error_response(api_key: int, api_version: int, error: ErrorCode, request_body: Any | None = None) -> Any:
    """A kio response of that api/version with every error field set to ``error``.

    Exception: ApiVersions with UNSUPPORTED_VERSION is the v0 body whatever the version (``encode_response`` accepts
    it for any ApiVersions request).

    Raises ``ValueError`` for an api this module has no builder for, or a version kio does not know.
    """
    builder = _BUILDERS.get(api_key)
    if builder is None:
        raise ValueError(f"no error response for api key {api_key}")
    return builder(response_class(api_key, api_version), error, request_body)


@typed_cache
def _api_version_entries(cls: type[Any]) -> tuple[Any, ...]:
    entry_cls = _item(cls, "api_keys")
    return tuple(
        entry_cls(api_key=int(k), min_version=lo, max_version=hi) for k, (lo, hi) in sorted(SUPPORTED_VERSIONS.items())
    )


def api_versions_response(api_version: int, throttle_time_ms: int = 0) -> Any:
    """The successful ApiVersions response listing ``SUPPORTED_VERSIONS`` (no features: we are not a KRaft broker)."""
    cls = response_class(ApiKey.API_VERSIONS, api_version)
    extra = {"throttle_time": timedelta(milliseconds=throttle_time_ms)} if _has(cls, "throttle_time") else {}
    return cls(error_code=ErrorCode.none, api_keys=_api_version_entries(cls), **extra)


def unsupported_response_frame(exc: UnsupportedApi) -> bytes | None:
    """The frame answering an unsupported api/version, or ``None`` when the connection must be closed instead.

    ApiVersions gets the v0-format UNSUPPORTED_VERSION answer (clients retry with a version from its list). Another
    api we build error responses for gets UNSUPPORTED_VERSION in that version's format when kio can encode it
    (naming the request's groups/partitions when the body decoded). Anything else: ``None`` — Kafka closes the
    connection on a request it cannot parse.
    """
    if exc.api_key == ApiKey.API_VERSIONS:
        return api_versions_error_frame(exc.correlation_id)
    if exc.api_key not in _BUILDERS:
        return None
    try:
        body = error_response(exc.api_key, exc.api_version, ErrorCode.unsupported_version, exc.body)
    except (ValueError, TypeError, AttributeError):
        return None
    header = RequestHeader(exc.api_key, exc.api_version, exc.correlation_id, exc.client_id)
    return encode_response(header, body)


@typed_cache
def _has_top_level_error(api_key: int, api_version: int) -> bool:
    try:
        cls = response_class(api_key, api_version)
    except ValueError:
        return False
    return any(f.name == "error_code" and f.metadata.get("kafka_type") == "error_code" for f in dataclasses.fields(cls))


def invalid_request_frame(exc: InvalidRequest) -> bytes | None:
    """The INVALID_REQUEST (42) answer to a request with a null the schema does not allow, or ``None`` when that
    api/version's response has no top-level error code (or the api/version is not one we answer): then the connection
    is closed, as Kafka closes it on a request it cannot parse."""
    key, version, correlation_id = exc.api_key, exc.api_version, exc.correlation_id
    if key is None or version is None or correlation_id is None or key not in _BUILDERS:
        return None
    if not _has_top_level_error(key, version):
        return None
    body = error_response(key, version, ErrorCode.invalid_request)
    return encode_response(RequestHeader(key, version, correlation_id, None), body)
