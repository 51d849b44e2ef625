"""The operator API's handlers and its endpoint table (the OpenAPI document is generated from the table).

Handlers read the live core on the event loop that runs it (the core is single-threaded; so is this). Actions go
through the core so they are validated, durable and recorded like any client request: deleting a group writes its
tombstone (cause ``deleted``), removing a static member writes ``MemberRemoved(cause=admin)`` and a rebalance with
cause ``admin_action``, resetting offsets is an admin OffsetCommit (generation -1, no member id) in the commit log.
"""

from __future__ import annotations

import asyncio
import logging
import types
import typing
from collections.abc import Awaitable, Callable
from datetime import UTC, datetime
from functools import partial
from typing import Any, TypeVar

from aiohttp import web
from pydantic import BaseModel, TypeAdapter, ValidationError

from broker.admin import (
    DELETE,
    SET,
    TOPIC_RESOURCE,
    AlterConfig,
    ConfigResource,
    EntryResult,
    TopicAdmin,
    describe_configs_of,
)
from broker.topics import is_internal_topic
from coordinator.group import ClassicGroup, GroupState, Member
from coordinator.messages import OffsetCommitPartition, OffsetCommitRequest, OffsetDeleteRequest
from protocol.consumer_protocol import assignment_partitions, subscription_topics
from protocol.errors import ErrorCode
from runtime.lag import GroupLag, group_lag
from runtime.lag_evaluation import GroupStatus
from runtime.metrics import CONTENT_TYPE_LATEST
from security.audit import Action, AdminAction

from . import audit, keys
from .access import Role
from .deps import CoreFacade, DeferredTimeout, wait_deferred
from .history import HistoryUnavailable, in_range
from .models import (
    OFFSET_RESET_REQUEST,
    Attention,
    AttentionItem,
    AttentionKind,
    AttentionQuery,
    AttentionThresholds,
    AuditEntry,
    AuditLog,
    AuditQuery,
    CommitLog,
    CommittedOffset,
    DeletedGroup,
    DeletedOffsets,
    ErrorBody,
    GroupDetail,
    GroupEventKind,
    GroupEvents,
    GroupEventSource,
    GroupEventView,
    GroupHealth,
    GroupLagSummary,
    GroupLagView,
    GroupList,
    GroupOffsets,
    GroupsQuery,
    GroupStateName,
    GroupSummary,
    Health,
    LagList,
    MemberView,
    OffsetResetRequest,
    OffsetResetResult,
    OffsetsDelete,
    PartitionDeletion,
    PartitionLagView,
    PartitionLog,
    Readiness,
    RebalanceHistory,
    RemovedMember,
    ResetByDuration,
    ResetStrategy,
    ResetToDatetime,
    TimeRangeQuery,
    TopicConfigChange,
    TopicCreate,
    TopicDeleted,
    TopicList,
    TopicView,
)
from .openapi import Endpoint
from .reset import LogOffsets, ResetError, plan_reset, select_partitions
from .status_models import GroupStatusQuery, GroupStatusView, group_status_view

log = logging.getLogger(__name__)

M = TypeVar("M", bound=BaseModel)
T = TypeVar("T")
Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]

ADMIN_REASON = "operator API"
# Errors an action can get back from the core, as HTTP statuses.
_ACTION_STATUS: dict[ErrorCode, int] = {
    ErrorCode.group_id_not_found: 404,
    ErrorCode.unknown_member_id: 404,
    ErrorCode.invalid_group_id: 400,
    ErrorCode.non_empty_group: 409,
    ErrorCode.rebalance_in_progress: 409,
    ErrorCode.illegal_generation: 409,
    ErrorCode.fenced_instance_id: 409,
    ErrorCode.offset_metadata_too_large: 400,
}


# ------------------------------------------------------------------------------------------------------- helpers


def json_error(status: int, message: str, details: list[dict[str, Any]] | None = None) -> web.HTTPException:
    body = ErrorBody(error=message, status=status, details=details).model_dump_json(exclude_none=True)
    exc = web.HTTPException(text=body, content_type="application/json")
    exc.set_status(status)
    return exc


def respond(model: BaseModel, status: int = 200) -> web.Response:
    return web.Response(text=model.model_dump_json(), status=status, content_type="application/json")


def _validation_details(e: ValidationError) -> list[dict[str, Any]]:
    return [
        {"loc": [str(p) for p in err["loc"]], "msg": err["msg"], "type": err["type"]}
        for err in e.errors(include_url=False, include_context=False, include_input=False)
    ]


def _is_list_field(annotation: Any) -> bool:
    if typing.get_origin(annotation) is list:
        return True
    if typing.get_origin(annotation) in (typing.Union, types.UnionType):
        return any(typing.get_origin(a) is list for a in typing.get_args(annotation))
    return False


def parse_query(request: web.Request, model: type[M]) -> M:
    raw: dict[str, Any] = {}
    for name, info in model.model_fields.items():
        if name not in request.query:
            continue
        if _is_list_field(info.annotation):
            raw[name] = [v for value in request.query.getall(name) for v in value.split(",") if v]
        else:
            raw[name] = request.query[name]
    try:
        return model.model_validate(raw)
    except ValidationError as e:
        raise json_error(400, "invalid query parameters", _validation_details(e)) from None


