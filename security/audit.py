"""The audit record: one admin action, with who did it (issue #19, point 6).

Kafka logs who did what in its ``kafka.request.logger`` and the authorizer log; it keeps no queryable history of
admin actions. Here each admin action - over the operator HTTP API or the Kafka admin APIs - becomes one
``AdminAction`` record, appended to the record log like any other record (the same batched, durable write path) and
stored in ``admin_actions`` (``storage/README.md``): the history shows it, the dashboard lists it, and the Spark report
tells an admin's offset reset from a consumer's rewind with it.

The actor is Kafka's triple: the principal (``User:<name>``, ``User:ANONYMOUS`` for a client that did not
authenticate, ``token`` for the operator API's legacy single token), the client id (Kafka's request header client
id; the HTTP User-Agent) and the client's host.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum


class Via(StrEnum):
    HTTP = "http"  # the operator API (and kgc, its client)
    KAFKA = "kafka"  # a Kafka admin API


class Action(StrEnum):
    """What was done; ``resource`` names what it was done to (a group, a topic, a user, an ACL filter)."""

    GROUP_DELETE = "group.delete"
    MEMBER_REMOVE = "member.remove"
    OFFSETS_RESET = "offsets.reset"  # the operator API's reset (an admin OffsetCommit)
    OFFSETS_ALTER = "offsets.alter"  # an OffsetCommit with generation -1 and no member (alter_consumer_group_offsets)
    OFFSETS_DELETE = "offsets.delete"
    TOPIC_CREATE = "topic.create"
    TOPIC_DELETE = "topic.delete"
    TOPIC_GROW = "topic.grow"
    TOPIC_CONFIGS = "topic.configs"
    RECORDS_DELETE = "records.delete"
    ACL_CREATE = "acl.create"
    ACL_DELETE = "acl.delete"
    USER_ALTER = "user.alter"
    USER_DELETE = "user.delete"


@dataclass(frozen=True, slots=True)
class AdminAction:
    timestamp_ms: int
    via: Via
    action: Action
    resource: str  # the group id, topic name, user name, ...
    group_id: str | None  # the group acted on, when there is one (the history of that group shows the action)
    principal: str
    client_id: str | None
    client_host: str | None
    detail: str  # what was done, in words (the log line's message)
