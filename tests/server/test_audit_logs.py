"""Kafka requests through the real listener: an admin action is logged with the group, what was done and who asked
(client id, host, principal); a refused group request is logged once per cause and peer (throttled), at INFO when it
is ordinary rebalance traffic and WARNING otherwise (servers.kafka.audit)."""

from __future__ import annotations

import logging
from collections.abc import Iterator
from datetime import timedelta
from typing import Any

import pytest

from protocol.errors import ErrorCode
from runtime.logging_setup import LogfmtFormatter, ThrottleFilter

from .conftest import RunningApp
from .wire import WireClient, build_request


class Lines(logging.Handler):
    """What the daemon's handler would write for ``servers.kafka.audit``: formatted, through a real throttle."""

    def __init__(self, throttle: ThrottleFilter | None = None) -> None:
        super().__init__(logging.INFO)
        self.lines: list[str] = []
        if throttle is not None:
            self.addFilter(throttle)

    def emit(self, record: logging.LogRecord) -> None:
        self.lines.append(LogfmtFormatter().format(record).split(" ", 1)[1])  # without the timestamp


@pytest.fixture
def running() -> Iterator[RunningApp]:
    app = RunningApp().start()
    try:
        yield app
    finally:
        app.stop()


@pytest.fixture
def audit() -> Iterator[Lines]:
    lines = Lines(ThrottleFilter(window_s=60.0, burst=1))
    logger = logging.getLogger("servers.kafka.audit")
    logger.addHandler(lines)
    old = logger.level
    logger.setLevel(logging.INFO)
    try:
        yield lines
    finally:
        logger.removeHandler(lines)
        logger.setLevel(old)


def _commit(client: WireClient, group: str, generation: int = -1, member: str = "", offset: int = 5) -> Any:
    return client.call(
        build_request(
            8, 8, group_id=group, generation_id_or_member_epoch=generation, member_id=member, group_instance_id=None,
            topics=[{"name": "t", "partitions": [{"partition_index": p, "committed_offset": offset,
                                                  "committed_leader_epoch": -1, "committed_metadata": ""}
                                                 for p in (0, 1)]}],
        )
    )  # fmt: skip


def _join(client: WireClient, group: str) -> Any:
    return client.call(
        build_request(
            11, 3, group_id=group, session_timeout=timedelta(seconds=10), rebalance_timeout=timedelta(seconds=10),
            member_id="", protocol_type="consumer", protocols=[{"name": "range", "metadata": b""}],
        )
    )  # fmt: skip


def test_admin_actions_name_the_group_what_was_done_and_who_asked(running: RunningApp, audit: Lines) -> None:
    client = WireClient("127.0.0.1", running.port)
    try:
        assert all(p.error_code == ErrorCode.none for p in _commit(client, "tool").topics[0].partitions)
        answer = client.call(build_request(47, 0, group_id="tool",
                                           topics=[{"name": "t", "partitions": [{"partition_index": 1}]}]))  # fmt: skip
        assert answer.error_code == ErrorCode.none and answer.topics[0].partitions[0].error_code == ErrorCode.none
        answer = client.call(build_request(42, 2, groups_names=("tool",)))
        assert answer.results[0].error_code == ErrorCode.none
    finally:
        client.close()
    who = "client_id=wire-test client_host=/127.0.0.1 principal=User:ANONYMOUS"
    assert audit.lines == [
        'level=info logger=servers.kafka.audit group=tool msg="offsets committed outside the group (generation -1) '
        f'on 2 partition(s): t" {who}',
        f'level=info logger=servers.kafka.audit group=tool msg="offsets deleted (OffsetDelete) on 1 partition(s): t" '
        f"{who}",
        f'level=info logger=servers.kafka.audit group=tool msg="group deleted (DeleteGroups)" {who}',
    ]