async def parse_body(request: web.Request, model: type[M] | TypeAdapter[M]) -> M:
    # Only JSON: a browser can send text/plain or form bodies cross-site without a CORS preflight, JSON it cannot.
    if request.content_type != "application/json":
        raise json_error(415, "the body must be JSON (Content-Type: application/json)")
    raw = await request.read()
    if not raw:
        raise json_error(400, "a JSON body is required")
    try:
        if isinstance(model, TypeAdapter):
            return model.validate_json(raw)
        return model.model_validate_json(raw)
    except ValidationError as e:
        raise json_error(400, "invalid request body", _validation_details(e)) from None


def epoch_ms(dt: datetime | None) -> int | None:
    if dt is None:
        return None
    if dt.tzinfo is None:
        dt = dt.replace(tzinfo=UTC)  # naive instants are UTC
    return int(dt.timestamp() * 1000)


async def read_history(awaitable: Awaitable[T]) -> T:
    try:
        return await awaitable
    except HistoryUnavailable as e:
        raise json_error(503, f"history unavailable: {e}") from None


async def await_core(request: web.Request, d: Any, what: str) -> Any:
    try:
        return await wait_deferred(d, request.app[keys.DEFERRED_TIMEOUT_S])
    except DeferredTimeout:
        raise json_error(503, f"{what}: the storage did not answer in time") from None


def _group(request: web.Request) -> tuple[str, ClassicGroup | None]:
    gid = request.match_info["group"]
    return gid, request.app[keys.CORE].groups.group(gid)


def _state(group: ClassicGroup) -> GroupStateName:
    return GroupStateName(group.state.value)


# ------------------------------------------------------------------------------------------------------- groups


async def list_groups(request: web.Request) -> web.Response:
    q = parse_query(request, GroupsQuery)
    states = set(q.state) if q.state else None
    groups = []
    for g in request.app[keys.CORE].groups.all_groups():
        if states is not None and _state(g) not in states:
            continue
        if q.protocol_type is not None and (g.protocol_type or "") != q.protocol_type:
            continue
        groups.append(g)
    groups.sort(key=lambda g: g.group_id)
    page = groups[q.offset : q.offset + q.limit]
    lag = request.app[keys.LAG]  # evaluated for the page only: partitions x intervals per group
    return respond(
        GroupList(
            groups=[
                GroupSummary(
                    group_id=g.group_id,
                    state=_state(g),
                    protocol_type=g.protocol_type or "",
                    protocol=g.protocol_name,
                    generation_id=g.generation_id,
                    members=len(g.members),
                    status=lag.evaluate(g.group_id).status if lag.knows(g.group_id) else None,
                )
                for g in page
            ],
            total=len(groups),
            limit=q.limit,
            offset=q.offset,
        )
    )


def member_view(group: ClassicGroup, m: Member, now_monotonic_ms: int) -> MemberView:
    view = MemberView(
        member_id=m.member_id,
        group_instance_id=m.group_instance_id,
        client_id=m.client_id,
        client_host=m.client_host,
        session_timeout_ms=m.session_timeout_ms,
        rebalance_timeout_ms=m.rebalance_timeout_ms,
        since_last_heartbeat_ms=max(0, now_monotonic_ms - m.last_heartbeat_monotonic_ms),
        protocols=m.protocol_names(),
    )
    if group.uses_consumer_protocol():
        # The selected protocol's metadata once there is one, else the member's preferred protocol's.
        name = group.protocol_name if group.protocol_name is not None else (m.protocols[0][0] if m.protocols else None)
        try:
            if name is not None:
                view.subscription = subscription_topics(m.metadata(name))
            view.assignment = assignment_partitions(m.assignment)
        except (ValueError, KeyError) as e:
            view.decode_error = str(e) or type(e).__name__
    return view


async def get_group(request: web.Request) -> web.Response:
    gid, group = _group(request)
    if group is None:
        raise json_error(404, f"unknown group {gid!r}")
    now = request.app[keys.CLOCK].monotonic_ms()
    return respond(
        GroupDetail(
            group_id=gid,
            state=_state(group),
            state_since_ms=group.state_timestamp_ms,
            protocol_type=group.protocol_type or "",
            protocol=group.protocol_name,
            generation_id=group.generation_id,
            leader=group.leader_id,
            members=[member_view(group, m, now) for m in group.members.values()],
            lag=lag_view(_lag(request, gid, group)),
        )
    )


# ---------------------------------------------------------------------------------------------------------- lag


def _lag(request: web.Request, gid: str, group: ClassicGroup | None) -> GroupLag:
    core = request.app[keys.CORE]
    return group_lag(
        gid, core.offsets.committed(gid), group, request.app[keys.BROKER], request.app[keys.CLOCK].now_ms()
    )


def lag_view(lag: GroupLag) -> GroupLagView:
    return GroupLagView(
        group=lag.group_id,
        now_ms=lag.now_ms,
        total_lag=lag.total_lag,
        max_lag_ms=lag.max_lag_ms,
        partitions=[
            PartitionLagView(
                topic=p.topic, partition=p.partition, committed_offset=p.committed_offset,
                log_start_offset=p.log_start_offset, log_end_offset=p.log_end_offset, lag=p.lag, lag_ms=p.lag_ms,
                member_id=p.member_id, client_id=p.client_id, host=p.host,
            )
            for p in lag.partitions
        ],
    )  # fmt: skip


async def get_group_lag(request: web.Request) -> web.Response:
    gid, group = _group(request)
    lag = _lag(request, gid, group)
    if group is None and not lag.partitions:
        raise json_error(404, f"unknown group {gid!r}")
    return respond(lag_view(lag))


