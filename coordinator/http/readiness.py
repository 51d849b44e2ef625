"""``/readyz`` probes: the state is loaded and the storage answers.

probe = readiness_probe(lambda: app.loaded, sql_ping(record_log.engine))
create_http_app(..., readiness=probe)
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import Any

from .deps import ReadinessProbe, ReadyState


def sql_ping(engine: Any) -> Callable[[], Awaitable[None]]:
    """``SELECT 1`` on a SQLAlchemy ``AsyncEngine``."""
    from sqlalchemy import text

    async def ping() -> None:
        async with engine.connect() as conn:
            await conn.execute(text("SELECT 1"))

    return ping


def readiness_probe(
    loaded: Callable[[], bool], ping: Callable[[], Awaitable[None]] | None = None, *, timeout_s: float = 2.0
) -> ReadinessProbe:
    async def probe() -> ReadyState:
        if not loaded():
            return ReadyState(False, "loading stored state")
        if ping is None:
            return ReadyState(True, "loaded")
        try:
            async with asyncio.timeout(timeout_s):
                await ping()
        except TimeoutError:
            return ReadyState(False, f"storage did not answer within {timeout_s:g}s")
        except Exception as e:
            return ReadyState(False, f"storage unreachable: {type(e).__name__}: {e}")
        return ReadyState(True, "loaded; storage reachable")

    return probe
