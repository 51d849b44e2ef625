"""Recent group activity for the operator's "what is wrong now" views, kept small and in memory.

``GroupActivity`` listens to the record stream (``runtime.record_stream.RecordListener``) and is told of refused
joins by the Kafka listener (``Services.on_join_refused``, called where a JoinGroup answer is built: the core stays
pure and never calls it). It keeps, per group:

* the start times of its rebalances in the last ``window_ms`` (rebalances per hour, flapping), at most
  ``max_starts`` of them;
* the time of its last durable offset commit (seeded from the live committed offsets on first read, so a group
  loaded at start has one too);
* a ring of its last ``max_events`` refused JoinGroups (``RefusedJoin``): a refusal changes no state and is in no
  record, so this is the only place that knows it.

Static replacements, deletions and re-creations are not kept here: the history fold
(``coordinator.history.fold_history``) tells them from the stored records, and they survive a restart.

Everything here is since the daemon started: it does not survive a restart. All of it runs on the event loop
thread, like the core; the work per record is a few dict and deque operations, and the number of groups kept is
bounded by ``max_groups`` (the oldest group's entries go first).
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from coordinator.messages import JoinGroupRequest
from coordinator.records import (
    GroupTombstone,
    OffsetCommitRecord,
    RebalanceStarted,
    Record,
)
from protocol.errors import ErrorCode

# JoinGroup answers that turn a client away for its configuration (the errors of kgc_join_refused_total).
JOIN_REFUSALS = frozenset({ErrorCode.inconsistent_group_protocol, ErrorCode.invalid_session_timeout,
                           ErrorCode.group_max_size_reached})  # fmt: skip

HOUR_MS = 3_600_000


@dataclass(frozen=True, slots=True)
class RefusedJoin:
    group_id: str
    timestamp_ms: int
    detail: str
    member_id: str  # the refused member's id ("" for a new one)
    group_instance_id: str | None
    client_id: str
    client_host: str
    error: str  # Kafka's error name


class GroupActivity:
    durable_types: frozenset[type] = frozenset({OffsetCommitRecord})

    def __init__(
        self,
        now_ms: Callable[[], int],
        *,
        window_ms: int = HOUR_MS,
        max_starts: int = 1_000,
        max_events: int = 50,
        max_groups: int = 10_000,
    ) -> None:
        self._now_ms = now_ms
        self.window_ms = window_ms
        self._max_starts = max_starts
        self._max_events = max_events
        self._max_groups = max_groups
        self._starts: dict[str, deque[int]] = {}
        self._last_commit: dict[str, int] = {}
        self._refusals: dict[str, deque[RefusedJoin]] = {}

    # ----------------------------------------------------------------------------------------- record stream

    def on_append(self, records: Sequence[Record]) -> None:
        for rec in records:
            if isinstance(rec, RebalanceStarted):
                q = self._starts.get(rec.group_id)
                if q is None:
                    self._bound(self._starts)
                    q = self._starts[rec.group_id] = deque(maxlen=self._max_starts)
                q.append(rec.timestamp_ms)
            elif isinstance(rec, GroupTombstone):
                # its offsets went with it; its rebalances still count for the group id
                self._last_commit.pop(rec.group_id, None)

    def on_durable(self, records: Sequence[Record]) -> None:
        for rec in records:
            if not isinstance(rec, OffsetCommitRecord):
                continue
            last = self._last_commit.get(rec.group_id)
            if last is None:
                self._bound(self._last_commit)
            if last is None or rec.commit_timestamp_ms > last:
                self._last_commit[rec.group_id] = rec.commit_timestamp_ms

    # ----------------------------------------------------------------------------------------- refused joins

    def join_refused(self, req: JoinGroupRequest, error: ErrorCode) -> None:
        """A JoinGroup answered with one of ``JOIN_REFUSALS`` (called by the Kafka listener)."""
        if error is ErrorCode.invalid_session_timeout:
            detail = f"session timeout {req.session_timeout_ms} ms outside the allowed range"
        elif error is ErrorCode.group_max_size_reached:
            detail = "group.max.size reached"
        else:
            names = ",".join(name for name, _ in req.protocols) or "(none)"
            detail = f"protocol type {req.protocol_type or '(empty)'} with protocols {names}"
        refusal = RefusedJoin(req.group_id, self._now_ms(), detail, req.member_id, req.group_instance_id,
                              req.client_id, req.client_host, error.name.upper())  # fmt: skip
        q = self._refusals.get(req.group_id)
        if q is None:
            self._bound(self._refusals)
            q = self._refusals[req.group_id] = deque(maxlen=self._max_events)
        q.append(refusal)

    # ----------------------------------------------------------------------------------------------- reading

    def rebalances_in_window(self, group_id: str) -> int:
        """Rebalances the group started in the last ``window_ms`` (old starts are dropped as they are counted)."""
        q = self._starts.get(group_id)
        if not q:
            return 0
        horizon = self._now_ms() - self.window_ms
        while q and q[0] < horizon:
            q.popleft()
        return len(q)

    def last_commit_ms(self, group_id: str, seed: Callable[[], Iterable[int]] | None = None) -> int | None:
        """The time of the group's last durable commit; ``seed`` (the commit times of its live committed offsets)
        is read once for a group that has committed nothing since the daemon started."""
        ts = self._last_commit.get(group_id)
        if ts is None and seed is not None:
            ts = max(seed(), default=None)
            if ts is not None:
                self._bound(self._last_commit)
                self._last_commit[group_id] = ts
        return ts

    def refusals(self, group_id: str) -> list[RefusedJoin]:
        """The group's last ``max_events`` refused joins, newest first."""
        return list(reversed(self._refusals.get(group_id, ())))

    def refused_since(self, group_id: str, since_ms: int) -> int:
        return sum(1 for e in self._refusals.get(group_id, ()) if e.timestamp_ms >= since_ms)

    # -------------------------------------------------------------------------------------------- internals

    def _bound(self, table: dict[str, Any]) -> None:
        """Before adding a group to ``table``: drop its oldest group when it is full."""
        while len(table) >= self._max_groups:
            del table[next(iter(table))]
