"""Heartbeats read in place (``Connection._hot_heartbeats``) are answered exactly as the general path answers them
(frame decoder, ``decode_request``, ``KafkaServer.handle``): the same bytes in the same order, the same connection
closes and the same metrics, for every Heartbeat version and outcome, mixed with other requests, split across reads
at every kind of boundary, and for the frames the in-place path leaves to the general one (header tags, unknown body
tags, versions not served, bad client ids, bodies running past their frame)."""

from __future__ import annotations

import asyncio
import random
import struct
from typing import Any

import pytest

from coordinator import messages as m
from daemon.app import App
from daemon.settings import load_settings
from protocol.errors import ErrorCode
from security.acls import AclBinding, AclOperation, PatternType, PermissionType, ResourceType
from servers.kafka.listener import FRAMES_PER_TURN, Connection

from .wire import build_request, request_frame


class _Transport:
    def __init__(self) -> None:
        self.out: list[bytes] = []
        self.closed = False
        self.paused = False

    def write(self, data: bytes) -> None:
        self.out.append(bytes(data))

    def get_extra_info(self, name: str, default: Any = None) -> Any:
        return ("127.0.0.1", 50000) if name == "peername" else default

    def is_closing(self) -> bool:
        return self.closed

    def pause_reading(self) -> None:
        self.paused = True

    def resume_reading(self) -> None:
        self.paused = False

    def close(self) -> None:
        self.closed = True

    def abort(self) -> None:
        self.closed = True


async def _app() -> tuple[App, str, int]:
    settings = load_settings(None, storage={"url": "memory"}, group={"initial_rebalance_delay_ms": 0})
    app = App(settings)
    app.coordinator.groups.join_group(
        m.JoinGroupRequest(group_id="g", member_id="", group_instance_id=None, protocol_type="consumer",
                           protocols=[("range", b"")], session_timeout_ms=30_000, rebalance_timeout_ms=30_000,
                           client_id="c", client_host="/h", api_version=3)
    )  # fmt: skip
    group = app.coordinator.groups.group("g")
    assert group is not None
    for _ in range(200):  # the join completes on the loop (initial delay 0): then nothing changes for 30 s
        if group.generation_id:
            break
        await asyncio.sleep(0.01)
    assert group.generation_id
    return app, next(iter(group.members)), group.generation_id


def _heartbeat(version: int, corr: int, client_id: str | None = "hb", **fields: Any) -> bytes:
    if version >= 3:
        fields.setdefault("group_instance_id", None)
    return request_frame(build_request(12, version, **fields), corr, client_id)  # type: ignore[arg-type]


def _reframe(payload: bytes) -> bytes:
    return struct.pack(">i", len(payload)) + payload


def _frames(member_id: str, generation: int, rng: random.Random, count: int) -> list[bytes]:
    """Well-formed requests the connection answers and stays open for."""
    out = []
    for corr in range(count):
        kind = rng.randrange(10)
        version = rng.randrange(5)
        fields = {"group_id": "g", "generation_id": generation, "member_id": member_id}
        if kind == 0:
            fields["generation_id"] = generation + 1  # ILLEGAL_GENERATION
        elif kind == 1:
            fields["member_id"] = "nobody"  # UNKNOWN_MEMBER_ID
        elif kind == 2:
            fields["group_id"] = ""  # INVALID_GROUP_ID
        if kind == 3:
            out.append(request_frame(build_request(18, 3, client_software_name="t", client_software_version="1"), corr))
        elif kind == 4:
            out.append(_heartbeat(version, corr, rng.choice([None, "", "c", "cc", "hb", "client-ü"]), **fields))
        elif kind == 5:  # v4 with a header tag: the general path skips it
            frame = _heartbeat(4, corr, "hb", **fields)
            at = 4 + 10 + 2  # size, api key/version/correlation id/client id length, "hb"
            out.append(_reframe(frame[4:at] + b"\x01\x05\x01X" + frame[at + 1 :]))
        elif kind == 6:  # v4 with an unknown tagged field in the body: the tolerant reader
            frame = _heartbeat(4, corr, "hb", **fields)
            out.append(_reframe(frame[4:-1] + b"\x01\x07\x00"))
        else:
            out.append(_heartbeat(version, corr, "hb", **fields))
    return out


