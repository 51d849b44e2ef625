"""The topic admin APIs: CreateTopics (19), DeleteTopics (20), DeleteRecords (21), OffsetForLeaderEpoch (23),
DescribeConfigs (32), AlterConfigs (33), CreatePartitions (37) and IncrementalAlterConfigs (44). The rules and the
errors are in ``broker.admin`` (Kafka's, per entry); this module reads each version's body and builds its answer.

Versions: the ones kio has, up to what the clients we test send (kafka-python 3.0.12 negotiates the highest,
aiokafka 0.14 sends CreateTopics v3 / DeleteTopics v3 / DescribeConfigs v2 / CreatePartitions v1 / DeleteRecords v2,
librdkafka 2.16 CreateTopics v4 / DeleteTopics v1 / DescribeConfigs v1 / IncrementalAlterConfigs v1 / DeleteRecords
v1 / OffsetForLeaderEpoch v2 (a consumer validating its position after a leader change)):

* CreateTopics v2-7 - v5+ answers the partitions, replication factor and configs of each created (or, with
  ``validate_only``, checked) topic; v7 its topic id.
* DeleteTopics v1-6 - v6 names topics by name or by id (UNKNOWN_TOPIC_ID for an unknown id); v5+ messages.
* DeleteRecords v0-2, CreatePartitions v0-3, IncrementalAlterConfigs v0-1, AlterConfigs v0-2 (aiokafka's
  ``alter_configs``: the topic's configs become exactly the ones given).
* DescribeConfigs v1-4 - synonyms when ``include_synonyms``; v3+ ``config_type`` (documentation: null).
* OffsetForLeaderEpoch v2-4 - a consumer's request (v3+ ``replica_id`` -1); a follower's is answered the same.

Requests that change something are answered once their records are durable, and each change is logged at INFO
with who asked (``audit.admin_action``). ``timeout_ms`` is not waited on: one
node has nothing to wait for beyond its own write.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable
from typing import Any

from broker.admin import SET, AlterConfig, ConfigResource, CreateTopic, EntryResult, TopicAdmin
from broker.configs import DescribedConfig
from coordinator.deferred import Deferred
from protocol.errors import ErrorCode
from security.acls import AclOperation, ResourceType
from security.audit import Action

from . import audit
from ._util import response_cls, then
from .acls import allowed, cluster_allowed, denied_topics
from .build import build
from .context import RequestContext, Services


def _admin(services: Services) -> TopicAdmin:
    admin = services.admin
    assert admin is not None, "the topic admin APIs are served only with a broker"
    return admin


def _first_error(ctx: RequestContext, results: list[EntryResult]) -> None:
    for r in results:
        if r.error and not ctx.error:
            ctx.error = r.error


def _wait(ctx: RequestContext, start: Any, answer: Any) -> Any:
    """Run ``start(on_done)`` and answer ``answer(results)`` once it calls back (at once if it already did)."""
    deferred: Deferred[list[EntryResult]] = Deferred()
    start(deferred.resolve)

    def done(results: list[EntryResult]) -> Any:
        _first_error(ctx, results)
        return answer(results)

    return then(deferred, done)


def _checked_wait(
    ctx: RequestContext,
    items: list[Any],
    denied: list[bool],
    start: Callable[[list[Any], Callable[[list[EntryResult]], None]], None],
    answer: Any,
    refusal: Callable[[Any], EntryResult],
) -> Any:
    """``_wait`` with ACLs: the items ``denied`` marks are answered ``refusal(item)`` and not passed to ``start``;
    the results come back in the request's order."""
    if not any(denied):
        return _wait(ctx, lambda done: start(items, done), answer)
    permitted = [x for x, d in zip(items, denied, strict=True) if not d]

    def start_permitted(done: Callable[[list[EntryResult]], None]) -> None:
        def merged(results: list[EntryResult]) -> None:
            it = iter(results)
            done([refusal(x) if d else next(it) for x, d in zip(items, denied, strict=True)])

        if permitted:
            start(permitted, merged)
        else:
            merged([])

    return _wait(ctx, start_permitted, answer)


def _topic_denied(name: str | None) -> EntryResult:
    return EntryResult(ErrorCode.topic_authorization_failed, "Authorization failed.", name=name)


