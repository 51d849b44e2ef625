"""Acceptance 4: a PostgreSQL outage under load. The daemon talks to PostgreSQL through a TCP proxy; cutting it (every
connection closed, new ones refused) while a kafka-python member commits in a loop: its commits fail (the daemon
answers COORDINATOR_NOT_AVAILABLE, kafka-python's commit() raises after retrying), the daemon stays up and not ready,
the group keeps heartbeating in its generation, and when the proxy is back commits succeed again by themselves.
Nothing acknowledged is lost: checked on the live daemon after the outage and after a restart on the database."""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy.engine import make_url

from tests.e2e.daemon import Daemon
from tests.e2e.helpers import KafkaPythonMember, wait_for
from tests.storage.tcp_proxy import TcpProxy

from .clients import Committer, check_read_back, http_get, ready, stored_offsets
from .conftest import TOPIC, Backend, make_daemon

pytestmark = [pytest.mark.e2e, pytest.mark.postgres]

GROUP = "outage-committer"
BYSTANDER = "outage-bystander"
OUTAGE_S = 3.0


class ThreadedProxy:
    """tests/storage's asyncio TcpProxy on its own loop in a thread, driven from synchronous test code."""

    def __init__(self, host: str, port: int) -> None:
        self.proxy = TcpProxy(host, port)
        self.loop = asyncio.new_event_loop()
        self.thread = threading.Thread(target=self.loop.run_forever, name="pg-proxy", daemon=True)
        self.thread.start()

    def _run(self, coro: Any) -> None:
        asyncio.run_coroutine_threadsafe(coro, self.loop).result(10)

    def start(self) -> None:
        self._run(self.proxy.start())  # the same port again after a stop

    def cut(self) -> None:
        self._run(self.proxy.stop())

    def close(self) -> None:
        self.cut()
        self.loop.call_soon_threadsafe(self.loop.stop)
        self.thread.join(10)
        self.loop.close()


@pytest.fixture
def proxied(tmp_path: Path, pg_database: str) -> Iterator[tuple[Daemon, ThreadedProxy]]:
    target = make_url(pg_database)
    proxy = ThreadedProxy(target.host or "127.0.0.1", target.port or 5432)
    proxy.start()
    url = target.set(host="127.0.0.1", port=proxy.proxy.port).render_as_string(hide_password=False)
    daemon = make_daemon(tmp_path, Backend("postgresql", url))
    try:
        yield daemon.start(), proxy
    finally:
        daemon.stop()
        proxy.close()


def _member_view(daemon: Daemon, group: str = GROUP) -> dict[str, Any]:
    g: dict[str, Any] = http_get(daemon.http_url, f"/v1/groups/{group}")
    return g


def test_postgres_outage_under_load(proxied: tuple[Daemon, ThreadedProxy]) -> None:
    daemon, proxy = proxied
    committer = Committer(daemon.bootstrap, GROUP, TOPIC)
    # A member of another group that only heartbeats. (The committer's own heartbeats pause while kafka-python
    # rediscovers the coordinator after each COORDINATOR_NOT_AVAILABLE commit, as with a real broker.)
    bystander = KafkaPythonMember(daemon.bootstrap, BYSTANDER, "dur6")
    try:
        bystander.start()
        committer.start()
        wait_for(lambda: bystander.assignment and _member_view(daemon, BYSTANDER)["state"] == "Stable", 30, "bystander")
        bystander_generation = _member_view(daemon, BYSTANDER)["generation_id"]
        wait_for(lambda: committer.acks() >= 5, 30, "commits acknowledged before the outage")
        group = wait_for(lambda: (g := _member_view(daemon))["state"] == "Stable" and g, 30, "a Stable group")
        generation = group["generation_id"]
        before = committer.snapshot()

        proxy.cut()
        cut_at = time.monotonic()
        wait_for(lambda: committer.snapshot().failures >= before.failures + 2, 30, "commits failing")
        wait_for(lambda: not ready(daemon.http_url), 10, "/readyz false while the database is unreachable")
        # The outage lasts a while; the groups stay as they are and heartbeats go on (they never touch storage).
        while time.monotonic() - cut_at < OUTAGE_S:
            assert daemon.process is not None and daemon.process.poll() is None, "the daemon died"
            g = _member_view(daemon)
            assert g["state"] == "Stable" and g["generation_id"] == generation, g
            b = _member_view(daemon, BYSTANDER)
            assert b["state"] == "Stable" and b["generation_id"] == bystander_generation, b
            assert all(m["since_last_heartbeat_ms"] < 1500 for m in b["members"]), b
            time.sleep(0.2)
        during = committer.snapshot()
        assert during.acks <= before.acks + 1, "commits were acknowledged while the database was cut off"
        assert "CoordinatorNotAvailableError" in during.response_errors, during.response_errors

        proxy.start()
        wait_for(lambda: committer.acks() >= during.acks + 5, 60, "commits acknowledged again after the outage")
        wait_for(lambda: ready(daemon.http_url), 30, "/readyz true again")
        committer.pause()
        stats = committer.snapshot()
        live = {tp: o for tp, o in stored_offsets(daemon.http_url, GROUP).items() if tp[0] == TOPIC}
        assert not check_read_back(stats, live), (stats, live)
        assert live == stats.acked  # nothing in flight when paused: exactly the last acknowledged
        assert _member_view(daemon)["generation_id"] == generation

        assert daemon.stop() == 0
        daemon.start()
        wait_for(lambda: ready(daemon.http_url), 30, "restarted daemon ready")
        reloaded = {tp: o for tp, o in stored_offsets(daemon.http_url, GROUP).items() if tp[0] == TOPIC}
        assert reloaded == stats.acked
    finally:
        committer.close()
        bystander.close()
    print(
        f"\noutage: {stats.acks} commits acknowledged, {stats.failures} raised, response errors {stats.response_errors}"
    )
