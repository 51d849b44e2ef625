"""Group administration: ListGroups, DescribeGroups and DeleteGroups, over every group type.

The groups come from the ``coordinator.group_type.GroupDirectory``; each group gives its own ListGroups and
DescribeGroups entry and says whether it can be deleted (``coordinator.group_type.Group``), so this module knows no
group type. ListGroups and DescribeGroups only read. DeleteGroups validates each group (``Group.validate_delete``:
a classic group only when Empty) and appends an offset tombstone for every committed or in-flight offset plus a
group tombstone, through ``coordinator.deletion``: the group goes from memory at once (a JoinGroup that comes later
creates a new group), its offsets once the tombstones are durable, and a failed write restores the group. The reply
waits for the write.
"""

from __future__ import annotations

import logging

from protocol.errors import ErrorCode

from .clock import Clock
from .deferred import Deferred, resolved
from .deletion import deletion
from .group_type import GroupDirectory
from .messages import DeleteGroupResult, DescribedGroup, ListedGroup
from .offsets import OffsetManager
from .record_log import RecordLog
from .records import GroupRemovalCause, OffsetRemovalCause, Record, new_group_tombstone, new_offset_tombstone
from .writes import write

log = logging.getLogger(__name__)

DEAD_STATE = "Dead"  # DescribeGroups' answer for a group id it does not know (no error)


class GroupAdmin:
    def __init__(
        self,
        clock: Clock,
        log: RecordLog,
        groups: GroupDirectory,
        offsets: OffsetManager,
    ) -> None:
        self._clock = clock
        self._log = log
        self._groups = groups
        self._offsets = offsets

    # -------------------------------------------------------------------------------------------------- ListGroups
    def list_groups(self, states_filter: list[str] | None, types_filter: list[str] | None) -> list[ListedGroup]:
        """Every group, filtered. Empty/None filter = all; unknown state or type names match nothing."""
        states = {s.strip().lower() for s in states_filter} if states_filter else None
        # Kafka trims state names but not type names (GroupType.parse only lower-cases).
        types = {t.lower() for t in types_filter} if types_filter else None
        listed = [
            g.listed()
            for g in self._groups.all_groups()
            if (states is None or g.state_lower in states) and (types is None or g.group_type in types)
        ]
        listed.sort(key=lambda g: g.group_id)
        return listed

    # ---------------------------------------------------------------------------------------------- DescribeGroups
    def describe_groups(self, group_ids: list[str | None]) -> list[DescribedGroup]:
        return [self._describe(group_id) for group_id in group_ids]

    def _describe(self, group_id: str | None) -> DescribedGroup:
        if group_id is None:
            return DescribedGroup("", ErrorCode.invalid_group_id, "")
        group = self._groups.group(group_id)
        if group is None:
            return DescribedGroup(group_id, ErrorCode.none, DEAD_STATE)
        return group.described()

    # ------------------------------------------------------------------------------------------------ DeleteGroups
    def delete_groups(self, group_ids: list[str | None]) -> Deferred[list[DeleteGroupResult]]:
        """Per group: None -> INVALID_GROUP_ID; absent/Dead -> GROUP_ID_NOT_FOUND; not Empty -> NON_EMPTY_GROUP;
        Empty -> deleted. Duplicate ids are answered once. Resolved when the tombstones are durable."""
        now = self._clock.now_ms()
        results: list[DeleteGroupResult] = []
        records: list[Record] = []
        deleted: set[str] = set()
        seen: set[str | None] = set()
        for group_id in group_ids:
            if group_id in seen:
                continue
            seen.add(group_id)
            if group_id is None:
                results.append(DeleteGroupResult("", ErrorCode.invalid_group_id))
                continue
            group = self._groups.group(group_id)
            error = ErrorCode.group_id_not_found if group is None else group.validate_delete()
            results.append(DeleteGroupResult(group_id, error))
            if error is ErrorCode.none:
                deleted.add(group_id)
                records.extend(_offset_tombstones(self._offsets, group_id, now, OffsetRemovalCause.GROUP_DELETED))
                records.append(new_group_tombstone(group_id, cause=GroupRemovalCause.DELETED, now_ms=now))
        if not records:
            return resolved(results)

        reply: Deferred[list[DeleteGroupResult]] = Deferred()

        def on_done(err: ErrorCode | None) -> None:
            if err is None:
                reply.resolve(results)
            else:
                log.warning(
                    "delete of groups %s failed: %s",
                    sorted(deleted),
                    err.name,
                    extra={"throttle": ("write-failed", "delete groups")},
                )
                reply.resolve([DeleteGroupResult(r.group_id, err) if r.group_id in deleted else r for r in results])

        write(self._log, deletion(self._groups, self._offsets, records, on_done))
        return reply


def _offset_tombstones(offsets: OffsetManager, group_id: str, now_ms: int, cause: OffsetRemovalCause) -> list[Record]:
    """Offset tombstones for every durable and every in-flight offset of the group (in-flight ones are appended
    before these, so the tombstone wins on replay exactly as it does live)."""
    keys = set(offsets.committed(group_id).keys())
    keys.update(offsets.pending(group_id))
    return [new_offset_tombstone(group_id, t, p, cause=cause, now_ms=now_ms) for t, p in sorted(keys)]