def _denied(services: Services, ctx: RequestContext, operation: AclOperation, names: list[str | None]) -> list[bool]:
    """Per topic name: whether ``operation`` on it is refused (a topic named by id only: refused, authorizer on)."""
    if not services.authorizer.enabled:
        return [False] * len(names)
    return [name is None or not allowed(services, ctx, operation, ResourceType.TOPIC, name) for name in names]


# ------------------------------------------------------------------------------------------------ CreateTopics


def handle_create_topics(services: Services, ctx: RequestContext, body: Any) -> Any:
    topics = [
        CreateTopic(
            t.name,
            int(t.num_partitions),
            int(t.replication_factor),
            [(int(a.partition_index), [int(b) for b in a.broker_ids]) for a in t.assignments],
            [(c.name, c.value) for c in t.configs],
        )
        for t in body.topics
    ]

    validate_only = bool(body.validate_only)

    def answer(results: list[EntryResult]) -> Any:
        if not validate_only:
            for r in results:
                if r.error == ErrorCode.none:
                    audit.admin_action(ctx, None, "topic %s created with %d partitions (CreateTopics)", r.name,
                                       r.partitions, services=services, action=Action.TOPIC_CREATE,
                                       resource=r.name)  # fmt: skip
        return build(response_cls(ctx), {"topics": [_created(r) for r in results]})

    # ACLs: Create on the cluster, else Create on each topic.
    if services.authorizer.enabled and cluster_allowed(services, ctx, AclOperation.CREATE):
        denied = [False] * len(topics)
    else:
        denied = _denied(services, ctx, AclOperation.CREATE, [t.name for t in topics])
    return _checked_wait(
        ctx, topics, denied, lambda ts, done: _admin(services).create_topics(ts, validate_only, done), answer,
        lambda t: _topic_denied(t.name),
    )  # fmt: skip


def _created(r: EntryResult) -> dict[str, Any]:
    ok = r.error == ErrorCode.none
    return {
        "name": r.name,
        "topic_id": (r.topic_id if ok and r.topic_id is not None else uuid.UUID(int=0)),
        "error_code": r.error,
        "error_message": r.message,
        "topic_config_error_code": ErrorCode.none,
        "num_partitions": r.partitions if ok else -1,
        "replication_factor": r.replication_factor if ok else -1,
        "configs": [
            {"name": c.name, "value": c.value, "read_only": False, "config_source": c.source, "is_sensitive": False}
            for c in r.configs
        ]
        if ok
        else None,
    }


# ------------------------------------------------------------------------------------------------ DeleteTopics


def handle_delete_topics(services: Services, ctx: RequestContext, body: Any) -> Any:
    if hasattr(body, "topics"):  # v6: by name or by id
        names: list[str | None] = [t.name for t in body.topics]
        ids: list[uuid.UUID | None] = [t.topic_id for t in body.topics]
    else:
        names = list(body.topic_names)
        ids = [None] * len(names)

    def answer(results: list[EntryResult]) -> Any:
        for r in results:
            if r.error == ErrorCode.none:
                audit.admin_action(ctx, None, "topic %s deleted (DeleteTopics)", r.name, services=services,
                                   action=Action.TOPIC_DELETE, resource=r.name)  # fmt: skip
        responses = [
            {
                "name": r.name if r.name is not None or hasattr(body, "topics") else "",
                "topic_id": r.topic_id or uuid.UUID(int=0),
                "error_code": r.error,
                "error_message": r.message,
            }
            for r in results
        ]
        return build(response_cls(ctx), {"responses": responses})

    def start(items: list[tuple[str | None, uuid.UUID | None]], done: Callable[[list[EntryResult]], None]) -> None:
        _admin(services).delete_topics([n for n, _ in items], [i for _, i in items], done)

    denied = _denied(services, ctx, AclOperation.DELETE, names)  # ACLs: Delete on each topic
    return _checked_wait(ctx, list(zip(names, ids, strict=True)), denied, start, answer, lambda x: _topic_denied(x[0]))


# ------------------------------------------------------------------------------------------------ CreatePartitions