async def list_lag(request: web.Request) -> web.Response:
    """Every group's totals, computed now (one pass over the live groups and their committed partitions)."""
    now = request.app[keys.CLOCK].now_ms()
    out = []
    for g in sorted(request.app[keys.CORE].groups.all_groups(), key=lambda g: g.group_id):
        lag = _lag(request, g.group_id, g)
        out.append(GroupLagSummary(
            group=g.group_id, state=_state(g), total_lag=lag.total_lag, max_lag=lag.max_lag,
            max_lag_ms=lag.max_lag_ms, partitions=len(lag.partitions),
        ))  # fmt: skip
    return respond(LagList(now_ms=now, groups=out))


async def get_offsets(request: web.Request) -> web.Response:
    gid, group = _group(request)
    committed = request.app[keys.CORE].offsets.committed(gid)
    if group is None and not committed:
        raise json_error(404, f"unknown group {gid!r}")
    offsets = [
        CommittedOffset(
            topic=topic,
            partition=partition,
            offset=o.offset,
            leader_epoch=o.leader_epoch,
            metadata=o.metadata,
            commit_timestamp_ms=o.commit_timestamp_ms,
            expire_timestamp_ms=o.expire_timestamp_ms,
        )
        for (topic, partition), o in sorted(committed.items())
    ]
    return respond(GroupOffsets(group_id=gid, offsets=offsets))


async def get_commits(request: web.Request) -> web.Response:
    gid, group = _group(request)
    q = parse_query(request, TimeRangeQuery)
    commits, total = await read_history(
        request.app[keys.HISTORY].commits(gid, epoch_ms(q.since), epoch_ms(q.until), q.limit, q.offset)
    )
    if total == 0 and group is None and not request.app[keys.CORE].offsets.committed(gid):
        raise json_error(404, f"unknown group {gid!r}")
    return respond(CommitLog(group_id=gid, commits=commits, total=total, limit=q.limit, offset=q.offset))


async def get_rebalances(request: web.Request) -> web.Response:
    gid, group = _group(request)
    q = parse_query(request, TimeRangeQuery)
    views, total = await read_history(
        request.app[keys.HISTORY].rebalances(gid, epoch_ms(q.since), epoch_ms(q.until), q.limit, q.offset)
    )
    if total == 0 and group is None:
        raise json_error(404, f"unknown group {gid!r}")
    return respond(RebalanceHistory(group_id=gid, rebalances=views, total=total, limit=q.limit, offset=q.offset))


async def get_group_status(request: web.Request) -> web.Response:
    """Burrow's evaluation of the group's commit windows against the log end of now (``docs/consumer-status.md``)."""
    gid, group = _group(request)
    q = parse_query(request, GroupStatusQuery)
    lag = request.app[keys.LAG]
    if not lag.knows(gid) and group is None:
        raise json_error(404, f"unknown group {gid!r}")
    ev = lag.evaluate(gid)
    view = group_status_view(ev, lag.rules.intervals, all_partitions=q.all)
    if not lag.knows(gid):  # a live group that has committed nothing: Burrow's answer for a group without partitions
        view.status = GroupStatus.OK
    return respond(view)


# ----------------------------------------------------------------------------------------------- needs attention

_SEVERITY = list(AttentionKind)  # most urgent first
_REBALANCING = (GroupState.PREPARING_REBALANCE, GroupState.COMPLETING_REBALANCE)


def _commit_times(core: CoreFacade, group_id: str) -> list[int]:
    return [o.commit_timestamp_ms for o in core.offsets.committed(group_id).values()]


def _duration(ms: int) -> str:
    return f"{ms / 1000:.1f} s" if ms < 120_000 else f"{ms / 60_000:.1f} min"


