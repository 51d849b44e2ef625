"""The group-type seam: what every type of group offers the shared services, and the one directory of groups.

Kafka's coordinator has one ``Group`` interface over its group types (``ClassicGroup``, ``ConsumerGroup``); the
services every type shares - ListGroups, DescribeGroups, DeleteGroups, the offsets (OffsetCommit, OffsetFetch,
OffsetDelete), retention and deletion - talk to a group only through it. Here:

* ``Group`` is that interface, a structural Protocol: ``coordinator.group.ClassicGroup`` implements it (no
  inheritance), and a second type (the KIP-848 consumer group) implements it beside the classic one. Each type keeps
  its own state machine and its own handlers, which use the concrete class.
* ``GroupType`` is what one type hands the directory: its groups by id (the live mapping, read directly) and how to
  remove one of them at once (deletion, expiry) and finish or undo that removal once the tombstone's write is known.
* ``GroupDirectory`` is the one lookup over every registered type: a group id names one group, whatever its type.
  The shared services take it; a second type only registers its ``GroupType`` (``GroupDirectory.register``).

Rows of ``docs/semantics.md`` (C1-C7, §9.3 ...) are implemented by the type that owns them: the classic ones in
``ClassicGroup``.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping
from typing import TYPE_CHECKING, Protocol

from protocol.errors import ErrorCode

from .messages import DescribedGroup, ListedGroup

if TYPE_CHECKING:
    from .offsets import OffsetAndMetadata

# Kafka's OffsetExpirationCondition.baseTimestamp: the time an offset's retention counts from.
BaseTimestamp = Callable[["OffsetAndMetadata"], int]

# Called once the write of a removal's tombstone is known: True if it was written (the removal stands), False if not
# (the group comes back unless its id was reused meanwhile).
FinishRemoval = Callable[[bool], None]


def commit_time(o: OffsetAndMetadata) -> int:
    """The commit timestamp: the base of the retention rule for most groups."""
    return o.commit_timestamp_ms


class Group(Protocol):
    """What every group type offers the shared services (Kafka's ``Group`` interface)."""

    @property
    def group_id(self) -> str: ...

    @property
    def group_type(self) -> str:
        """ListGroups' ``group_type`` (KIP-848): ``classic``, ``consumer`` ..."""
        ...

    @property
    def state_name(self) -> str:
        """The state as ListGroups and DescribeGroups show it (``Stable``)."""
        ...

    @property
    def state_lower(self) -> str:
        """The state lower-cased: what a ListGroups states filter is compared with (``stable``)."""
        ...

    @property
    def protocol_type(self) -> str | None: ...

    def is_empty(self) -> bool:
        """No members and not Dead ("Empty"): the state in which retention may expire the group."""
        ...

    def validate_delete(self) -> ErrorCode:
        """DeleteGroups: NONE if the group can be deleted (GROUP_ID_NOT_FOUND, NON_EMPTY_GROUP otherwise)."""
        ...

    def listed(self) -> ListedGroup:
        """The group's ListGroups entry."""
        ...

    def described(self) -> DescribedGroup:
        """The group's DescribeGroups entry (or its per-group error)."""
        ...

    def validate_offset_commit(
        self, member_id: str, generation_or_epoch: int, instance_id: str | None, api_version: int
    ) -> ErrorCode:
        """OffsetCommit against an existing group: NONE or the error every partition gets. A generation (or member
        epoch) below 0 that is accepted is an admin commit (no member recorded). May keep the committing member
        alive (the classic type re-arms its session)."""
        ...

    def validate_offset_fetch(self) -> ErrorCode:
        """OffsetFetch: NONE, GROUP_ID_NOT_FOUND (answered as a group without offsets, as an absent group is) or
        the group-level error. (KIP-848's member-epoch check needs OffsetFetch v9's member fields, not read yet.)"""
        ...

    def validate_offset_delete(self) -> ErrorCode:
        """OffsetDelete: NONE, GROUP_ID_NOT_FOUND or NON_EMPTY_GROUP for the whole request."""
        ...

    def is_subscribed_to(self, topic: str) -> bool:
        """Whether a member consumes ``topic``: OffsetDelete refuses its offsets (GROUP_SUBSCRIBED_TO_TOPIC) and
        retention keeps them. Nothing is subscribed in an Empty group."""
        ...

    def offset_expiration_base(self) -> BaseTimestamp | None:
        """Kafka's offsetExpirationCondition: what an offset's retention counts from, or None if the group's
        offsets do not expire in its current state (§9.3)."""
        ...


class GroupType(Protocol):
    """One type's groups, as the directory sees them."""

    @property
    def groups_by_id(self) -> Mapping[str, Group]:
        """The type's live groups (the directory reads this mapping directly)."""
        ...

    def remove_group(self, group_id: str) -> FinishRemoval | None:
        """Remove the group at once (deletion, expiry; only groups whose ``validate_delete`` or ``is_empty`` allowed
        it), or None if the type has no such group; the answer is told whether the tombstone was written."""
        ...


class GroupDirectory:
    """Every group of a coordinator shard, whatever its type (one id names one group)."""

    def __init__(self, simple_groups: Callable[[str], Group], *types: GroupType) -> None:
        """``simple_groups`` creates (or returns) the offsets-only group of an id whose first commit is applied
        (Kafka makes it a classic group); ``types`` are the group types, classic first."""
        self._simple_groups = simple_groups
        self._types: tuple[GroupType, ...] = ()
        self._maps: tuple[Mapping[str, Group], ...] = ()
        # ``group(group_id)``: the group of that id, of whatever type, or None.
        self.group: Callable[[str], Group | None] = self._group_of_any_type
        for group_type in types:
            self.register(group_type)

    def register(self, group_type: GroupType) -> None:
        """Add a group type: every shared service finds its groups from now on."""
        self._types = (*self._types, group_type)
        self._maps = tuple(t.groups_by_id for t in self._types)
        # With one type a lookup is that mapping's own ``get``: OffsetCommit's lookup costs what it did before.
        self.group = self._maps[0].get if len(self._maps) == 1 else self._group_of_any_type

    def _group_of_any_type(self, group_id: str) -> Group | None:
        for groups in self._maps:
            group = groups.get(group_id)
            if group is not None:
                return group
        return None

    def all_groups(self) -> Iterator[Group]:
        """Every group, type by type (in registration order)."""
        for groups in self._maps:
            yield from groups.values()

    def get_or_create_simple_group(self, group_id: str) -> Group:
        """The group of that id, or a new simple (offsets-only) group."""
        group = self.group(group_id)
        return group if group is not None else self._simple_groups(group_id)

    def remove_group(self, group_id: str) -> FinishRemoval | None:
        """Remove the group at once (``coordinator.deletion``), by its type; None if there is none."""
        for group_type in self._types:
            if group_id in group_type.groups_by_id:
                return group_type.remove_group(group_id)
        return None
