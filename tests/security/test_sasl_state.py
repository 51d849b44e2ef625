"""The SASL sequencing of one connection (servers.kafka.sasl.SaslState), driven with decoded requests and a manual
clock: what is served before authentication, failures that close, KIP-368 session expiry and re-authentication."""

from __future__ import annotations

from typing import Any

import pytest
from kafka.net.sasl.scram import ScramClient
from kio.index import load_response_schema

from protocol.codec import decode_body, decode_request
from protocol.errors import ErrorCode
from security.sasl import PLAIN, StaticCredentials
from servers.kafka.sasl import SaslConfig, SaslState
from tests.server.wire import build_request, request_frame

CREDS = StaticCredentials()
CREDS.add("alice", "s3cret")
CREDS.add("bob", "hunter2")


def request(api_key: int, version: int, **fields: Any) -> Any:
    return decode_request(request_frame(build_request(api_key, version, **fields), 7)[4:])


def answer_of(frame: bytes | None, api_key: int, version: int) -> Any:
    assert frame is not None
    cls = load_response_schema(api_key, version)
    return decode_body(cls, frame[4:], 4 + (1 if cls.__flexible__ else 0))


def handshake(state: SaslState, mechanism: str, now: float = 0.0) -> tuple[Any, str | None]:
    frame, close = state.answer(request(17, 1, mechanism=mechanism), now)
    return answer_of(frame, 17, 1), close


def authenticate(state: SaslState, token: bytes, now: float = 0.0, version: int = 2) -> tuple[Any, str | None]:
    frame, close = state.answer(request(36, version, auth_bytes=token), now)
    return answer_of(frame, 36, version), close


def plain_login(state: SaslState, user: str, password: str, now: float = 0.0) -> tuple[Any, str | None]:
    response, close = handshake(state, PLAIN, now)
    assert response.error_code == ErrorCode.none and close is None
    return authenticate(state, f"\0{user}\0{password}".encode(), now)


def test_only_api_versions_and_sasl_before_authentication() -> None:
    state = SaslState(SaslConfig((PLAIN,), CREDS))
    assert state.passes(18, 0.0)
    assert not state.passes(3, 0.0) and not state.passes(12, 0.0)
    frame, close = state.answer(
        request(3, 12, topics=None, allow_auto_topic_creation=False, include_topic_authorized_operations=False), 0.0
    )
    assert frame is None and close == "sasl"  # closed without an answer, as Kafka does


def test_plain_success_sets_principal_and_serves_everything() -> None:
    state = SaslState(SaslConfig((PLAIN, "SCRAM-SHA-256"), CREDS, max_reauth_ms=0))
    response, close = handshake(state, PLAIN)
    assert tuple(response.mechanisms) == (PLAIN, "SCRAM-SHA-256")
    response, close = authenticate(state, b"\0alice\0s3cret")
    assert response.error_code == ErrorCode.none and close is None
    assert response.session_lifetime.total_seconds() == 0
    assert state.principal == "User:alice"
    assert state.passes(3, 1e9) and state.passes(12, 1e9)


def test_wrong_password_fails_and_closes() -> None:
    state = SaslState(SaslConfig((PLAIN,), CREDS))
    response, close = plain_login(state, "alice", "nope")
    assert response.error_code == ErrorCode.sasl_authentication_failed and close == "sasl"
    assert response.error_message == "authentication failed: invalid username or password"
    assert state.principal is None


def test_unsupported_mechanism_lists_enabled_and_closes() -> None:
    state = SaslState(SaslConfig(("SCRAM-SHA-512",), CREDS))
    response, close = handshake(state, PLAIN)
    assert response.error_code == ErrorCode.unsupported_sasl_mechanism and close == "sasl"
    assert tuple(response.mechanisms) == ("SCRAM-SHA-512",)


def test_authenticate_without_handshake_is_illegal_state() -> None:
    state = SaslState(SaslConfig((PLAIN,), CREDS))
    response, close = authenticate(state, b"\0alice\0s3cret")
    assert response.error_code == ErrorCode.illegal_sasl_state and close == "sasl"