async def get_attention(request: web.Request) -> web.Response:
    """One pass over the live groups and their members (no history read): the numbers come from the core and from
    ``runtime.activity.GroupActivity`` (bounded, in memory)."""
    q = parse_query(request, AttentionQuery)
    core = request.app[keys.CORE]
    activity = request.app[keys.ACTIVITY]
    clock = request.app[keys.CLOCK]
    now, mono = clock.now_ms(), clock.monotonic_ms()
    hour_ago = now - 3_600_000
    items: list[AttentionItem] = []
    healths: list[GroupHealth] = []
    for g in sorted(core.groups.all_groups(), key=lambda g: g.group_id):
        gid = g.group_id
        rebalances = activity.rebalances_in_window(gid)
        refused = activity.refused_since(gid, hour_ago)
        last_commit = activity.last_commit_ms(gid, partial(_commit_times, core, gid))
        stale: list[str] = []
        idle: list[str] = []
        stable = g.state is GroupState.STABLE
        for m in g.members.values():
            view = member_view(g, m, mono)
            # Only in Stable: a member parked in a JoinGroup does not heartbeat (a long rebalance is "stuck"), and
            # the session timer restarts when the group turns Stable.
            age = min(view.since_last_heartbeat_ms, now - g.state_timestamp_ms)
            if stable and q.stale_heartbeat_pct and age * 100 > m.session_timeout_ms * q.stale_heartbeat_pct:
                stale.append(m.member_id)
                items.append(AttentionItem(
                    kind=AttentionKind.STALE_HEARTBEAT, group_id=gid, member_id=m.member_id,
                    group_instance_id=m.group_instance_id, since_ms=now - age,
                    detail=f"no heartbeat for {_duration(age)} "
                    f"(session timeout {_duration(m.session_timeout_ms)})",
                ))  # fmt: skip
            if stable and view.assignment is not None and not any(view.assignment.values()):
                idle.append(m.member_id)
                items.append(AttentionItem(
                    kind=AttentionKind.NO_PARTITIONS, group_id=gid, member_id=m.member_id,
                    group_instance_id=m.group_instance_id, since_ms=g.state_timestamp_ms,
                    detail=f"{m.client_id or m.member_id} owns no partitions",
                ))  # fmt: skip
        flapping = bool(q.flapping_per_hour) and rebalances >= q.flapping_per_hour
        if flapping:
            items.append(AttentionItem(
                kind=AttentionKind.FLAPPING, group_id=gid, member_id=None, group_instance_id=None, since_ms=None,
                detail=f"{rebalances} rebalances in the last hour (threshold {q.flapping_per_hour})",
            ))  # fmt: skip
        if refused:
            last = activity.refusals(gid)[0].timestamp_ms
            items.append(AttentionItem(
                kind=AttentionKind.JOIN_REFUSED, group_id=gid, member_id=None, group_instance_id=None, since_ms=last,
                detail=f"{refused} JoinGroup request(s) refused in the last hour",
            ))  # fmt: skip
        in_state = now - g.state_timestamp_ms
        if q.stuck_ms and g.state in _REBALANCING and in_state > q.stuck_ms:
            items.append(AttentionItem(
                kind=AttentionKind.STUCK, group_id=gid, member_id=None, group_instance_id=None,
                since_ms=g.state_timestamp_ms, detail=f"{g.state.value} for {_duration(in_state)}",
            ))  # fmt: skip
        quiet_since = max(last_commit or 0, g.state_timestamp_ms)
        if q.quiet_commits_ms and stable and g.members and now - quiet_since > q.quiet_commits_ms:
            what = f"last commit {_duration(now - last_commit)} ago" if last_commit is not None else "no commit"
            items.append(AttentionItem(
                kind=AttentionKind.QUIET_COMMITS, group_id=gid, member_id=None, group_instance_id=None,
                since_ms=quiet_since, detail=f"Stable with {len(g.members)} member(s), {what}",
            ))  # fmt: skip
        healths.append(GroupHealth(
            group_id=gid, state=_state(g), state_since_ms=g.state_timestamp_ms, members=len(g.members),
            rebalances_last_hour=rebalances, flapping=flapping, refused_joins_last_hour=refused,
            last_commit_ms=last_commit, last_commit_age_ms=None if last_commit is None else max(0, now - last_commit),
            stale_members=stale, members_without_partitions=idle,
        ))  # fmt: skip
    items.sort(key=lambda i: (_SEVERITY.index(i.kind), i.group_id))
    thresholds = AttentionThresholds(**q.model_dump())
    return respond(Attention(now_ms=now, thresholds=thresholds, items=items, groups=healths))


EVENTS_NOTE = (
    "static replacements, deletions and re-creations come from the stored history (they survive a restart); refused "
    "joins are kept in memory since the daemon started (the last 50 per group; not after a restart)"
)


async def get_events(request: web.Request) -> web.Response:
    """The history source's events merged with the in-memory refused joins, newest first, then paged: the first
    ``offset + limit`` of each source hold the page."""
    gid, group = _group(request)
    q = parse_query(request, TimeRangeQuery)
    since, until = epoch_ms(q.since), epoch_ms(q.until)
    stored, stored_total = await read_history(
        request.app[keys.HISTORY].events(gid, since, until, q.offset + q.limit, 0)
    )
    refused = [
        GroupEventView(
            kind=GroupEventKind.JOIN_REFUSED, source=GroupEventSource.MEMORY, group_id=r.group_id,
            timestamp_ms=r.timestamp_ms, detail=r.detail, member_id=r.member_id, previous_member_id=None,
            group_instance_id=r.group_instance_id, client_id=r.client_id, client_host=r.client_host, error=r.error,
            cause=None,
        )
        for r in request.app[keys.ACTIVITY].refusals(gid)
        if in_range(r.timestamp_ms, since, until)
    ]  # fmt: skip
    total = stored_total + len(refused)
    if group is None and total == 0:
        raise json_error(404, f"unknown group {gid!r}")
    merged = sorted(stored + refused, key=lambda e: e.timestamp_ms, reverse=True)  # stable: each keeps its order
    return respond(GroupEvents(
        group_id=gid, events=merged[q.offset : q.offset + q.limit], total=total, limit=q.limit, offset=q.offset,
        note=EVENTS_NOTE,
    ))  # fmt: skip


# ------------------------------------------------------------------------------------------------------ actions


async def delete_group(request: web.Request) -> web.Response:
    gid, group = _group(request)
    if group is None:
        raise json_error(404, f"unknown group {gid!r}")
    if group.state is not GroupState.EMPTY:
        raise json_error(
            409,
            f"group {gid!r} is {group.state.value} with {len(group.members)} member(s); only Empty groups "
            "can be deleted: stop its consumers first",
        )
    results = await await_core(request, request.app[keys.CORE].delete_groups([gid]), "delete group")
    error = results[0].error if results else ErrorCode.unknown_server_error
    if error is not ErrorCode.none:
        raise json_error(_ACTION_STATUS.get(error, 503), f"group {gid!r} was not deleted: {error.name}")
    audit.admin_action(request, gid, "group deleted through the operator API", action=Action.GROUP_DELETE)
    return respond(DeletedGroup(group_id=gid))


