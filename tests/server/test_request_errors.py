"""/metrics labels each answered Kafka request with the error it was answered with (issue #18): the top-level error
where the answer has one, else the first non-zero per-entry error; and a JoinGroup refused for the client's
configuration is counted in kgc_join_refused_total and logged once per group and cause (throttled)."""

from __future__ import annotations

import logging
import urllib.request
from collections.abc import Iterator
from datetime import timedelta
from typing import Any

import pytest
from prometheus_client.parser import text_string_to_metric_families

from coordinator import messages as m
from daemon.app import App
from daemon.settings import load_settings
from protocol.errors import ErrorCode
from runtime.logging_setup import LogfmtFormatter

from .conftest import RunningApp
from .wire import WireClient, build_request


def _metrics(running: RunningApp) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    port = running.app.http_port
    assert port is not None
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5) as response:
        text = response.read().decode()
    out = {}
    for family in text_string_to_metric_families(text):
        for s in family.samples:
            out[(s.name, tuple(sorted(s.labels.items())))] = s.value
    return out


def _requests(got: dict[tuple[str, tuple[tuple[str, str], ...]], float], api: str, error: str) -> float:
    return got.get(("kgc_requests_total", (("api", api), ("error", error))), 0.0)


@pytest.fixture
def running() -> Iterator[RunningApp]:
    app = RunningApp().start()
    try:
        yield app
    finally:
        app.stop()


def _join(client: WireClient, group: str, session_ms: int, protocol_type: str = "consumer") -> Any:
    return client.call(
        build_request(
            11, 5, group_id=group, session_timeout=timedelta(milliseconds=session_ms),
            rebalance_timeout=timedelta(milliseconds=10_000), member_id="", group_instance_id=None,
            protocol_type=protocol_type, protocols=[{"name": "range", "metadata": b""}],
        )
    )  # fmt: skip


def test_error_label_is_the_answers_error(running: RunningApp) -> None:
    client = WireClient("127.0.0.1", running.port)
    try:
        # Heartbeat fast path: a member the coordinator does not know
        for _ in range(3):
            answer = client.call(build_request(12, 4, group_id="g", generation_id=1, member_id="ghost",
                                               group_instance_id=None))  # fmt: skip
            assert answer.error_code == ErrorCode.unknown_member_id
        # OffsetCommit (a finished frame, per-partition errors only): a partition that does not exist
        answer = client.call(
            build_request(
                8, 8, group_id="g", generation_id_or_member_epoch=-1, member_id="", group_instance_id=None,
                topics=[{"name": "nope", "partitions": [{"partition_index": 0, "committed_offset": 1,
                                                         "committed_leader_epoch": -1, "committed_metadata": ""}]}],
            )
        )  # fmt: skip
        assert answer.topics[0].partitions[0].error_code == ErrorCode.unknown_topic_or_partition
        # DeleteGroups (kio body, per-group errors only): a group that does not exist
        answer = client.call(build_request(42, 2, groups_names=("nope",)))
        assert answer.results[0].error_code == ErrorCode.group_id_not_found
        # JoinGroup (a parked answer, a finished frame): a session timeout below group.min.session.timeout.ms
        answer = _join(client, "g", session_ms=10)
        assert answer.error_code == ErrorCode.invalid_session_timeout
        # An answer without error is still "none"
        client.call(build_request(18, 3, client_software_name="t", client_software_version="1"))
    finally:
        client.close()
    got = _metrics(running)
    assert _requests(got, "Heartbeat", "unknown_member_id") == 3
    assert _requests(got, "Heartbeat", "none") == 0
    assert _requests(got, "OffsetCommit", "unknown_topic_or_partition") == 1
    assert _requests(got, "OffsetCommit", "none") == 0
    assert _requests(got, "DeleteGroups", "group_id_not_found") == 1
    assert _requests(got, "JoinGroup", "invalid_session_timeout") == 1
    assert _requests(got, "ApiVersions", "none") == 1
    assert got[("kgc_join_refused_total", (("error", "invalid_session_timeout"),))] == 1
    assert got[("kgc_join_refused_total", (("error", "inconsistent_group_protocol"),))] == 0


def test_inconsistent_protocol_is_a_refused_join(running: RunningApp) -> None:
    first, second = WireClient("127.0.0.1", running.port), WireClient("127.0.0.1", running.port)
    try:
        # v5 without a member id: MEMBER_ID_REQUIRED, then the join with the id parks for the initial delay
        member_id = _join(first, "g", 10_000).member_id
        first.send(
            build_request(
                11, 5, group_id="g", session_timeout=timedelta(seconds=10), rebalance_timeout=timedelta(seconds=10),
                member_id=member_id, group_instance_id=None, protocol_type="consumer",
                protocols=[{"name": "range", "metadata": b""}],
            )
        )  # fmt: skip
        _, joined = first.receive()
        assert joined.error_code == ErrorCode.none
        answer = _join(second, "g", 10_000, protocol_type="connect")
        assert answer.error_code == ErrorCode.inconsistent_group_protocol
    finally:
        first.close()
        second.close()
    got = _metrics(running)
    assert _requests(got, "JoinGroup", "member_id_required") == 1
    assert _requests(got, "JoinGroup", "inconsistent_group_protocol") == 1
    assert got[("kgc_join_refused_total", (("error", "inconsistent_group_protocol"),))] == 1


