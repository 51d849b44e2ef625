"""A classic group's life outside the requests: simple groups, removal (deletion, expiry), replay and loading.

``remove_group`` / ``finish_removal`` follow the rule of every other group change: memory changes when the record
is produced, not when it is durable (``coordinator.deletion``).
"""

from __future__ import annotations

import logging
from dataclasses import fields

from protocol.errors import ErrorCode

from . import rebalance
from .classic_groups import ClassicGroups
from .group import ClassicGroup, GroupEvent, GroupState, Member
from .group_records import group_metadata_record
from .messages import JoinGroupResult, SyncGroupResult
from .records import GroupMetadataRecord, GroupTombstone, MemberMetadata, RebalanceCause, Record
from .result import Result
from .writes import write

log = logging.getLogger("coordinator.group")


def get_or_create_simple_group(shard: ClassicGroups, group_id: str) -> ClassicGroup:
    """An offsets-only group: Empty, no protocol type, no record written (Kafka writes none either)."""
    group = shard.groups.get(group_id)
    if group is None:
        group = shard.new_group(group_id, shard.clock.now_ms())
    return group


def remove_group(shard: ClassicGroups, group_id: str) -> GroupMetadataRecord | None:
    """Remove a group at once, as the replay of its tombstone would (DeleteGroups, retention expiry), and
    return its state as a record; ``finish_removal`` is told whether the tombstone was written.

    So a request that arrives after the deletion sees the group id as unknown (a JoinGroup creates a new group),
    and the tombstone, appended before anything that request writes, cannot remove the new group when it lands.
    Only Empty groups are removed this way, so no member is answered; a pending (MEMBER_ID_REQUIRED) id loses its
    timer and must join again.
    """
    group = shard.groups.get(group_id)
    if group is None:
        return None
    state = group_metadata_record(group, shard.clock.now_ms())
    drop_group(shard, group_id)
    shard.removing.setdefault(group_id, []).append(state)
    return state


def finish_removal(shard: ClassicGroups, state: GroupMetadataRecord, *, written: bool) -> None:
    """The tombstone of ``remove_group`` was written, or not: then the removed group comes back (its state is
    replayed), unless a later request created a group under the id, which is still there or is being removed
    itself. Either way that later group's records follow the old group's in the log, so the log replays to
    what memory holds."""
    removing = shard.removing.get(state.group_id, [])
    at = next((i for i, s in enumerate(removing) if s is state), None)  # by identity: equal records may repeat
    if at is None:
        return
    later = at < len(removing) - 1
    del removing[at]
    if not removing:
        del shard.removing[state.group_id]
    if not written and not later and state.group_id not in shard.groups:
        replay(shard, state)
        log.info("restored: its tombstone could not be written", extra={"group": state.group_id})


def drop_group(shard: ClassicGroups, group_id: str) -> None:
    """Forget a group: its timers too, and answer its parked requests."""
    group = shard.groups.pop(group_id, None)
    if group is None:
        return
    cancel_group_timers(shard, group)
    for member in group.members.values():
        group.complete_join_reply(member, JoinGroupResult(error=ErrorCode.coordinator_not_available))
        group.complete_sync_reply(member, SyncGroupResult(error=ErrorCode.coordinator_not_available))
    group.apply(GroupEvent.DROPPED, shard.clock.now_ms())  # anyone still holding it sees Dead
    log.info("group dropped", extra={"group": group_id})


def cancel_group_timers(shard: ClassicGroups, group: ClassicGroup) -> None:
    shard.timer.cancel(rebalance.join_key(group.group_id))
    shard.timer.cancel(rebalance.sync_key(group.group_id))
    for member_id in group.members:
        shard.timer.cancel(rebalance.heartbeat_key(group.group_id, member_id))
    for member_id in group.pending_join_members:
        shard.timer.cancel(rebalance.heartbeat_key(group.group_id, member_id))


# ------------------------------------------------------------------------------------------------ loading
def replay(shard: ClassicGroups, record: Record) -> None:
    """Rebuild a group from its latest GroupMetadataRecord as Kafka's load does (§10.4); a tombstone drops it.

    Other record types (offsets, history) are ignored here. An existing ClassicGroup object (e.g. a simple group the
    offsets replay created) is updated in place so that references held elsewhere stay valid.
    """
    if isinstance(record, GroupTombstone):
        existing = shard.groups.pop(record.group_id, None)
        if existing is not None:
            cancel_group_timers(shard, existing)
        return
    if not isinstance(record, GroupMetadataRecord):
        return
    group = _group_from(shard, record)
    existing = shard.groups.get(record.group_id)
    if existing is not None:
        cancel_group_timers(shard, existing)
        for f in fields(ClassicGroup):
            setattr(existing, f.name, getattr(group, f.name))
        for member in existing.members.values():
            rebalance.track(shard, existing, member)  # bind expiry to the surviving object
    else:
        shard.groups[record.group_id] = group


def _group_from(shard: ClassicGroups, record: GroupMetadataRecord) -> ClassicGroup:
    """The group a GroupMetadataRecord describes: Stable if it has members, else Empty; each member knows only the
    selected protocol (with its stored subscription)."""
    protocol_type = record.protocol_type or None
    group = ClassicGroup(
        group_id=record.group_id,
        created_ms=shard.clock.now_ms(),
        state=GroupState.STABLE if record.members else GroupState.EMPTY,
        state_timestamp_ms=record.current_state_timestamp_ms,
        generation_id=record.generation_id,
        protocol_type=protocol_type,
        protocol_name=record.protocol,
        leader_id=record.leader,
    )
    group.keep_alive = shard.keep_alive
    for m in record.members:
        member = _member_from(record, m)
        group.add(member)
        rebalance.track(shard, group, member)
    group.protocol_type = protocol_type  # add() copies the member's "" for an untyped group
    group.compute_subscribed_topics()
    return group


def _member_from(record: GroupMetadataRecord, m: MemberMetadata) -> Member:
    return Member(
        member_id=m.member_id,
        group_instance_id=m.group_instance_id,
        client_id=m.client_id,
        client_host=m.client_host,
        rebalance_timeout_ms=m.session_timeout_ms if m.rebalance_timeout_ms == -1 else m.rebalance_timeout_ms,
        session_timeout_ms=m.session_timeout_ms,
        protocol_type=record.protocol_type,
        protocols=[(record.protocol, m.subscription)] if record.protocol is not None else [],
        assignment=m.assignment,
        is_new=False,
    )


def on_loaded(shard: ClassicGroups) -> None:
    """After replay: arm every member's session; rebalance groups larger than group.max.size."""
    out: Result[None] = Result()
    for group in list(shard.groups.values()):
        for member in group.members.values():
            rebalance.schedule_session(shard, member)
        if len(group.members) > shard.config.max_size and group.accepts(GroupEvent.GROUP_TOO_LARGE):
            log.info(
                "loaded with %d members, over group.max.size %d: rebalancing",
                len(group.members),
                shard.config.max_size,
                extra={"group": group.group_id},
            )
            rebalance.prepare_rebalance(shard, group, RebalanceCause.GROUP_TOO_LARGE, out)
    write(shard.log, out)
