"""The server's Heartbeat path (straight to the core, packed answer) answers exactly as the generic adapter path
(``handle_heartbeat`` + ``encode_response``) does, for every version and outcome, and an internal error becomes the
same UNKNOWN_SERVER_ERROR response."""

from __future__ import annotations

from typing import Any

import pytest

from coordinator import messages as m
from daemon.app import App
from daemon.settings import load_settings
from protocol.codec import decode_request, encode_response
from protocol.errors import ErrorCode
from servers.kafka import RequestContext, Services
from servers.kafka.listener import HEARTBEAT_TIMING_SAMPLE, KafkaServer
from servers.kafka.membership import handle_heartbeat

from .wire import build_request, request_frame


def _request(version: int, **fields: Any) -> Any:
    if version < 3:
        fields.pop("group_instance_id", None)
    return decode_request(request_frame(build_request(12, version, **fields), 41)[4:])


def _generic(services: Services, request: Any) -> bytes:
    h = request.header
    ctx = RequestContext(h.api_key, h.api_version, h.correlation_id, h.client_id or "", "/127.0.0.1")
    return encode_response(h, handle_heartbeat(services, ctx, request.body))


async def _stable_app() -> tuple[App, str, int]:
    settings = load_settings(None, storage={"url": "memory"}, group={"initial_rebalance_delay_ms": 0})
    app = App(settings)
    groups = app.coordinator.groups
    groups.join_group(
        m.JoinGroupRequest(group_id="g", member_id="", group_instance_id=None, protocol_type="consumer",
                           protocols=[("range", b"")], session_timeout_ms=30_000, rebalance_timeout_ms=30_000,
                           client_id="c", client_host="/h", api_version=3)
    )  # fmt: skip
    group = groups.group("g")
    assert group is not None
    member_id = next(iter(group.members))
    return app, member_id, group.generation_id


@pytest.mark.parametrize("version", range(5))
async def test_same_answer_as_the_adapter_path(version: int) -> None:
    app, member_id, generation = await _stable_app()
    try:
        server = app.server
        cases = [
            {"group_id": "g", "generation_id": generation, "member_id": member_id},  # rebalance in progress / none
            {"group_id": "g", "generation_id": generation + 5, "member_id": member_id},  # illegal generation
            {"group_id": "g", "generation_id": generation, "member_id": "nobody"},  # unknown member
            {"group_id": "nope", "generation_id": 1, "member_id": "m"},  # unknown group
            {"group_id": "", "generation_id": 1, "member_id": "m"},  # invalid group id
            {"group_id": "g", "generation_id": generation, "member_id": member_id, "group_instance_id": "i"},
        ]
        for fields in cases:
            request = _request(version, **{"group_instance_id": None, **fields})
            assert server.handle(request, "/127.0.0.1") == _generic(app.services, request), fields
    finally:
        app.timer.cancel_all()


class _Broken:
    def heartbeat(self, request: m.HeartbeatRequest) -> ErrorCode:
        raise RuntimeError("bug")


async def test_internal_error_is_the_generic_error_response() -> None:
    app, _, _ = await _stable_app()
    try:
        services = Services(coordinator=_Broken(), topics=app.topics, node=app.services.node)  # type: ignore[arg-type]
        server = KafkaServer(services)
        request = _request(4, group_id="g", generation_id=1, member_id="m", group_instance_id=None)
        frame = server.handle(request, "/127.0.0.1")
        assert isinstance(frame, bytes)
        expected = server._error_frame(
            request, RequestContext(12, 4, 41, "wire-test", "/127.0.0.1"), RuntimeError("bug")
        )
        assert frame == expected
        # UNKNOWN_SERVER_ERROR (-1) in the error field of a v4 answer: size, correlation, tags, throttle, error, tags
        assert frame[13:15] == b"\xff\xff"
    finally:
        app.timer.cancel_all()


async def test_every_heartbeat_is_counted_and_one_in_sixteen_timed() -> None:
    app, member_id, generation = await _stable_app()
    try:
        request = _request(4, group_id="g", generation_id=generation, member_id=member_id, group_instance_id=None)

        def scrape() -> tuple[float, float]:
            text = app.metrics.render().decode()
            count = sample = 0.0
            for line in text.splitlines():
                if line.startswith('kgc_requests_total{api="Heartbeat"'):
                    count += float(line.rsplit(" ", 1)[1])
                elif line.startswith('kgc_request_seconds_count{api="Heartbeat"'):
                    sample = float(line.rsplit(" ", 1)[1])
            return count, sample

        for n in range(1, 2 * HEARTBEAT_TIMING_SAMPLE + 9):  # past two timed ones
            app.server.handle(request, "/127.0.0.1")
            assert scrape() == (n, n // HEARTBEAT_TIMING_SAMPLE), n
    finally:
        app.timer.cancel_all()