def handle_create_partitions(services: Services, ctx: RequestContext, body: Any) -> Any:
    topics = [
        (
            t.name,
            int(t.count),
            None if t.assignments is None else [[int(b) for b in a.broker_ids] for a in t.assignments],
        )
        for t in body.topics
    ]

    validate_only = bool(body.validate_only)

    def answer(results: list[EntryResult]) -> Any:
        for r, (_name, count, _) in zip(results, topics, strict=True):
            if r.error == ErrorCode.none and not validate_only:
                audit.admin_action(ctx, None, "topic %s grown to %d partitions (CreatePartitions)", r.name, count,
                                   services=services, action=Action.TOPIC_GROW, resource=r.name)  # fmt: skip
        return build(
            response_cls(ctx),
            {"results": [{"name": r.name, "error_code": r.error, "error_message": r.message} for r in results]},
        )

    denied = _denied(services, ctx, AclOperation.ALTER, [t[0] for t in topics])  # ACLs: Alter on each topic
    return _checked_wait(
        ctx, topics, denied, lambda ts, done: _admin(services).create_partitions(ts, validate_only, done), answer,
        lambda t: _topic_denied(t[0]),
    )  # fmt: skip


# ------------------------------------------------------------------------------------------------ configs


def handle_describe_configs(services: Services, ctx: RequestContext, body: Any) -> Any:
    resources = [
        ConfigResource(
            int(r.resource_type),
            r.resource_name,
            names=None if r.configuration_keys is None else list(r.configuration_keys),
        )
        for r in body.resources
    ]
    denied = _config_denied(services, ctx, AclOperation.DESCRIBE_CONFIGS, resources)  # ACLs
    if any(denied):
        it = iter(_admin(services).describe_configs([r for r, d in zip(resources, denied, strict=True) if not d]))
        results = [_config_refusal(r) if d else next(it) for r, d in zip(resources, denied, strict=True)]
    else:
        results = _admin(services).describe_configs(resources)
    _first_error(ctx, results)
    synonyms = bool(getattr(body, "include_synonyms", False))
    return build(
        response_cls(ctx),
        {
            "results": [
                {
                    "error_code": r.error,
                    "error_message": r.message,
                    "resource_type": res.resource_type,
                    "resource_name": res.name,
                    "configs": [_described(c, synonyms) for c in r.configs],
                }
                for r, res in zip(results, resources, strict=True)
            ]
        },
    )


def _described(c: DescribedConfig, synonyms: bool) -> dict[str, Any]:
    return {
        "name": c.name,
        "value": c.value,
        "read_only": False,
        "config_source": c.source,
        "is_sensitive": False,
        "synonyms": [{"name": n, "value": v, "source": s} for n, v, s in c.synonyms] if synonyms else [],
        "config_type": c.config_type,
        "documentation": None,
    }


def handle_incremental_alter_configs(services: Services, ctx: RequestContext, body: Any) -> Any:
    return _alter_configs(services, ctx, body, replace=False)


def handle_alter_configs(services: Services, ctx: RequestContext, body: Any) -> Any:
    """AlterConfigs (33): the older, non-incremental API (aiokafka's ``alter_configs``)."""
    return _alter_configs(services, ctx, body, replace=True)


def _alter_configs(services: Services, ctx: RequestContext, body: Any, *, replace: bool) -> Any:
    resources = [
        ConfigResource(
            int(r.resource_type),
            r.resource_name,
            [AlterConfig(c.name, int(getattr(c, "config_operation", SET)), c.value) for c in r.configs],
        )
        for r in body.resources
    ]

    validate_only = bool(body.validate_only)

    def answer(results: list[EntryResult]) -> Any:
        for r, res in zip(results, resources, strict=True):
            if r.error == ErrorCode.none and not validate_only:
                changes = ", ".join(
                    f"{c.name}={c.value}" if c.op == SET else f"{c.name} op {c.op}" for c in res.configs
                )
                audit.admin_action(ctx, None, "topic %s configs changed: %s", r.name, changes or "reset",
                                   services=services, action=Action.TOPIC_CONFIGS, resource=r.name)  # fmt: skip
        return build(
            response_cls(ctx),
            {
                "responses": [
                    {
                        "error_code": r.error,
                        "error_message": r.message,
                        "resource_type": res.resource_type,
                        "resource_name": res.name,
                    }
                    for r, res in zip(results, resources, strict=True)
                ]
            },
        )

    denied = _config_denied(services, ctx, AclOperation.ALTER_CONFIGS, resources)  # ACLs
    return _checked_wait(
        ctx, resources, denied,
        lambda rs, done: _admin(services).alter_configs(rs, validate_only, done, replace=replace), answer,
        lambda r: _config_refusal(r),
    )  # fmt: skip