async def remove_member(request: web.Request) -> web.Response:
    gid, group = _group(request)
    instance = request.match_info["instance"]
    if group is None:
        raise json_error(404, f"unknown group {gid!r}")
    if group.static_member_id(instance) is None:
        raise json_error(404, f"group {gid!r} has no static member with group.instance.id {instance!r}")
    d = request.app[keys.CORE].groups.remove_static_member(gid, instance, ADMIN_REASON)
    error = await await_core(request, d, "remove member")
    if error is not ErrorCode.none:
        raise json_error(_ACTION_STATUS.get(error, 503), f"member {instance!r} was not removed: {error.name}")
    audit.admin_action(
        request, gid, "static member %s removed through the operator API", instance, action=Action.MEMBER_REMOVE
    )
    return respond(RemovedMember(group_id=gid, group_instance_id=instance))


async def reset_offsets(request: web.Request) -> web.Response:
    gid, group = _group(request)
    req: OffsetResetRequest = await parse_body(request, OFFSET_RESET_REQUEST)
    if group is not None and group.state is not GroupState.EMPTY:
        raise json_error(
            409, f"group {gid!r} is {group.state.value}; offsets can only be reset while it is Empty (no consumers)"
        )
    core = request.app[keys.CORE]
    committed = {tp: o.offset for tp, o in core.offsets.committed(gid).items()}
    if group is None and not committed and getattr(req, "topics", None) == "all":
        raise json_error(404, f"unknown group {gid!r}")
    topics = {t.name: t.partitions for t in request.app[keys.TOPICS].all()}
    try:
        partitions = select_partitions(req, committed, topics)
        at_ms = None
        if isinstance(req, ResetToDatetime):
            at_ms = epoch_ms(req.to_datetime) or 0
        elif isinstance(req, ResetByDuration):
            at_ms = request.app[keys.CLOCK].now_ms() - req.by_duration_ms
        plan = plan_reset(req, partitions, committed, _log_offsets(request.app[keys.BROKER], partitions, at_ms))
    except ResetError as e:
        raise json_error(e.status, e.message) from None
    if req.execute and plan:
        commit = OffsetCommitRequest(
            group_id=gid,
            generation_id=-1,  # an admin commit, as kafka-consumer-groups.sh sends it
            member_id="",
            group_instance_id=None,
            partitions=[OffsetCommitPartition(p.topic, p.partition, p.new_offset, -1, "") for p in plan],
            api_version=9,
        )
        result = await await_core(request, core.offsets.commit_offsets(commit), "reset offsets")
        errors = {e.error for e in result.partitions if e.error is not ErrorCode.none}
        if errors:
            error = min(errors, key=lambda e: e.value)
            raise json_error(_ACTION_STATUS.get(error, 503), f"offsets of group {gid!r} were not reset: {error.name}")
        audit.admin_action(
            request, gid, "offsets reset (%s) on %d partition(s) through the operator API", req.strategy, len(plan),
            action=Action.OFFSETS_RESET,
        )  # fmt: skip
    return respond(
        OffsetResetResult(group_id=gid, strategy=ResetStrategy(req.strategy), dry_run=not req.execute, partitions=plan)
    )


def _log_offsets(
    broker: Any, partitions: list[tuple[str, int]], at_ms: int | None
) -> dict[tuple[str, int], LogOffsets]:
    """Each partition's log start and end (and, for to-datetime/by-duration, the ListOffsets answer for ``at_ms``);
    partitions the broker does not have are left out."""
    out: dict[tuple[str, int], LogOffsets] = {}
    for topic, index in partitions:
        p = broker.partition(topic, index)
        if p is None:
            continue
        by_time = None
        if at_ms is not None:
            _error, offset, _ts = broker.list_offset(topic, index, max(at_ms, 0))
            by_time = offset if offset >= 0 else None
        out[(topic, index)] = LogOffsets(p.log_start, p.high_watermark, by_time)
    return out


async def delete_offsets(request: web.Request) -> web.Response:
    """Kafka's OffsetDelete: per-partition answers; a topic the group's live members subscribe to is refused with
    GROUP_SUBSCRIBED_TO_TOPIC, a partition that is neither registered nor committed with UNKNOWN_TOPIC_OR_PARTITION
    (a topic named without partitions and unknown both ways answers once, with partition -1)."""
    gid, group = _group(request)
    body = await parse_body(request, OffsetsDelete)
    core = request.app[keys.CORE]
    committed = core.offsets.committed(gid)
    if group is None and not committed:
        raise json_error(404, f"unknown group {gid!r}")
    registry = request.app[keys.TOPICS]
    order: list[tuple[str, int]] = []
    errors: dict[tuple[str, int], str] = {}
    accepted: list[tuple[str, int]] = []
    unknown = ErrorCode.unknown_topic_or_partition.name.upper()
    for sel in body.topics:
        topic = registry.get(sel.topic)
        count = topic.partitions if topic is not None else 0
        if sel.partitions is not None:
            wanted = list(dict.fromkeys(sel.partitions))
        else:
            wanted = sorted(set(range(count)) | {p for t, p in committed if t == sel.topic})
            if not wanted:
                order.append((sel.topic, -1))
                errors[(sel.topic, -1)] = unknown
                continue
        for p in wanted:
            key = (sel.topic, p)
            if key in errors or key in accepted:
                continue
            order.append(key)
            if p < count or key in committed:
                accepted.append(key)
            else:
                errors[key] = unknown
    result = await await_core(
        request, core.offsets.delete_offsets(OffsetDeleteRequest(group_id=gid, partitions=accepted)), "delete offsets"
    )
    if result.error is not ErrorCode.none:
        status = _ACTION_STATUS.get(result.error, 503)
        raise json_error(status, f"offsets of group {gid!r} were not deleted: {result.error.name.upper()}")
    for pe in result.partitions:
        if pe.error is not ErrorCode.none:
            errors[(pe.topic, pe.partition)] = pe.error.name.upper()
    deleted = [key for key in order if key not in errors]
    if deleted:
        audit.admin_action(
            request, gid, "offsets of %d partition(s) deleted through the operator API", len(deleted),
            action=Action.OFFSETS_DELETE,
        )  # fmt: skip
    return respond(
        DeletedOffsets(
            group_id=gid,
            partitions=[PartitionDeletion(topic=t, partition=p, error=errors.get((t, p))) for t, p in order],
        )
    )


