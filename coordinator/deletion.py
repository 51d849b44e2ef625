"""Writing a deletion (DeleteGroups, the operator API's DELETE, retention expiry) and applying it to memory.

A deletion's records change memory the way every other record of their family does:

* **Group tombstones apply at once**, like every group change (``GroupDirectory.remove_group``, by the group's type:
  ``GroupManager.remove_group`` for a classic group). A request that
  arrives after the deletion therefore sees the group id as unknown: a JoinGroup creates a new, empty group, and
  its records are appended after the tombstone, so the log replays to the new group as memory holds it. (Before,
  the group stayed until the tombstone was durable: a JoinGroup in between moved it to PreparingRebalance, and the
  tombstone then dropped the group under the joiner.) Kafka's runtime does the same: it replays a write's records
  into its state at once and reverts them if the write fails.
* **Offset tombstones apply once durable**, like every offset change (``OffsetManager.replay``), so OffsetFetch is
  never ahead of the log. The group's in-flight commits are detached at once: they precede the tombstones in the
  log, and on completion they store their offset without re-creating the group (``OffsetManager``).
* **A failed write** undoes the group removals (the answer of ``remove_group`` is told; the classic type replays
  each removed group's state, unless a later request created a new group under its id) and never applied the offset
  tombstones, so memory again matches the log. Whoever appended the deletion is told the error (``then``), as before.
"""

from __future__ import annotations

from collections.abc import Sequence

from protocol.errors import ErrorCode

from .group_type import FinishRemoval, GroupDirectory
from .offsets import OffsetManager
from .records import GroupTombstone, OffsetTombstone, Record
from .result import Durable, Result


def deletion(groups: GroupDirectory, offsets: OffsetManager, records: Sequence[Record], then: Durable) -> Result[None]:
    """Remove the groups of ``records``' group tombstones now and return the write of ``records``: once they are
    durable their offset tombstones are replayed; on a failed write the removed groups are restored. ``then`` is
    called after either, with the Kafka error of a failed write."""
    removed: list[FinishRemoval] = []
    for record in records:
        if isinstance(record, GroupTombstone):
            offsets.detach_inflight(record.group_id)
            finish = groups.remove_group(record.group_id)
            if finish is not None:
                removed.append(finish)

    def written(error: ErrorCode | None) -> None:
        if error is None:
            for record in records:
                if isinstance(record, OffsetTombstone):
                    offsets.replay(record)
        for finish in removed:
            finish(error is None)
        then(error)

    out: Result[None] = Result()
    out.records.extend(records)
    out.on_durable.append(written)
    return out