def _config_denied(
    services: Services, ctx: RequestContext, operation: AclOperation, resources: list[ConfigResource]
) -> list[bool]:
    """ACLs of the config APIs, per resource as Kafka checks them: ``operation`` on the topic (resource type 2), on
    the cluster (a broker 4, a broker logger 8, client metrics 16), on the group (32). Other types are not checked:
    they are answered INVALID_REQUEST whoever asks."""
    if not services.authorizer.enabled:
        return [False] * len(resources)
    return [_config_resource_denied(services, ctx, operation, r) for r in resources]


def _config_resource_denied(
    services: Services, ctx: RequestContext, operation: AclOperation, r: ConfigResource
) -> bool:
    if r.resource_type == _TOPIC:
        return not allowed(services, ctx, operation, ResourceType.TOPIC, r.name)
    if r.resource_type in _CLUSTER_CONFIGS:
        return not cluster_allowed(services, ctx, operation)
    if r.resource_type == _GROUP:
        return not allowed(services, ctx, operation, ResourceType.GROUP, r.name)
    return False


def _config_refusal(r: ConfigResource) -> EntryResult:
    if r.resource_type in _CLUSTER_CONFIGS:
        return EntryResult(ErrorCode.cluster_authorization_failed, "Authorization failed.", name=r.name)
    if r.resource_type == _GROUP:
        return EntryResult(ErrorCode.group_authorization_failed, "Authorization failed.", name=r.name)
    return _topic_denied(r.name)


# ConfigResource.Type: TOPIC 2, BROKER 4, BROKER_LOGGER 8, CLIENT_METRICS 16, GROUP 32
_TOPIC, _BROKER, _GROUP = 2, 4, 32
_CLUSTER_CONFIGS = frozenset({_BROKER, 8, 16})


# ------------------------------------------------------------------------------------------------ records


def handle_delete_records(services: Services, ctx: RequestContext, body: Any) -> Any:
    entries = [(t.name, int(p.partition_index), int(p.offset)) for t in body.topics for p in t.partitions]

    def answer(results: list[EntryResult]) -> Any:
        for (topic, index, _), r in zip(entries, results, strict=True):
            if r.error == ErrorCode.none:
                audit.admin_action(ctx, None, "records of %s-%d deleted below %d (DeleteRecords)", topic, index,
                                   r.partitions, throttle=True, services=services, action=Action.RECORDS_DELETE,
                                   resource=f"{topic}-{index}")  # fmt: skip
        it = iter(results)
        topics = []
        for t in body.topics:
            parts = []
            for p in t.partitions:
                r = next(it)
                parts.append(
                    {
                        "partition_index": p.partition_index,
                        "low_watermark": r.partitions if r.error == ErrorCode.none else -1,
                        "error_code": r.error,
                    }
                )
            topics.append({"name": t.name, "partitions": parts})
        return build(response_cls(ctx), {"topics": topics})

    denied = _denied(services, ctx, AclOperation.DELETE, [e[0] for e in entries])  # ACLs: Delete on each topic
    return _checked_wait(
        ctx, entries, denied, lambda es, done: _admin(services).delete_records(es, done), answer,
        lambda e: _topic_denied(e[0]),
    )  # fmt: skip


def handle_offset_for_leader_epoch(services: Services, ctx: RequestContext, body: Any) -> Any:
    admin = _admin(services)
    topics = []
    denied = denied_topics(services, ctx, AclOperation.DESCRIBE, {t.topic for t in body.topics})  # ACLs
    for t in body.topics:
        parts = []
        for p in t.partitions:
            current = int(getattr(p, "current_leader_epoch", -1))
            if t.topic in denied:
                error, epoch, end = ErrorCode.topic_authorization_failed, -1, -1
            else:
                error, epoch, end = admin.offset_for_leader_epoch(
                    t.topic, int(p.partition), current, int(p.leader_epoch)
                )
            if error and not ctx.error:
                ctx.error = error
            parts.append({"error_code": error, "partition": p.partition, "leader_epoch": epoch, "end_offset": end})
        topics.append({"topic": t.topic, "partitions": parts})
    return build(response_cls(ctx), {"topics": topics})
