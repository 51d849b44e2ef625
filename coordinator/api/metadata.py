"""Metadata (3), v0-12: this node is the only broker, the controller and the leader of every partition.

Requested topics that do not exist are created when ``auto.create.topics.enable`` is on and the request allows it
(v4+ ``allow_auto_topic_creation``), else answered with UNKNOWN_TOPIC_OR_PARTITION. A topic asked for by id only
(KIP-848 clients, v10+) is resolved through the registry; an unknown id gets UNKNOWN_TOPIC_ID. ``topics = null`` (v1+)
means every topic; v0's empty list means every topic too.
"""

from __future__ import annotations

import uuid
from typing import Any

from coordinator.topics import Topic, is_legal_topic_name
from protocol.errors import ErrorCode

from ._util import response_cls
from .build import build
from .context import RequestContext, Services

_NULL_UUID = uuid.UUID(int=0)


def _topic_entry(topic: Topic, node_id: int) -> dict[str, Any]:
    return {
        "error_code": ErrorCode.none,
        "name": topic.name,
        "topic_id": topic.topic_id,
        "is_internal": False,
        "partitions": [
            {
                "error_code": ErrorCode.none,
                "partition_index": p,
                "leader_id": node_id,
                "leader_epoch": 0,
                "replica_nodes": (node_id,),
                "isr_nodes": (node_id,),
                "offline_replicas": (),
            }
            for p in range(topic.partitions)
        ],
    }


def _error_entry(name: str | None, topic_id: uuid.UUID | None, error: ErrorCode) -> dict[str, Any]:
    return {
        "error_code": error,
        "name": name,
        "topic_id": topic_id or _NULL_UUID,
        "is_internal": False,
        "partitions": [],
    }


def handle_metadata(services: Services, ctx: RequestContext, body: Any) -> Any:
    node = services.node
    registry = services.topics
    requested = body.topics
    allow_create = getattr(body, "allow_auto_topic_creation", True)
    entries: list[dict[str, Any]] = []
    if requested is None or (ctx.api_version == 0 and not requested):
        entries = [_topic_entry(t, node.node_id) for t in registry.all()]
    else:
        for item in requested:
            name = item.name
            topic_id = getattr(item, "topic_id", None)
            if name is None:
                by_id = registry.by_id(topic_id) if topic_id is not None and topic_id != _NULL_UUID else None
                if by_id is None:
                    entries.append(_error_entry(None, topic_id, ErrorCode.unknown_topic_id))
                else:
                    entries.append(_topic_entry(by_id, node.node_id))
                continue
            topic = registry.maybe_auto_create(name, allow_create)
            if topic is None:
                error = ErrorCode.unknown_topic_or_partition
                if registry.auto_create and allow_create and not is_legal_topic_name(name):
                    error = ErrorCode.invalid_topic_exception  # what Kafka answers when it refuses to create it
                entries.append(_error_entry(name, None, error))
            else:
                entries.append(_topic_entry(topic, node.node_id))
    return build(
        response_cls(ctx),
        {
            "brokers": [{"node_id": node.node_id, "host": node.host, "port": node.port, "rack": node.rack}],
            "cluster_id": node.cluster_id,
            "controller_id": node.node_id,
            "topics": entries,
        },
    )
