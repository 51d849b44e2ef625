"""A session never expires only because the daemon had not read a heartbeat that had arrived.

uvloop (libuv) runs due timers before it polls for I/O: after the loop was busy (a long synchronous stretch), a
session timer would expire a member whose heartbeat sits unread in the socket buffer. ``AsyncioTimer`` runs a due
op only after the next poll; these tests block the loop past a deadline while bytes arrive, on asyncio's loop and on
uvloop, first with the bare timer and then with a real member of a real group.
"""

from __future__ import annotations

import asyncio
import socket
import time
from collections.abc import Callable
from datetime import timedelta
from typing import Any

import pytest
import uvloop

from protocol.errors import ErrorCode
from runtime.loop import AsyncioTimer

from .conftest import RunningApp
from .wire import WireClient, build_request

LOOPS: dict[str, Callable[[], asyncio.AbstractEventLoop]] = {
    "asyncio": asyncio.new_event_loop,
    "uvloop": uvloop.new_event_loop,
}


class Blocker(asyncio.Protocol):
    """Keeps the loop busy inside an I/O callback (the poll phase: a heavy request does the same), after which
    libuv runs the due timers before it polls again."""

    def __init__(self, seconds: float, before: Callable[[], Any] = lambda: None) -> None:
        self.seconds = seconds
        self.before = before

    def data_received(self, data: bytes) -> None:
        self.before()
        time.sleep(self.seconds)


@pytest.mark.parametrize("loop_name", sorted(LOOPS))
def test_a_due_timer_op_runs_after_the_bytes_that_arrived_while_the_loop_was_busy(loop_name: str) -> None:
    loop = LOOPS[loop_name]()
    events: list[str] = []
    reader, writer = socket.socketpair()
    busy, busy_peer = socket.socketpair()

    class Reader(asyncio.Protocol):
        def data_received(self, data: bytes) -> None:
            events.append("read")

    async def main() -> None:
        await loop.connect_accepted_socket(Reader, reader)
        timer = AsyncioTimer(loop)

        def arrive_and_expire() -> None:  # inside the busy callback: the bytes arrive, the deadline (30 ms) passes
            writer.send(b"heartbeat")
            timer.schedule("session", 30, lambda: events.append("timer"))

        await loop.connect_accepted_socket(lambda: Blocker(0.15, arrive_and_expire), busy)
        busy_peer.send(b"x")
        await asyncio.sleep(0.3)

    try:
        loop.run_until_complete(main())
    finally:
        loop.close()
        for sock in (writer, busy_peer):
            sock.close()
    assert events == ["read", "timer"]


def _ms(value: int) -> Any:
    return timedelta(milliseconds=value)


@pytest.mark.parametrize("loop_name", sorted(LOOPS))
def test_a_member_whose_heartbeat_arrived_during_a_busy_loop_keeps_its_session(loop_name: str) -> None:
    app = RunningApp()
    app.loop.close()
    app.loop = LOOPS[loop_name]()
    app.start()
    try:
        client = WireClient("127.0.0.1", app.port)
        join = client.call(
            build_request(
                11,
                5,
                group_id="busy-loop",
                session_timeout=_ms(1_000),
                rebalance_timeout=_ms(5_000),
                member_id="",
                group_instance_id=None,
                protocol_type="consumer",
                protocols=[{"name": "range", "metadata": b""}],
            )
        )
        if join.error_code == ErrorCode.member_id_required:
            join = client.call(
                build_request(
                    11,
                    5,
                    group_id="busy-loop",
                    session_timeout=_ms(1_000),
                    rebalance_timeout=_ms(5_000),
                    member_id=join.member_id,
                    group_instance_id=None,
                    protocol_type="consumer",
                    protocols=[{"name": "range", "metadata": b""}],
                )
            )
        assert join.error_code == ErrorCode.none
        member, generation = join.member_id, join.generation_id
        sync = client.call(
            build_request(
                14,
                3,
                group_id="busy-loop",
                generation_id=generation,
                member_id=member,
                group_instance_id=None,
                assignments=[{"member_id": member, "assignment": b""}],
            )
        )
        assert sync.error_code == ErrorCode.none
        heartbeat = build_request(12, 3, group_id="busy-loop", generation_id=generation, member_id=member,
                                  group_instance_id=None)  # fmt: skip
        assert client.call(heartbeat).error_code == ErrorCode.none
        # The loop is busy (in an I/O callback) for longer than the session (1 s) while the next heartbeat arrives.
        busy, busy_peer = socket.socketpair()
        connect = app.loop.connect_accepted_socket(lambda: Blocker(1.5), busy)
        asyncio.run_coroutine_threadsafe(connect, app.loop).result(5)
        busy_peer.send(b"x")
        time.sleep(0.1)
        assert client.call(heartbeat).error_code == ErrorCode.none
        assert client.call(heartbeat).error_code == ErrorCode.none
        client.close()
        busy_peer.close()
    finally:
        app.stop()
