"""``heartbeat_response_frame`` (the server's packed Heartbeat answer) is byte-identical to encoding kio's response."""

from __future__ import annotations

import pytest

from protocol.codec import encode_response, heartbeat_response_frame, response_class
from protocol.errors import ErrorCode
from protocol.headers import RequestHeader
from servers.kafka.build import build

ERRORS = [
    ErrorCode.none,
    ErrorCode.unknown_member_id,
    ErrorCode.illegal_generation,
    ErrorCode.rebalance_in_progress,
    ErrorCode.fenced_instance_id,
    ErrorCode.coordinator_not_available,
]


@pytest.mark.parametrize("version", range(5))
@pytest.mark.parametrize("error", ERRORS)
@pytest.mark.parametrize("correlation_id", [0, 7, -1, 2**31 - 1])
def test_same_bytes_as_kio(version: int, error: ErrorCode, correlation_id: int) -> None:
    body = build(response_class(12, version), {"error_code": error})
    expected = encode_response(RequestHeader(12, version, correlation_id, "c"), body)
    assert heartbeat_response_frame(version, correlation_id, error) == expected
