"""The group coordinator of one shard: the facade the API layer talks to.

It composes the classic group type (``GroupManager``: Join/Sync/Heartbeat/Leave handlers over the shard's
``ClassicGroups``), the one directory of the shard's groups of every type (``GroupDirectory``, the group-type seam of
``coordinator.group_type``: the classic type is registered there), the offsets store (``OffsetManager``),
group administration (``GroupAdmin``: List/Describe/DeleteGroups) and the retention cleanup (``RetentionCleaner``),
which find groups through the directory only, and owns the single replay dispatch that rebuilds all of them from
records.

Load sequence (storage): ``replay(record)`` for every stored record in log order, then ``on_loaded()``, which arms
the members' session timers and the periodic cleanup. Replay only touches state records; history records carry no
state, and a record type this version does not know is logged and skipped so a rollback to an older version still
starts (Kafka skips unknown key versions the same way).
"""

from __future__ import annotations

import logging
from collections.abc import Iterable

from .admin import GroupAdmin
from .clock import Clock, Timer
from .config import GroupConfig
from .group_type import GroupDirectory
from .groups import GroupManager
from .offsets import GroupOffsetRows, OffsetManager
from .record_log import RecordLog
from .records import (
    GroupMetadataRecord,
    GroupStabilized,
    GroupTombstone,
    JoinPhaseCompleted,
    MemberJoined,
    MemberRemoved,
    OffsetCommitRecord,
    OffsetTombstone,
    RebalanceStarted,
    Record,
)
from .retention import RetentionCleaner
from .sharding import partition_for

log = logging.getLogger(__name__)

_HISTORY_TYPES = (RebalanceStarted, JoinPhaseCompleted, GroupStabilized, MemberJoined, MemberRemoved)


class GroupCoordinator:
    def __init__(
        self, config: GroupConfig, clock: Clock, timer: Timer, log: RecordLog, *, groups: GroupManager | None = None
    ) -> None:
        """``groups`` lets tests pass a GroupManager built with deterministic member ids (same clock/timer/log)."""
        self.config = config
        self.groups = groups if groups is not None else GroupManager(config, clock, timer, log)
        # Every group type registers here (``GroupDirectory.register``); simple groups are classic groups.
        self.directory = GroupDirectory(self.groups.get_or_create_simple_group, self.groups)
        self.offsets = OffsetManager(config, clock, timer, log, self.directory)
        self.admin = GroupAdmin(clock, log, self.directory, self.offsets)
        self.retention = RetentionCleaner(config, clock, timer, log, self.directory, self.offsets)

        # Request handlers, by delegation (bound once: no per-request indirection).
        self.join_group = self.groups.join_group
        self.sync_group = self.groups.sync_group
        self.heartbeat = self.groups.heartbeat
        self.heartbeat_fields = self.groups.heartbeat_fields
        self.heartbeat_at = self.groups.heartbeat_at
        self.monotonic_ms = self.groups.monotonic_ms
        self.leave_group = self.groups.leave_group
        self.remove_static_member = self.groups.remove_static_member
        self.commit_offsets = self.offsets.commit_offsets
        self.fetch_offsets = self.offsets.fetch_offsets
        self.delete_offsets = self.offsets.delete_offsets
        self.list_groups = self.admin.list_groups
        self.describe_groups = self.admin.describe_groups
        self.delete_groups = self.admin.delete_groups

    # ------------------------------------------------------------------------------------------------------ replay
    def replay(self, record: Record | object) -> None:
        """Apply one stored record (load path). History records are ignored; unknown types are skipped."""
        if isinstance(record, (OffsetCommitRecord, OffsetTombstone)):
            self.offsets.replay(record)
        elif isinstance(record, (GroupMetadataRecord, GroupTombstone)):
            self.groups.replay(record)
        elif isinstance(record, _HISTORY_TYPES):
            return
        else:
            log.warning("skipping a record of unknown type %s during replay", type(record).__name__)

    def load_offsets(self, loaded: Iterable[GroupOffsetRows]) -> None:
        """Replay the loaded committed offsets given per group as rows (``OffsetManager.load``): the same as
        replaying an ``OffsetCommitRecord`` per row, without building them."""
        self.offsets.load(loaded)

    # ----------------------------------------------------------------------------------------------------- loading
    def on_loaded(self) -> None:
        """After the last replayed record: arm member sessions (state machine) and the periodic cleanup."""
        self.groups.on_loaded()
        self.retention.schedule()

    def shard_for(self, group_id: str) -> int:
        return partition_for(group_id, self.config.offsets_topic_num_partitions)
