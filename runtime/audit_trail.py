"""The audit trail: admin actions with their actor, appended to the record log and kept in memory for the dashboard.

    trail = AuditTrail(record_log.append, clock.now_ms, reader=queries.admin_actions)   # reader: the stored ones
    trail.record(Via.HTTP, Action.GROUP_DELETE, "g", group_id="g", principal="User:ada", client_id="kgc",
                 client_host="10.0.0.7", detail="group deleted through the operator API")
    actions, total = await trail.actions(group_id="g", limit=50)

``record`` is called once an action is done (durable). It appends one ``security.audit.AdminAction`` to the record
log (the same batched write path as every record; nobody waits for it: the action is already answered) and keeps it
in a bounded in-memory list (``keep``), which answers ``actions`` when there is no stored history (``--storage-url
memory``). A write that fails is logged at WARNING: the action happened, its audit row is lost, the log line
(``servers.http.audit`` / ``servers.kafka.audit``) still names the actor.

Generation -1 OffsetCommits (``Action.OFFSETS_ALTER``) are also what a consumer without group management
(``assign()``) sends on every commit: one client's repeated ones within ``coalesce_ms`` are one entry (the first),
so such a consumer adds at most one audit row per ``coalesce_ms`` and group.
"""

from __future__ import annotations

import logging
from collections import deque
from collections.abc import Awaitable, Callable, Sequence
from typing import Any, Protocol

from security.audit import Action, AdminAction, Via

log = logging.getLogger(__name__)


class ActionReader(Protocol):
    def __call__(
        self,
        group_id: str | None = None,
        *,
        since_ms: int | None = None,
        until_ms: int | None = None,
        limit: int = 100,
        offset: int = 0,
    ) -> Awaitable[tuple[list[AdminAction], int]]: ...


Append = Callable[[Sequence[Any], Any], None]  # RecordLog.append(records, on_done)


class AuditTrail:
    def __init__(
        self,
        append: Append | None,
        now_ms: Callable[[], int],
        *,
        reader: ActionReader | None = None,
        keep: int = 1_000,
        coalesce_ms: int = 10_000,
    ) -> None:
        self._append = append
        self._now_ms = now_ms
        self._reader = reader
        self._recent: deque[AdminAction] = deque(maxlen=keep)
        self._coalesce_ms = coalesce_ms
        self._last_alter: dict[tuple[str | None, str, str | None, str | None], int] = {}

    def record(
        self,
        via: Via,
        action: Action,
        resource: str,
        *,
        group_id: str | None,
        principal: str,
        client_id: str | None,
        client_host: str | None,
        detail: str,
    ) -> AdminAction | None:
        """Append one admin action (module docstring); None when coalesced into an earlier one."""
        now = self._now_ms()
        if action is Action.OFFSETS_ALTER:
            key = (group_id, principal, client_id, client_host)
            last = self._last_alter.get(key)
            if last is not None and now - last < self._coalesce_ms:
                return None
            if len(self._last_alter) >= 10_000:  # bounded: forget the oldest half
                for k in list(self._last_alter)[:5_000]:
                    del self._last_alter[k]
            self._last_alter[key] = now
        entry = AdminAction(
            timestamp_ms=now, via=via, action=action, resource=resource, group_id=group_id, principal=principal,
            client_id=client_id or None, client_host=client_host or None, detail=detail,
        )  # fmt: skip
        self._recent.append(entry)
        if self._append is not None:
            self._append([entry], _on_written)
        return entry

    async def actions(
        self,
        group_id: str | None = None,
        *,
        since_ms: int | None = None,
        until_ms: int | None = None,
        limit: int = 100,
        offset: int = 0,
    ) -> tuple[list[AdminAction], int]:
        """Newest first, paged, with the total: the stored actions when there is a reader, else the kept ones."""
        if self._reader is not None:
            return await self._reader(group_id, since_ms=since_ms, until_ms=until_ms, limit=limit, offset=offset)
        selected = [
            a
            for a in reversed(self._recent)
            if (group_id is None or a.group_id == group_id)
            and (since_ms is None or a.timestamp_ms >= since_ms)
            and (until_ms is None or a.timestamp_ms < until_ms)
        ]
        return selected[offset : offset + limit], len(selected)


def _on_written(error: object) -> None:
    if error is not None:
        log.warning("audit: an admin action's record was not stored: %s", error, extra={"throttle": ("audit-write",)})
