"""``/readyz`` probes: the state is loaded, storage writes succeed and the storage answers.

probe = readiness_probe(lambda: app.loaded, sql_ping(record_log.engine), writes=record_log.check_writes)
create_http_app(..., readiness=probe)

Reachability alone is not readiness: with a full disk or read-only files ``SELECT 1`` succeeds while every write
fails. ``writes`` (``SqlRecordLog.check_writes`` in ``storage.record_log``) reports the writer's outcome: the last
write transaction failed, since when and why; while failing it probes with a write of its own, so readiness comes
back by itself when the storage does, without waiting for a client's commit.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import Any, Protocol

from .deps import ReadinessProbe, ReadyState


class WriteHealthView(Protocol):
    @property
    def ok(self) -> bool: ...

    def describe(self) -> str: ...


WriteCheck = Callable[[], Awaitable[WriteHealthView | None]]  # None: no writes to check


def sql_ping(engine: Any) -> Callable[[], Awaitable[None]]:
    """``SELECT 1`` on a SQLAlchemy ``AsyncEngine``."""
    from sqlalchemy import text

    async def ping() -> None:
        async with engine.connect() as conn:
            await conn.execute(text("SELECT 1"))

    return ping


def readiness_probe(
    loaded: Callable[[], bool],
    ping: Callable[[], Awaitable[None]] | None = None,
    *,
    writes: WriteCheck | None = None,
    timeout_s: float = 2.0,
) -> ReadinessProbe:
    async def probe() -> ReadyState:
        if not loaded():
            return ReadyState(False, "loading stored state")
        if writes is not None:
            try:
                async with asyncio.timeout(timeout_s):
                    health = await writes()
            except TimeoutError:
                return ReadyState(False, f"storage write probe did not finish within {timeout_s:g}s")
            if health is not None and not health.ok:
                return ReadyState(False, health.describe())
        if ping is None:
            return ReadyState(True, "loaded")
        try:
            async with asyncio.timeout(timeout_s):
                await ping()
        except TimeoutError:
            return ReadyState(False, f"storage did not answer within {timeout_s:g}s")
        except Exception as e:
            return ReadyState(False, f"storage unreachable: {type(e).__name__}: {e}")
        return ReadyState(True, "loaded; storage reachable; writes succeed" if writes else "loaded; storage reachable")

    return probe
