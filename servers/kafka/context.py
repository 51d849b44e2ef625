"""What an API adapter gets: the request's context and the services it may use.

``CoordinatorApi`` is the part of ``coordinator.group_coordinator.GroupCoordinator`` the adapters call; it is a
Protocol so the adapters depend on the facade's shape, not on its construction.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

from broker.admin import TopicAdmin
from broker.partitions import Broker
from broker.topics import TopicRegistry
from coordinator import messages as m
from coordinator.deferred import Deferred
from protocol.errors import ErrorCode
from runtime.audit_trail import AuditTrail
from security.acls import AclBinding, Authorizer
from security.users import UserStore


@dataclass(slots=True)  # not frozen: built for every request, and a frozen __init__ costs twice as much
class RequestContext:
    api_key: int
    api_version: int
    correlation_id: int
    client_id: str
    client_host: str
    # The answer's error for kgc_requests_total where the answer cannot say it itself: set by an adapter that answers
    # with a finished frame (bytes), or whose answer has per-entry errors (the first non-zero one, in response
    # order), and by ``errors.error_body``. The server reports a kio body's top-level ``error_code`` first.
    error: int = 0
    # Who sent it (Kafka's KafkaPrincipal as "<type>:<name>"): User:ANONYMOUS until the connection authenticates
    # (SASL, or an mTLS client certificate); the authorizer checks ACLs against it, the audit records it.
    principal: str = "User:ANONYMOUS"
    # This node as the listener the request came in on advertises it (``listeners``); None: ``Services.node``.
    # Metadata, FindCoordinator and DescribeCluster answer with it (``node_of``).
    node: Node | None = None
    # The (group, member id) pairs JoinGroup gave this connection (``Connection.joined``): a LeaveGroup naming one of
    # them is the member leaving itself, any other an admin removal (``membership.handle_leave_group``). None: not
    # tracked (a context built outside a connection): every LeaveGroup by member id is the member leaving.
    joined: set[tuple[str, str]] | None = None


@dataclass(frozen=True, slots=True)
class Node:
    """This process as a Kafka broker: the only node, leader of everything, coordinator of every group."""

    node_id: int
    host: str
    port: int
    cluster_id: str = "kgc-cluster"
    rack: str | None = None


def node_of(services: Services, ctx: RequestContext) -> Node:
    """The node a client is told about: the one of the listener it came in on."""
    return ctx.node or services.node


class CoordinatorApi(Protocol):
    def join_group(self, request: m.JoinGroupRequest) -> Deferred[m.JoinGroupResult]: ...

    def sync_group(self, request: m.SyncGroupRequest) -> Deferred[m.SyncGroupResult]: ...

    def heartbeat(self, request: m.HeartbeatRequest) -> ErrorCode: ...

    def heartbeat_fields(
        self, group_id: str, generation_id: int, member_id: str, instance_id: str | None
    ) -> ErrorCode: ...

    def heartbeat_at(
        self, now_ms: int, group_id: str, generation_id: int, member_id: str, instance_id: str | None
    ) -> ErrorCode: ...

    def monotonic_ms(self) -> int: ...

    def leave_group(self, request: m.LeaveGroupRequest) -> Deferred[m.LeaveGroupResult]: ...

    def commit_offsets(self, request: m.OffsetCommitRequest) -> Deferred[m.OffsetCommitResult]: ...

    def fetch_offsets(self, request: m.OffsetFetchRequest) -> m.OffsetFetchResult: ...

    def delete_offsets(self, request: m.OffsetDeleteRequest) -> Deferred[m.OffsetDeleteResult]: ...

    def list_groups(self, states_filter: list[str], types_filter: list[str]) -> list[m.ListedGroup]: ...

    def describe_groups(self, group_ids: list[str | None]) -> list[m.DescribedGroup]: ...

    def delete_groups(self, group_ids: list[str | None]) -> Deferred[list[m.DeleteGroupResult]]: ...


class BatchSource(Protocol):
    """Where Fetch reads batch bytes the broker does not keep in memory (``storage.SqlRecordLog``)."""

    async def read_batches(self, topic: str, partition: int, first_base: int, last_base: int) -> list[bytes]: ...


class AclStore(Protocol):
    """Where CreateAcls / DeleteAcls make their changes durable before answering (``storage.acls.SqlAclStore``)."""

    async def create(self, bindings: Sequence[AclBinding]) -> None: ...

    async def delete(self, bindings: Sequence[AclBinding]) -> None: ...


class RequestObserver(Protocol):
    def __call__(self, api_key: int, seconds: float | None, error: int = 0, requests: int = 1) -> None: ...


@dataclass(slots=True)
class Services:
    coordinator: CoordinatorApi
    topics: TopicRegistry
    node: Node
    supported_versions: dict[int, tuple[int, int]] = field(default_factory=dict)
    max_fetch_wait_ms: int = 30_000  # cap on a Fetch's max_wait (a client cannot defer an answer for ever)
    closing: bool = False
    # called with (api_key, seconds from decode to answer[, error, requests]) once per answered request, or once per
    # ``requests`` answered requests of which this one was timed (Heartbeat), or with seconds None for an answer
    # counted but not timed (a Heartbeat refused with an error); e.g. Metrics.observe_request
    observe_request: RequestObserver | None = None
    # called with (request, error) when a JoinGroup is answered with one of ``runtime.activity.JOIN_REFUSALS`` (a
    # refusal changes no state, so no record tells of it); e.g. GroupActivity.join_refused
    on_join_refused: Callable[[m.JoinGroupRequest, ErrorCode], None] | None = None
    # The data path (Produce, Fetch, ListOffsets): the broker core, and the stored batches when it keeps no bytes.
    broker: Broker | None = None
    batches: BatchSource | None = None
    # The topic admin APIs (CreateTopics, DeleteTopics, DescribeConfigs, DeleteRecords, ...) over that broker.
    admin: TopicAdmin | None = None
    # ACLs (issue #19): the authorizer every adapter asks (off by default: everything allowed, as before), and the
    # store CreateAcls / DeleteAcls write through (None: ACLs kept in memory only).
    authorizer: Authorizer = field(default_factory=Authorizer)
    acl_store: AclStore | None = None
    # Admin actions with their actor (servers.kafka.audit.admin_action records them here; runtime.audit_trail).
    audit: AuditTrail | None = None
    # SCRAM credentials (DescribeUserScramCredentials, AlterUserScramCredentials; the SASL exchanges look users up)
    users: UserStore | None = None


# A handler returns the kio response body, a finished frame (bytes), or an awaitable of either for requests whose
# answer is deferred (JoinGroup, SyncGroup, Fetch, and anything waiting for a durable write): a
# ``_util.DeferredAnswer`` around the core's ``Deferred``, or a coroutine (run as a task).
Handler = Callable[[Services, RequestContext, Any], Any | Awaitable[Any]]