def _bad_ends(member_id: str, generation: int) -> list[bytes]:
    """Frames after which the connection closes (the last one is a framing error, see below)."""
    good = _heartbeat(4, 99, "hb", group_id="g", generation_id=generation, member_id=member_id)
    return [
        good[:6] + b"\x00\x05" + good[8:],  # a Heartbeat version not served (and no error response to encode)
        _reframe(good[4 : 6 + 8] + b"\x00\x02\xff\xfe" + good[4 + 12 :]),  # client id not UTF-8
        _reframe(good[4:-3]),  # the body runs past the frame
        _reframe(good[4:12]),  # shorter than a header
        b"\xff\xff\xff\xf0" + good[4:],  # a negative size
    ]


async def _feed(app: App, reads: list[bytes], hot: bool) -> tuple[bytes, bool, list[tuple[Any, ...]]]:
    calls: list[tuple[Any, ...]] = []
    app.services.observe_request = lambda key, seconds, error, count=1: calls.append((key, int(error), count))
    server = app.server
    server.heartbeat_sample = server.heartbeat_sample_errors = 0
    connection, transport = Connection(server), _Transport()
    in_place = connection._hot_heartbeats

    def counted(data: bytes) -> int:
        done = in_place(data) if hot else 0
        calls.append(("in place", done > 0))
        return done

    connection._hot_heartbeats = counted  # type: ignore[method-assign]
    connection.connection_made(transport)  # type: ignore[arg-type]
    for data in reads:
        connection.data_received(data)
        for _ in range(3):
            await asyncio.sleep(0)  # the backlog's turns (FRAMES_PER_TURN)
    for _ in range(10):
        await asyncio.sleep(0)
    calls.append(("untimed", server.untimed_heartbeats))
    connection.connection_lost(None)
    return b"".join(transport.out), transport.closed, calls


def _same(hot: tuple[bytes, bool, list[Any]], general: tuple[bytes, bool, list[Any]]) -> None:
    """Same bytes, close and metrics; the in-place path was taken at least once on ``hot``, never on ``general``."""
    assert hot[:2] == general[:2]
    assert [c for c in hot[2] if c[0] != "in place"] == [c for c in general[2] if c[0] != "in place"]
    assert ("in place", True) not in general[2]


def _split(stream: bytes, rng: random.Random) -> list[bytes]:
    cuts = sorted(rng.sample(range(1, len(stream)), min(len(stream) - 1, rng.randrange(0, 12))))
    return [stream[a:b] for a, b in zip([0, *cuts], [*cuts, len(stream)], strict=True)]