async def test_refused_join_is_logged_with_group_client_and_reason(caplog: pytest.LogCaptureFixture) -> None:
    app = App(load_settings(None, storage={"url": "memory"}, group={"min_session_timeout_ms": 6_000}))
    groups = app.coordinator.groups
    try:
        with caplog.at_level(logging.INFO, logger="coordinator.group"):
            reply = groups.join_group(
                m.JoinGroupRequest(group_id="orders", member_id="", group_instance_id=None, protocol_type="consumer",
                                   protocols=[("range", b"")], session_timeout_ms=100, rebalance_timeout_ms=30_000,
                                   client_id="billing-7", client_host="/10.0.0.7", api_version=5)
            )  # fmt: skip
        assert reply.result().error is ErrorCode.invalid_session_timeout
        [record] = [r for r in caplog.records if "refused" in r.getMessage()]
        assert record.levelno == logging.WARNING
        text = record.getMessage()
        assert text.startswith("JoinGroup refused: INVALID_SESSION_TIMEOUT: session timeout 100 ms")
        assert "[6000, " in text
        line = LogfmtFormatter().format(record)
        assert " group=orders msg=" in line and line.endswith(" client_id=billing-7 client_host=/10.0.0.7")
        assert "None" not in line and "member=" not in line  # a new member has no id yet: left out
        assert record.throttle == ("join-refused", "/10.0.0.7", ErrorCode.invalid_session_timeout)  # type: ignore[attr-defined]
    finally:
        app.timer.cancel_all()


async def test_heartbeat_errors_are_counted_exactly_and_the_sample_goes_on() -> None:
    """Heartbeats answered with and without an error, interleaved, past several timed ones (some of which are
    errors): each counted once under its own error, and one in HEARTBEAT_TIMING_SAMPLE timed."""
    import asyncio

    from protocol.codec import decode_request
    from servers.kafka.listener import HEARTBEAT_TIMING_SAMPLE

    from .wire import request_frame

    app = App(load_settings(None, storage={"url": "memory"}, group={"initial_rebalance_delay_ms": 0}))
    groups = app.coordinator.groups
    try:
        groups.join_group(
            m.JoinGroupRequest(group_id="g", member_id="", group_instance_id=None, protocol_type="consumer",
                               protocols=[("range", b"")], session_timeout_ms=30_000, rebalance_timeout_ms=30_000,
                               client_id="c", client_host="/h", api_version=3)
        )  # fmt: skip
        await asyncio.sleep(0.05)  # the initial delay's timer: the join completes
        group = groups.group("g")
        assert group is not None
        [member_id] = group.members
        generation = group.generation_id
        synced = groups.sync_group(m.SyncGroupRequest("g", generation, member_id, None, "consumer", "range",
                                                      [(member_id, b"")], 3))  # fmt: skip
        for _ in range(100):
            if synced.done:
                break
            await asyncio.sleep(0.01)
        assert synced.result().error is ErrorCode.none

        def heartbeat(member: str, generation: int) -> Any:
            fields = {"group_id": "g", "generation_id": generation, "member_id": member}
            return decode_request(request_frame(build_request(12, 4, group_instance_id=None, **fields), 7)[4:])

        kinds = [
            (heartbeat(member_id, generation), "none"),
            (heartbeat("ghost", generation), "unknown_member_id"),
            (heartbeat(member_id, generation + 5), "illegal_generation"),
        ]

        def scrape() -> dict[str, float]:
            out: dict[str, float] = {}
            for family in text_string_to_metric_families(app.metrics.render().decode()):
                for s in family.samples:
                    if s.labels.get("api") == "Heartbeat":
                        key = s.labels.get("error", s.name)
                        out[key] = out.get(key, 0) + s.value
            return out

        expected = dict.fromkeys((error for _, error in kinds), 0)
        for n in range(1, 3 * HEARTBEAT_TIMING_SAMPLE + 5):
            request, error = kinds[(n + n // HEARTBEAT_TIMING_SAMPLE) % 3]  # the timed ones (64, 128, 192): each kind
            app.server.handle(request, "/127.0.0.1")
            expected[error] += 1
            got = scrape()
            assert {k: got.get(k, 0) for k in expected} == expected, n
            assert got.get("kgc_request_seconds_count", 0) == n // HEARTBEAT_TIMING_SAMPLE, n
    finally:
        app.timer.cancel_all()


async def test_group_full_join_is_logged(caplog: pytest.LogCaptureFixture) -> None:
    app = App(load_settings(None, storage={"url": "memory"}, group={"max_size": 1}))
    groups = app.coordinator.groups

    def join(client_id: str) -> Any:
        return groups.join_group(
            m.JoinGroupRequest(group_id="orders", member_id="", group_instance_id=None, protocol_type="consumer",
                               protocols=[("range", b"")], session_timeout_ms=10_000, rebalance_timeout_ms=30_000,
                               client_id=client_id, client_host="/10.0.0.8", api_version=3)
        )  # fmt: skip

    try:
        with caplog.at_level(logging.INFO, logger="coordinator.group"):
            assert not join("first").done  # parked for the initial rebalance delay
            refused = join("second")
        assert refused.result().error is ErrorCode.group_max_size_reached
        [record] = [r for r in caplog.records if "refused" in r.getMessage()]
        assert record.getMessage() == "JoinGroup refused: GROUP_MAX_SIZE_REACHED: group.max.size 1 reached"
        line = LogfmtFormatter().format(record)
        assert line.endswith(
            'group=orders msg="JoinGroup refused: GROUP_MAX_SIZE_REACHED: group.max.size 1 reached" '
            "client_id=second client_host=/10.0.0.8"
        )
        assert record.throttle == ("join-refused", "/10.0.0.8", ErrorCode.group_max_size_reached)  # type: ignore[attr-defined]
    finally:
        app.timer.cancel_all()
