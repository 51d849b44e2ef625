"""What the operator API needs from the rest of the daemon, as structural protocols.

``coordinator.group_coordinator.GroupCoordinator`` satisfies ``CoreFacade``; the server's topic registry satisfies
``TopicRegistry``; ``HistorySource`` is in ``servers.http.history``.
Keeping these as protocols lets the HTTP layer be built and tested against the real core without importing the
asyncio daemon.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Protocol, TypeVar

from coordinator.deferred import Deferred
from coordinator.group import ClassicGroup
from coordinator.messages import (
    DeleteGroupResult,
    OffsetCommitRequest,
    OffsetCommitResult,
    OffsetDeleteRequest,
    OffsetDeleteResult,
)
from protocol.errors import ErrorCode
from runtime.loop import deferred_to_future

T = TypeVar("T")


class GroupsView(Protocol):
    """The classic groups (``GroupManager``): the operator API shows classic details (members with their client,
    host, assignment and session; generations; static instance ids). A second group type (the KIP-848 consumer
    group) would add a view of its own groups here (members with epochs and target assignments) and its entries in
    the group list; group-type-neutral answers come from ``coordinator.group_type.GroupDirectory``
    (``GroupCoordinator.directory``)."""

    def group(self, group_id: str) -> ClassicGroup | None: ...

    def all_groups(self) -> Iterable[ClassicGroup]: ...

    def remove_static_member(self, group_id: str, instance_id: str, reason: str | None) -> Deferred[ErrorCode]: ...


class CommittedOffsetView(Protocol):
    @property
    def offset(self) -> int: ...
    @property
    def leader_epoch(self) -> int: ...
    @property
    def metadata(self) -> str: ...
    @property
    def commit_timestamp_ms(self) -> int: ...
    @property
    def expire_timestamp_ms(self) -> int | None: ...


class OffsetsView(Protocol):
    def committed(self, group_id: str) -> Mapping[tuple[str, int], CommittedOffsetView]: ...

    def commit_offsets(self, req: OffsetCommitRequest) -> Deferred[OffsetCommitResult]: ...

    def delete_offsets(self, req: OffsetDeleteRequest) -> Deferred[OffsetDeleteResult]: ...


class CoreFacade(Protocol):
    @property
    def groups(self) -> GroupsView: ...

    @property
    def offsets(self) -> OffsetsView: ...

    def delete_groups(self, group_ids: list[str | None]) -> Deferred[list[DeleteGroupResult]]: ...


class TopicView(Protocol):
    @property
    def name(self) -> str: ...

    @property
    def partitions(self) -> int: ...


class TopicRegistry(Protocol):
    """``broker.topics.TopicRegistry`` (the server's): names -> partition counts; ``add`` grows only."""

    def get(self, name: str) -> TopicView | None: ...

    def all(self) -> Sequence[TopicView]: ...

    def add(self, name: str, partitions: int) -> TopicView: ...


@dataclass(frozen=True, slots=True)
class ReadyState:
    ready: bool
    detail: str


ReadinessProbe = Callable[[], Awaitable[ReadyState]]


class DeferredTimeout(Exception):
    """A core operation did not complete in time (storage too slow or unreachable)."""


async def wait_deferred(d: Deferred[T], timeout_s: float = 30.0) -> T:
    """Await a core ``Deferred`` on the running loop (it completes on this loop, from a storage callback).

    The bridge is the daemon's one, ``runtime.loop.deferred_to_future``; this adds the operator API's timeout.
    """
    if d.done:
        return d.result()
    try:
        async with asyncio.timeout(timeout_s):
            return await deferred_to_future(d)
    except TimeoutError as e:
        raise DeferredTimeout from e
