"""``GroupManager``: the classic group type of one coordinator shard, as the rest of the core sees it.

It owns the shard's ``ClassicGroups`` (plain data) and exposes the classic-group handlers, which are plain
functions over that data, one module per API: ``coordinator.join`` (JoinGroup, with ``coordinator.static``),
``coordinator.sync``, ``coordinator.heartbeat``, ``coordinator.leave``; the phase machinery they share is
``coordinator.rebalance``, fault containment ``coordinator.faults``, removal/replay/loading
``coordinator.lifecycle``. Each handler is bound once here (``functools.partial``; Heartbeat's as methods), so a
request costs no more indirection than a method call. The section numbers (§) and row ids (R4, N6, E10, S9, H6,
L3 ...) in those modules refer to ``docs/semantics.md``.

It is also the classic ``coordinator.group_type.GroupType``: the shard's ``GroupDirectory`` reads its groups
(``groups_by_id``), removes them (``remove_group``) and creates simple groups through it
(``get_or_create_simple_group``). ``group`` and ``all_groups`` answer with the classic groups themselves, for the
operator API and the metrics, which show classic details (members, assignments).

What is durable and who waits for it:

* JoinGroup and Heartbeat never wait on the log. Joins append history records (and, for a brand-new group, the
  "empty group" GroupMetadataRecord) without waiting.
* The leader's SyncGroup appends the GroupMetadataRecord with every assignment; the group becomes Stable and the
  parked SyncGroups are answered only once it is durable.
* A static member replacing itself in a Stable group waits for its GroupMetadataRecord and is reverted on failure.
* LeaveGroup (and ``remove_static_member``) resolve once the records of that leave are durable.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from functools import partial
from types import MethodType

from protocol.errors import ErrorCode

from . import heartbeat, join, leave, lifecycle, rebalance, sync
from .classic_groups import ClassicGroups, random_uuid
from .clock import Clock, Timer
from .config import GroupConfig
from .deferred import Deferred
from .group import ClassicGroup, GroupState
from .group_type import FinishRemoval
from .messages import (
    HeartbeatRequest,
    JoinGroupRequest,
    JoinGroupResult,
    LeaveGroupRequest,
    LeaveGroupResult,
    SyncGroupRequest,
    SyncGroupResult,
)
from .record_log import RecordLog
from .records import Record


class GroupManager:
    """Kafka's classic group coordinator for one set of groups (one coordinator shard), pure and single-threaded."""

    def __init__(
        self,
        config: GroupConfig,
        clock: Clock,
        timer: Timer,
        log: RecordLog,
        *,
        new_uuid: Callable[[], str] = random_uuid,
    ) -> None:
        """``new_uuid`` makes member ids testable."""
        shard = self.shard = ClassicGroups(config, clock, timer, log, new_uuid)
        shard.keep_alive = partial(rebalance.schedule_session, shard)
        self.join_group: Callable[[JoinGroupRequest], Deferred[JoinGroupResult]] = partial(join.join_group, shard)
        self.sync_group: Callable[[SyncGroupRequest], Deferred[SyncGroupResult]] = partial(sync.sync_group, shard)
        # Heartbeat's hot path (the listener calls it per request), no Result (it writes nothing). Bound as methods
        # (``MethodType``), not ``partial``: the interpreter unpacks a bound method and runs the function in its own
        # frame loop, where a partial is a C call that starts another (and mallocs its arguments past five).
        self.heartbeat_fields: Callable[[str, int, str, str | None], ErrorCode] = MethodType(
            heartbeat.heartbeat_fields, shard
        )
        self.heartbeat_at: Callable[[int, str, int, str, str | None], ErrorCode] = MethodType(
            heartbeat.heartbeat_at, shard
        )
        self.monotonic_ms: Callable[[], int] = clock.monotonic_ms  # the ``now_ms`` heartbeat_at takes
        self.leave_group: Callable[[LeaveGroupRequest], Deferred[LeaveGroupResult]] = partial(leave.leave_group, shard)
        self.remove_static_member: Callable[[str, str, str | None], Deferred[ErrorCode]] = partial(
            leave.remove_static_member, shard
        )

    @property
    def faults(self) -> int:
        """Operations that raised and were contained (tests assert none happen)."""
        return self.shard.faults

    def heartbeat(self, req: HeartbeatRequest) -> ErrorCode:
        """H1-H8 from a request object (``heartbeat_fields`` is the listener's path)."""
        return self.heartbeat_fields(req.group_id, req.generation_id, req.member_id, req.group_instance_id)

    # ------------------------------------------------------------------------------------- the group-type seam
    def group(self, group_id: str) -> ClassicGroup | None:
        return self.shard.groups.get(group_id)

    def all_groups(self) -> Iterable[ClassicGroup]:
        return self.shard.groups.values()

    @property
    def groups_by_id(self) -> Mapping[str, ClassicGroup]:
        return self.shard.groups

    def get_or_create_simple_group(self, group_id: str) -> ClassicGroup:
        return lifecycle.get_or_create_simple_group(self.shard, group_id)

    def remove_group(self, group_id: str) -> FinishRemoval | None:
        """Remove the group at once (``lifecycle.remove_group``); the answer restores it if the tombstone fails."""
        state = lifecycle.remove_group(self.shard, group_id)
        if state is None:
            return None
        return lambda written: lifecycle.finish_removal(self.shard, state, written=written)

    def drop_group(self, group_id: str) -> None:
        lifecycle.drop_group(self.shard, group_id)

    # ------------------------------------------------------------------------------------------------ loading
    def replay(self, record: Record) -> None:
        lifecycle.replay(self.shard, record)

    def on_loaded(self) -> None:
        lifecycle.on_loaded(self.shard)


__all__ = ["GroupManager", "GroupState"]