# ------------------------------------------------------------------------------------------------------- topics


async def list_topics(request: web.Request) -> web.Response:
    """The topics clients created or were configured; ``__consumer_offsets`` only with ``?internal=true`` (Kafka's
    admin ``listTopics`` leaves internal topics out unless ``listInternal`` is set)."""
    topics = request.app[keys.TOPICS].all()
    admin = request.app.get(keys.ADMIN)
    internal = request.query.get("internal", "false").lower() in ("1", "true", "yes")
    views = [_topic_view(admin, t.name, t.partitions) for t in topics if internal or not is_internal_topic(t.name)]
    return respond(TopicList(topics=views))


def _topic_view(admin: TopicAdmin | None, name: str, partitions: int) -> TopicView:
    """A topic with its configs and, per partition, the log start, end and size (an untouched partition: 0)."""
    if admin is None:
        return TopicView(name=name, partitions=partitions, internal=is_internal_topic(name))
    broker = admin.broker
    log = []
    for index in range(partitions):
        p = broker.existing_partition(name, index)
        start, end, size = (p.log_start, p.high_watermark, p.size_bytes) if p is not None else (0, 0, 0)
        log.append(PartitionLog(partition=index, log_start_offset=start, log_end_offset=end, size_bytes=size))
    return TopicView(
        name=name,
        partitions=partitions,
        internal=is_internal_topic(name),
        configs=dict(describe_configs_of(broker, name)),
        own_configs=broker.topic_configs(name),
        size_bytes=sum(p.size_bytes for p in log),
        log=log,
    )


def _topic_admin(request: web.Request) -> TopicAdmin:
    admin = request.app.get(keys.ADMIN)
    if admin is None:
        raise json_error(404, "this daemon serves no topic admin (no broker)")
    return admin


async def _entry_result(start: Callable[[Callable[[list[EntryResult]], object]], object]) -> EntryResult:
    future: asyncio.Future[list[EntryResult]] = asyncio.get_running_loop().create_future()

    def done(results: list[EntryResult]) -> None:
        if not future.done():
            future.set_result(results)

    start(done)
    [result] = await future
    return result


_TOPIC_ERRORS = {
    ErrorCode.unknown_topic_or_partition: 404,
    ErrorCode.topic_authorization_failed: 403,
    ErrorCode.invalid_config: 400,
    ErrorCode.kafka_storage_error: 503,
}


def _topic_error(result: EntryResult, name: str) -> web.HTTPException:
    status = _TOPIC_ERRORS.get(result.error, 400)
    message = f"topic {name!r} not found" if status == 404 else (result.message or result.error.name)
    return json_error(status, message)


async def delete_topic(request: web.Request) -> web.Response:
    """Kafka's DeleteTopics: the topic, its partitions and its batches, durably."""
    name = request.match_info["topic"]
    admin = _topic_admin(request)
    result = await _entry_result(lambda done: admin.delete_topics([name], [None], done))
    if result.error:
        raise _topic_error(result, name)
    audit.admin_action(
        request, None, "topic %s deleted through the operator API", name, action=Action.TOPIC_DELETE, resource=name
    )
    return respond(TopicDeleted(name=name))


async def change_topic_configs(request: web.Request) -> web.Response:
    """Kafka's IncrementalAlterConfigs on one topic: SET for a value, DELETE (back to the default) for null."""
    name = request.match_info["topic"]
    body = await parse_body(request, TopicConfigChange)
    admin = _topic_admin(request)
    changes = [AlterConfig(k, SET if v is not None else DELETE, v) for k, v in sorted(body.configs.items())]
    resource = ConfigResource(TOPIC_RESOURCE, name, changes)
    result = await _entry_result(lambda done: admin.alter_configs([resource], False, done))
    if result.error:
        raise _topic_error(result, name)
    audit.admin_action(
        request, None, "topic %s configs changed through the operator API: %s", name, body.configs,
        action=Action.TOPIC_CONFIGS, resource=name,
    )  # fmt: skip
    topic = request.app[keys.TOPICS].get(name)
    return respond(_topic_view(admin, name, topic.partitions if topic is not None else 0))


async def create_topic(request: web.Request) -> web.Response:
    """Register a topic; an existing one may grow (like Kafka's CreatePartitions), never shrink."""
    body = await parse_body(request, TopicCreate)
    registry = request.app[keys.TOPICS]
    if is_internal_topic(body.name):
        raise json_error(400, f"topic {body.name!r} is internal: offsets.topic.num.partitions sizes it")
    existing = registry.get(body.name)
    if existing is not None and existing.partitions > body.partitions:
        raise json_error(409, f"topic {body.name!r} has {existing.partitions} partitions; it cannot shrink")
    try:
        topic = registry.add(body.name, body.partitions)
    except ValueError as e:
        raise json_error(400, str(e)) from None
    if existing is None or existing.partitions != topic.partitions:
        audit.admin_action(
            request, None, "topic %s registered with %d partitions through the operator API", topic.name,
            topic.partitions, action=Action.TOPIC_CREATE, resource=topic.name,
        )  # fmt: skip
    return respond(TopicView(name=topic.name, partitions=topic.partitions), 201 if existing is None else 200)