def test_refused_requests_are_logged_once_per_cause_and_peer(
    running: RunningApp, audit: Lines, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger="servers.kafka.audit")
    client = WireClient("127.0.0.1", running.port)
    try:
        joined = _join(client, "busy")  # parks for the initial rebalance delay, then generation 1
        assert joined.error_code == ErrorCode.none
        for _ in range(5):  # ordinary rebalance traffic: INFO, one line for the five
            answer = client.call(build_request(12, 4, group_id="busy", generation_id=1, member_id="ghost",
                                               group_instance_id=None))  # fmt: skip
            assert answer.error_code == ErrorCode.unknown_member_id
        for _ in range(3):  # a stale generation: INFO
            answer = _commit(client, "busy", generation=7, member=joined.member_id)
            assert answer.topics[0].partitions[0].error_code == ErrorCode.illegal_generation
        for _ in range(3):  # an admin asking for something the group's state forbids: WARNING
            answer = client.call(build_request(42, 2, groups_names=("busy",)))
            assert answer.results[0].error_code == ErrorCode.non_empty_group
        answer = client.call(build_request(47, 0, group_id="busy",
                                           topics=[{"name": "t", "partitions": [{"partition_index": 0}]}]))  # fmt: skip
        assert answer.topics[0].partitions[0].error_code == ErrorCode.group_subscribed_to_topic
    finally:
        client.close()
    tail = "client_id=wire-test client_host=/127.0.0.1"
    assert audit.lines == [
        f'level=info logger=servers.kafka.audit group=busy msg="Heartbeat refused: UNKNOWN_MEMBER_ID" member=ghost '
        f"{tail}",
        f'level=info logger=servers.kafka.audit group=busy msg="OffsetCommit refused: ILLEGAL_GENERATION" '
        f"member={joined.member_id} {tail}",
        f'level=warning logger=servers.kafka.audit group=busy msg="DeleteGroups refused: NON_EMPTY_GROUP" {tail}',
        f'level=warning logger=servers.kafka.audit group=busy msg="OffsetDelete refused: GROUP_SUBSCRIBED_TO_TOPIC" '
        f"{tail}",
    ]
    by_cause: dict[Any, int] = {}
    for record in caplog.records:  # every refusal, before the throttle
        by_cause[record.throttle] = by_cause.get(record.throttle, 0) + 1  # type: ignore[attr-defined]
    assert by_cause == {
        ("request-refused", 12, 25, "/127.0.0.1"): 5,
        ("request-refused", 8, 22, "/127.0.0.1"): 3,
        ("request-refused", 42, 68, "/127.0.0.1"): 3,
        ("request-refused", 47, 86, "/127.0.0.1"): 1,
    }  # every refusal is logged; the throttle lets one line per cause and peer through (above)
    assert not any("None" in line for line in audit.lines)


def test_a_leave_from_another_connection_is_an_admin_removal_and_ones_own_leave_is_not(
    running: RunningApp, audit: Lines
) -> None:
    """LeaveGroup by member id: from the connection JoinGroup gave the id to, the member leaves (no admin line); from
    any other, it is an admin's removal (servers.kafka.membership.is_admin_removal), logged and audited with who
    asked. By group.instance.id alone it is always an admin's."""
    own, admin = WireClient("127.0.0.1", running.port), WireClient("127.0.0.1", running.port)
    try:
        first = _join(own, "g").member_id
        answer = admin.call(
            build_request(13, 3, group_id="g", members=[{"member_id": first, "group_instance_id": None}])
        )
        assert [m.error_code for m in answer.members] == [ErrorCode.none]
        second = _join(own, "g").member_id
        assert own.call(build_request(13, 0, group_id="g", member_id=second)).error_code == ErrorCode.none
        third = _join(own, "g").member_id
        answer = own.call(build_request(13, 3, group_id="g", members=[{"member_id": third, "group_instance_id": None}]))
        assert [m.error_code for m in answer.members] == [ErrorCode.none]
        actions = running.call(lambda: list(running.app.audit._recent))
    finally:
        own.close()
        admin.close()
    removals = [line for line in audit.lines if "removed (LeaveGroup" in line]
    assert removals == [
        f'level=info logger=servers.kafka.audit group=g msg="member {first} removed (LeaveGroup from another client)" '
        "client_id=wire-test client_host=/127.0.0.1 principal=User:ANONYMOUS"
    ]
    assert [(a.action, a.group_id, a.principal) for a in actions] == [("member.remove", "g", "User:ANONYMOUS")]