@pytest.mark.parametrize("seed", range(40))
async def test_same_bytes_closes_and_metrics_as_the_general_path(seed: int) -> None:
    app, member_id, generation = await _app()
    try:
        rng = random.Random(seed)
        first = _heartbeat(4, 1000, group_id="g", generation_id=generation, member_id=member_id)
        frames = [first, *_frames(member_id, generation, rng, rng.randrange(1, 40))]
        tail: list[bytes] = []
        if seed % 3 == 0:
            bad = _bad_ends(member_id, generation)
            tail = [bad[seed // 3 % len(bad)], *_frames(member_id, generation, rng, 3)]  # the 3: never answered
        stream = b"".join(frames)
        reads = [stream] if seed % 2 else _split(stream, rng)
        if tail and seed // 3 % len(bad) == len(bad) - 1:
            # A bad frame size: the general path's decoder refuses the whole read it is in, the requests before it
            # too, where the in-place path has answered those already (as both do when the bad size comes in a
            # read of its own: test_a_bad_frame_size_after_heartbeats_in_one_read). Here it comes on its own.
            reads.append(b"".join(tail))
        elif tail:
            reads[-1] += b"".join(tail)
        hot = await _feed(app, reads, hot=True)
        general = await _feed(app, reads, hot=False)
        _same(hot, general)
        assert hot[0]  # something was answered
        if len(reads[0]) >= len(first):
            assert ("in place", True) in hot[2]
    finally:
        app.timer.cancel_all()


async def test_a_long_read_takes_turns_like_the_general_path() -> None:
    app, member_id, generation = await _app()
    try:
        beat = {"group_id": "g", "generation_id": generation, "member_id": member_id}
        stream = b"".join(_heartbeat(4, corr, **beat) for corr in range(3 * FRAMES_PER_TURN + 5))
        hot = await _feed(app, [stream], hot=True)
        general = await _feed(app, [stream], hot=False)
        _same(hot, general)
        assert ("in place", True) in hot[2]
        assert len(hot[0]) == 16 * (3 * FRAMES_PER_TURN + 5)
    finally:
        app.timer.cancel_all()


async def test_refusals_across_the_timed_heartbeat_in_one_read() -> None:
    """The in-place path counts the heartbeats it answers itself and hands the timed one and the refused ones to the
    server: across several timing samples, with refusals before and after each timed one, the same counts."""
    app, member_id, generation = await _app()
    try:
        beat = {"group_id": "g", "generation_id": generation, "member_id": member_id}
        wrong = {**beat, "generation_id": generation + 1}  # ILLEGAL_GENERATION
        frames = [_heartbeat(4 if corr % 5 else 1, corr, **(wrong if corr % 7 == 3 else beat)) for corr in range(200)]
        for split in ([b"".join(frames)], [b"".join(frames[:61]), b"".join(frames[61:130]), b"".join(frames[130:])]):
            hot = await _feed(app, split, hot=True)
            general = await _feed(app, split, hot=False)
            _same(hot, general)
            assert ("in place", True) in hot[2]
            assert sum(c[2] for c in hot[2] if c[0] == 12 and c[1] == 0) > 0  # timed samples were taken
    finally:
        app.timer.cancel_all()


@pytest.mark.parametrize("denied", [False, True])
async def test_with_acls_on_the_same_as_the_general_path(denied: bool) -> None:
    """With ACLs on, every heartbeat read in place goes through the server's ACL check: allowed (no ACL on the group
    and allow.everyone.if.no.acl.found) or denied (GROUP_AUTHORIZATION_FAILED), the same bytes and counts as the
    general path, across timing samples."""
    app, member_id, generation = await _app()
    try:
        authorizer = app.services.authorizer
        authorizer.enabled = True
        authorizer.allow_everyone_if_no_acl_found = True
        if denied:
            authorizer.index.add(AclBinding(ResourceType.GROUP, "g", PatternType.LITERAL, "User:ANONYMOUS", "*",
                                            AclOperation.READ, PermissionType.DENY))  # fmt: skip
        rng = random.Random(7)
        first = _heartbeat(4, 1000, group_id="g", generation_id=generation, member_id=member_id)
        frames = [first, *_frames(member_id, generation, rng, 150)]
        hot = await _feed(app, [b"".join(frames)], hot=True)
        general = await _feed(app, [b"".join(frames)], hot=False)
        _same(hot, general)
        assert ("in place", True) in hot[2]
        codes = {c[1] for c in hot[2] if c[0] == 12}
        assert (int(ErrorCode.group_authorization_failed) in codes) is denied
    finally:
        app.timer.cancel_all()


async def test_a_bad_frame_size_after_heartbeats_in_one_read() -> None:
    """The one difference from the general path: heartbeats read in place are answered before a bad frame size
    later in the same read closes the connection; the general path's decoder refuses the whole read. Both are
    what a client can get (the same bytes split over two reads get the answers on both paths), and Kafka reads a
    request at a time."""
    app, member_id, generation = await _app()
    try:
        beat = {"group_id": "g", "generation_id": generation, "member_id": member_id}
        good = b"".join(_heartbeat(4, corr, **beat) for corr in range(3))
        bad = b"\xff\xff\xff\xf0" + good[4:20]
        hot = await _feed(app, [good + bad], hot=True)
        general_split = await _feed(app, [good, bad], hot=False)
        general_one_read = await _feed(app, [good + bad], hot=False)
        _same(hot, general_split)
        assert hot[1] and len(hot[0]) == 3 * 16
        assert general_one_read[0] == b"" and general_one_read[1]
    finally:
        app.timer.cancel_all()