# -------------------------------------------------------------------------------------------------------- audit


def audit_entry(a: AdminAction) -> AuditEntry:
    return AuditEntry(
        timestamp_ms=a.timestamp_ms, via=str(a.via), action=str(a.action), resource=a.resource, group_id=a.group_id,
        principal=a.principal, client_id=a.client_id, client_host=a.client_host, detail=a.detail,
    )  # fmt: skip


async def get_audit(request: web.Request) -> web.Response:
    """Admin actions with their actor, newest first (``runtime.audit_trail``)."""
    q = parse_query(request, AuditQuery)
    trail = request.app.get(keys.AUDIT)
    if trail is None:
        return respond(AuditLog(actions=[], total=0, limit=q.limit, offset=q.offset))
    try:
        actions, total = await trail.actions(
            q.group, since_ms=epoch_ms(q.since), until_ms=epoch_ms(q.until), limit=q.limit, offset=q.offset
        )
    except Exception as e:  # the stored trail is unreachable: like the history, 503
        raise json_error(503, f"audit trail unavailable: {e}") from None
    return respond(AuditLog(actions=[audit_entry(a) for a in actions], total=total, limit=q.limit, offset=q.offset))


# ------------------------------------------------------------------------------------------------------- health


async def healthz(_request: web.Request) -> web.Response:
    return respond(Health())


async def readyz(request: web.Request) -> web.Response:
    probe = request.app.get(keys.READINESS)
    if probe is None:
        return respond(Readiness(ready=True, detail="no readiness probe configured"))
    try:
        state = await probe()
    except Exception as e:  # a failing probe means "not ready", never a 500
        return respond(Readiness(ready=False, detail=f"probe failed: {e}"), 503)
    return respond(Readiness(ready=state.ready, detail=state.detail), 200 if state.ready else 503)


async def metrics_endpoint(request: web.Request) -> web.Response:
    m = request.app.get(keys.METRICS)
    if m is None:
        raise json_error(404, "metrics are not enabled")
    resp = web.Response(body=m.render())
    resp.headers["Content-Type"] = CONTENT_TYPE_LATEST
    return resp


# ------------------------------------------------------------------------------------------------------- table

GROUP = {"group": "The group id."}

