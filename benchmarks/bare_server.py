"""Our listener with no coordinator: the daemon's own listener, framing, decoding and encoding, nothing behind them.

    python -m benchmarks.bare_server --listen 127.0.0.1:9093

Not the baseline of the ratios any more (that is ``benchmarks/lean_server.py``, which shares no code with the
daemon); kept because it splits the daemon's distance from the lean server into our listener's share and the rest.
It is ``servers.kafka.listener.KafkaServer`` (same connection handling, ``decode_request``, the same response
encoders: ``encode_response`` and the hand-written frames of the hot paths, uvloop)
with ``handle`` answering from the request alone: JoinGroup makes every member its own leader in generation 1
(MEMBER_ID_REQUIRED first, as the daemon does from v4), SyncGroup hands back the leader's assignment, Heartbeat is
NONE, OffsetCommit is NONE for every partition, ApiVersions lists our versions. No state, no timers, no storage, no
metrics. ``benchmarks.run`` reports it as the *listener* rows of the heartbeat storm.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import itertools
import signal
from typing import Any

from protocol.apis import ApiKey
from protocol.codec import Request, encode_response, heartbeat_response_frame
from protocol.errors import ErrorCode
from protocol.hot_responses import join_group_response_frame, offset_commit_response_frame, sync_group_response_frame
from protocol.responses import api_versions_response, error_response
from servers.kafka.listener import KafkaServer, Slot

_ids = itertools.count(1)


def answer(request: Request) -> Any:
    """The answer to ``request`` without any coordinator logic: a finished frame where the daemon writes one by hand
    (Heartbeat, OffsetCommit, JoinGroup, SyncGroup: the same encoders), else the kio response body."""
    header, body = request.header, request.body
    key, version = header.api_key, header.api_version
    correlation_id = header.correlation_id
    if key == ApiKey.HEARTBEAT:
        return heartbeat_response_frame(version, correlation_id, ErrorCode.none)
    if key == ApiKey.OFFSET_COMMIT:
        topics = [(t.name, [(p.partition_index, 0) for p in t.partitions]) for t in body.topics]
        return offset_commit_response_frame(version, correlation_id, topics)
    if key == ApiKey.JOIN_GROUP:
        if not body.member_id and version >= 4:
            no_name = "" if version < 7 else None  # as the daemon's adapter: not nullable before v7
            member_id = f"bare-{next(_ids)}"
            required = ErrorCode.member_id_required.value
            return join_group_response_frame(
                version, correlation_id, required, -1, None, no_name, "", False, member_id, []
            )
        member_id = body.member_id or f"bare-{next(_ids)}"
        protocol = body.protocols[0]
        members = [(member_id, None, protocol.metadata)]
        return join_group_response_frame(
            version, correlation_id, 0, 1, body.protocol_type, protocol.name, member_id, False, member_id, members
        )
    if key == ApiKey.SYNC_GROUP:
        assignment = next((a.assignment for a in body.assignments if a.member_id == body.member_id), b"")
        return sync_group_response_frame(
            version,
            correlation_id,
            0,
            getattr(body, "protocol_type", None),
            getattr(body, "protocol_name", None),
            assignment,
        )
    if key == ApiKey.API_VERSIONS:
        return api_versions_response(version)
    return error_response(key, version, ErrorCode.none, body)


class _NoAcls:
    enabled = False


class _NoGroups:
    """What the listener's Heartbeat paths call (``Connection._hot_heartbeats``, ``KafkaServer.heartbeat``): NONE for
    every heartbeat, as ``answer``, and no clock."""

    @staticmethod
    def heartbeat_at(now_ms: int, group_id: str, generation_id: int, member_id: str, instance_id: str | None) -> Any:
        return ErrorCode.none

    @staticmethod
    def heartbeat_fields(group_id: str, generation_id: int, member_id: str, instance_id: str | None) -> Any:
        return ErrorCode.none

    @staticmethod
    def monotonic_ms() -> int:
        return 0


class _NoServices:
    closing = False
    authorizer = _NoAcls()
    coordinator = _NoGroups()
    observe_request = None  # no metrics


class BareServer(KafkaServer):
    def __init__(self, host: str, port: int) -> None:
        super().__init__(_NoServices(), host=host, port=port)  # type: ignore[arg-type]

    def handle(
        self, request: Request, client_host: str, principal: str = "User:ANONYMOUS", joined: object = None
    ) -> Slot:
        result = answer(request)
        return result if isinstance(result, bytes) else encode_response(request.header, result)


async def _serve(host: str, port: int) -> None:
    server = BareServer(host, port)
    await server.start()
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        with contextlib.suppress(NotImplementedError, RuntimeError):
            loop.add_signal_handler(sig, stop.set)
    print(f"bare server listening on {host}:{server.bound_port}", flush=True)
    try:
        await stop.wait()
    finally:
        await server.stop()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--listen", default="127.0.0.1:9093", metavar="HOST:PORT")
    args = parser.parse_args()
    host, _, port = args.listen.rpartition(":")
    try:
        import uvloop
    except ImportError:
        asyncio.run(_serve(host, int(port)))
    else:
        uvloop.run(_serve(host, int(port)))


if __name__ == "__main__":
    main()