@pytest.mark.parametrize("mechanism", ["SCRAM-SHA-256", "SCRAM-SHA-512"])
def test_scram_two_round_trips(mechanism: str) -> None:
    state = SaslState(SaslConfig((mechanism,), CREDS, max_reauth_ms=60_000))
    assert handshake(state, mechanism)[0].error_code == ErrorCode.none
    client = ScramClient("bob", "hunter2", mechanism)
    response, close = authenticate(state, client.first_message(), now=5.0)
    assert response.error_code == ErrorCode.none and close is None and state.principal is None
    assert not state.passes(3, 5.0)
    client.process_server_first_message(response.auth_bytes)
    response, close = authenticate(state, client.final_message(), now=5.0)
    assert response.error_code == ErrorCode.none and close is None
    client.process_server_final_message(response.auth_bytes)
    assert state.principal == "User:bob"
    assert response.session_lifetime.total_seconds() == 60


def test_session_expiry_closes_and_reauthentication_extends() -> None:
    state = SaslState(SaslConfig((PLAIN,), CREDS, max_reauth_ms=10_000))
    plain_login(state, "alice", "s3cret", now=100.0)
    assert state.passes(12, 109.9)
    assert not state.passes(12, 110.0)
    # re-authentication (KIP-368) on the same connection before expiry: same mechanism, same user
    response, close = plain_login(state, "alice", "s3cret", now=108.0)
    assert response.error_code == ErrorCode.none and close is None
    assert state.passes(12, 117.9)
    frame, close = state.answer(request(12, 4, group_id="g", generation_id=1, member_id="m"), 118.0)
    assert frame is None and close == "reauth"


def test_reauthentication_cannot_change_user_or_mechanism() -> None:
    state = SaslState(SaslConfig((PLAIN, "SCRAM-SHA-256"), CREDS, max_reauth_ms=10_000))
    plain_login(state, "alice", "s3cret")
    response, close = plain_login(state, "bob", "hunter2")
    assert response.error_code == ErrorCode.sasl_authentication_failed and close == "sasl"
    state = SaslState(SaslConfig((PLAIN, "SCRAM-SHA-256"), CREDS, max_reauth_ms=10_000))
    plain_login(state, "alice", "s3cret")
    response, close = handshake(state, "SCRAM-SHA-256")
    assert response.error_code == ErrorCode.illegal_sasl_state and close == "sasl"


def heartbeat() -> Any:
    return request(12, 4, group_id="g", generation_id=1, member_id="m")


def test_expired_session_closes_on_api_versions_too() -> None:
    """Kafka's SocketServer closes an expired connection on any request but a SaslHandshake that re-authenticates."""
    state = SaslState(SaslConfig((PLAIN,), CREDS, max_reauth_ms=10_000))
    plain_login(state, "alice", "s3cret", now=100.0)
    assert state.passes(18, 109.0)
    assert not state.passes(18, 110.0)
    frame, close = state.answer(request(18, 3, client_software_name="x", client_software_version="1"), 110.0)
    assert frame is None and close == "reauth"


def test_no_other_request_is_served_while_re_authenticating() -> None:
    """Between the re-authentication's SaslHandshake and its last SaslAuthenticate the old session serves nothing:
    Kafka's authenticator refuses any other request then and closes the connection."""
    state = SaslState(SaslConfig((PLAIN,), CREDS, max_reauth_ms=10_000))
    plain_login(state, "alice", "s3cret", now=100.0)
    assert state.passes(12, 101.0)
    response, close = handshake(state, PLAIN, now=101.0)
    assert response.error_code == ErrorCode.none and close is None
    assert not state.passes(12, 101.0)
    frame, close = state.answer(heartbeat(), 101.0)
    assert frame is None and close == "sasl"


def test_a_handshake_after_authentication_without_reauth_is_illegal_state_and_keeps_the_session() -> None:
    """connections.max.reauth.ms 0: no re-authentication; Kafka's KafkaApis answers ILLEGAL_SASL_STATE."""
    state = SaslState(SaslConfig((PLAIN,), CREDS, max_reauth_ms=0))
    plain_login(state, "alice", "s3cret")
    response, close = handshake(state, PLAIN)
    assert response.error_code == ErrorCode.illegal_sasl_state and close is None
    assert state.passes(12, 1e9) and state.principal == "User:alice"