ENDPOINTS: list[Endpoint] = [
    Endpoint("GET", "/v1/groups", list_groups, "List groups", "groups", {200: GroupList}, query=GroupsQuery),
    Endpoint("GET", "/v1/groups/{group}", get_group, "Describe a group", "groups",
             {200: GroupDetail, 404: ErrorBody}, path_descriptions=GROUP),
    Endpoint("DELETE", "/v1/groups/{group}", delete_group, "Delete an Empty group", "actions",
             {200: DeletedGroup, 404: ErrorBody, 409: ErrorBody, 503: ErrorBody}, mutating=True, role=Role.ADMIN,
             path_descriptions=GROUP),
    Endpoint("GET", "/v1/groups/{group}/offsets", get_offsets, "Committed offsets", "groups",
             {200: GroupOffsets, 404: ErrorBody}, path_descriptions=GROUP),
    Endpoint("GET", "/v1/groups/{group}/lag", get_group_lag, "Consumer lag per partition", "groups",
             {200: GroupLagView, 404: ErrorBody}, path_descriptions=GROUP,
             description="Every partition the group committed or is assigned: committed offset, log start, log end "
             "offset (the high watermark), lag in messages (null without a commit, as kafka-consumer-groups.sh "
             "prints -), lag in time (now minus the broker append time of the first unconsumed message; 0 when "
             "caught up) and the member that owns the partition now. Computed when asked."),
    Endpoint("GET", "/v1/lag", list_lag, "Consumer lag of every group", "groups", {200: LagList},
             description="Per group: total lag in messages, the largest lag in messages and in time, partitions."),
    Endpoint("POST", "/v1/groups/{group}/offsets/reset", reset_offsets, "Reset offsets (dry run by default)",
             "actions", {200: OffsetResetResult, 404: ErrorBody, 409: ErrorBody, 503: ErrorBody},
             body=OFFSET_RESET_REQUEST, body_name="OffsetResetRequest", mutating=True, role=Role.OPERATOR,
             path_descriptions=GROUP,
             description="The strategies of kafka-consumer-groups.sh --reset-offsets, on the partitions' logs: "
             "to-earliest/to-latest are the log start/end offset, to-datetime/by-duration the first offset at or "
             "after that time (ListOffsets by timestamp), to-offset and shift-by are clamped into [log start, log "
             "end]. Refused (409) unless the group is Empty. With execute=true the new offsets are written as an "
             "admin OffsetCommit (generation -1)."),
    Endpoint("DELETE", "/v1/groups/{group}/offsets", delete_offsets, "Delete committed offsets", "actions",
             {200: DeletedOffsets, 404: ErrorBody, 409: ErrorBody, 503: ErrorBody}, body=OffsetsDelete,
             mutating=True, role=Role.ADMIN, path_descriptions=GROUP,
             description="Kafka's OffsetDelete (kafka-consumer-groups.sh --delete-offsets), answered per partition: "
             "GROUP_SUBSCRIBED_TO_TOPIC for a topic the group's live members subscribe to, "
             "UNKNOWN_TOPIC_OR_PARTITION for a partition that is neither registered nor committed. 409 when the "
             "group is not Empty and does not use the consumer protocol (NON_EMPTY_GROUP)."),
    Endpoint("GET", "/v1/groups/{group}/status", get_group_status, "Burrow-style consumer status", "groups",
             {200: GroupStatusView, 404: ErrorBody}, query=GroupStatusQuery, path_descriptions=GROUP,
             description="Burrow's evaluation of the group: per partition OK, WARN (lag growing), STOP (no commit "
             "for longer than the window spans, with lag), STALL (offset not moving, with lag) or REWIND, from "
             "its last lag.intervals commits and the log end now; the group is OK, WARN or ERR (the worst "
             "partition), with complete, maxlag and totallag. The windows are kept in memory since the daemon "
             "started (started from the loaded offsets). docs/consumer-status.md has the rules."),
    Endpoint("GET", "/v1/groups/{group}/commits", get_commits, "Commit log", "history",
             {200: CommitLog, 404: ErrorBody, 503: ErrorBody}, query=TimeRangeQuery, path_descriptions=GROUP),
    Endpoint("GET", "/v1/groups/{group}/rebalances", get_rebalances, "Rebalance history", "history",
             {200: RebalanceHistory, 404: ErrorBody, 503: ErrorBody}, query=TimeRangeQuery, path_descriptions=GROUP),
    Endpoint("DELETE", "/v1/groups/{group}/members/{instance}", remove_member, "Remove a static member",
             "actions", {200: RemovedMember, 404: ErrorBody, 409: ErrorBody, 503: ErrorBody}, mutating=True,
             role=Role.OPERATOR,
             path_descriptions={**GROUP, "instance": "The member's group.instance.id."}),
    Endpoint("GET", "/v1/groups/{group}/events", get_events, "Replacements, deletions, refused joins",
             "history", {200: GroupEvents, 404: ErrorBody, 503: ErrorBody}, query=TimeRangeQuery,
             path_descriptions=GROUP,
             description="The group's notable events that are no rebalance, newest first: static members replaced "
             "by a new instance, the group deleted and created again (source history: folded from the stored "
             "records, they survive a restart), and JoinGroups refused for the client's configuration (source "
             "memory: no record exists for them; the last 50 per group since the daemon started, lost at a "
             "restart)."),
    Endpoint("GET", "/v1/attention", get_attention, "What needs attention now", "groups", {200: Attention},
             query=AttentionQuery,
             description="Flapping groups, stale heartbeats, members without partitions, groups stuck outside "
             "Stable, Stable groups whose commits went quiet, refused joins; with each group's rebalances in the "
             "last hour and the age of its last commit. Computed from the live groups and small in-memory counters "
             "(since the daemon started), not from the stored history."),
    Endpoint("GET", "/v1/topics", list_topics, "Registered topics", "topics", {200: TopicList}),
    Endpoint("POST", "/v1/topics", create_topic, "Register a topic", "topics",
             {200: TopicView, 201: TopicView, 409: ErrorBody}, body=TopicCreate, mutating=True, role=Role.ADMIN),
    Endpoint("DELETE", "/v1/topics/{topic}", delete_topic, "Delete a topic", "topics",
             {200: TopicDeleted, 403: ErrorBody, 404: ErrorBody, 503: ErrorBody}, mutating=True, role=Role.ADMIN,
             path_descriptions={"topic": "The topic's name."},
             description="Kafka's DeleteTopics: the topic leaves Metadata at once, its partitions and batches are "
             "deleted durably; 403 for the internal __consumer_offsets."),
    Endpoint("PATCH", "/v1/topics/{topic}/configs", change_topic_configs, "Change a topic's configs", "topics",
             {200: TopicView, 400: ErrorBody, 403: ErrorBody, 404: ErrorBody, 503: ErrorBody},
             body=TopicConfigChange, mutating=True, role=Role.ADMIN, path_descriptions={"topic": "The topic's name."},
             description="Kafka's IncrementalAlterConfigs: a value sets a config, null puts it back to its default. "
             "Served: cleanup.policy (delete only), max.message.bytes, message.timestamp.type, retention.ms, "
             "retention.bytes; anything else is 400."),
    Endpoint("GET", "/v1/audit", get_audit, "Admin actions and who did them", "history",
             {200: AuditLog, 503: ErrorBody}, query=AuditQuery,
             description="Every admin action over this API and over the Kafka admin APIs (offset resets and alters, "
             "deletions, member removals, topic changes, ACL and user changes), newest first, with its actor: "
             "principal, client id (User-Agent over HTTP) and host. Stored with the records (kept until deleted, "
             "not pruned with the history)."),
    Endpoint("GET", "/healthz", healthz, "Alive", "health", {200: Health}),
    Endpoint("GET", "/readyz", readyz, "Loaded, storage writable", "health", {200: Readiness, 503: Readiness}),
]  # fmt: skip

METRICS_PATH_ITEM: dict[str, Any] = {
    "get": {
        "operationId": "metrics",
        "summary": "Prometheus metrics",
        "tags": ["health"],
        "responses": {
            "200": {"description": "Text exposition format", "content": {"text/plain": {"schema": {"type": "string"}}}},
            "404": {"description": "Metrics disabled", "content": {"application/json": {"schema": {
                "$ref": "#/components/schemas/ErrorBody"}}}},
        },
    }
}  # fmt: skip
