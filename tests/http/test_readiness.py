"""/readyz with the real probes: loaded flag plus a SQL ping on a real (SQLite) engine."""

from __future__ import annotations

from pathlib import Path

from aiohttp.test_utils import TestClient, TestServer

from servers.http import create_http_app
from servers.http.readiness import readiness_probe, sql_ping
from storage import create_engine

from .world import make_world


async def test_ready_only_when_loaded_and_storage_answers(tmp_path: Path) -> None:
    world = make_world()
    state = {"loaded": False}
    good = create_engine(f"sqlite+aiosqlite:///{tmp_path}/db.sqlite")
    bad = create_engine("postgresql+asyncpg://kgc@127.0.0.1:1/kgc", connect_timeout_s=1)  # nothing listens there
    try:
        for engine, ready_after_load in ((good, True), (bad, False)):
            app = create_http_app(world.core, readiness=readiness_probe(lambda: state["loaded"], sql_ping(engine)))
            async with TestClient(TestServer(app)) as client:
                state["loaded"] = False
                r = await client.get("/readyz")
                assert r.status == 503 and (await r.json())["detail"] == "loading stored state"
                state["loaded"] = True
                r = await client.get("/readyz")
                body = await r.json()
                assert (r.status, body["ready"]) == ((200, True) if ready_after_load else (503, False)), body
                if not ready_after_load:
                    assert "storage unreachable" in body["detail"]
                r = await client.get("/healthz")
                assert r.status == 200  # alive either way
    finally:
        await good.dispose()
        await bad.dispose()
