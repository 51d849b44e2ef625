"""SaslHandshake (17) and SaslAuthenticate (36): authentication on the connection, sequenced as Kafka's
``SaslServerAuthenticator`` does.

On a SASL_PLAINTEXT or SASL_SSL listener every connection starts unauthenticated. Before authentication only
ApiVersions (answered as usual), SaslHandshake and SaslAuthenticate are served; any other request closes the
connection without an answer (Kafka: IllegalSaslStateException). SaslHandshake v1 names the mechanism: an enabled one
is answered NONE with the enabled list, another UNSUPPORTED_SASL_MECHANISM (with the list) and the connection closes.
Each SaslAuthenticate carries one token of the exchange (``security.sasl``); a failure is answered
SASL_AUTHENTICATION_FAILED with a message that does not tell a wrong user from a wrong password, then the connection
closes. Success sets the connection's principal to ``User:<name>``.

Re-authentication (KIP-368): with ``connections.max.reauth.ms`` > 0 the successful SaslAuthenticate (v1+) tells the
client its session lifetime; a client that supports it sends SaslHandshake + SaslAuthenticate again on the same
connection before then (same mechanism and same user, else the re-authentication fails and the connection closes).
A request other than these arriving after the session expired closes the connection, ApiVersions included, as
Kafka's ``SocketServer`` closes it (clients that cannot re-authenticate, v0, simply reconnect); so does any request
but SaslAuthenticate while a re-authentication is under way (the old session does not serve meanwhile). With
``connections.max.reauth.ms`` 0 there is no re-authentication: a SaslHandshake on an authenticated connection is
answered ILLEGAL_SASL_STATE and the connection stays open, as Kafka answers it. SaslHandshake v0 (raw tokens
without Kafka framing) is not served: Kafka 4 dropped it too (KIP-896).

On PLAINTEXT and SSL listeners the two APIs answer ILLEGAL_SASL_STATE, as Kafka's do (``HANDLERS``).
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from datetime import timedelta
from typing import Any

from protocol.apis import ApiKey
from protocol.codec import Request, encode_response
from protocol.errors import ErrorCode
from security.credentials import CredentialLookup
from security.principals import user
from security.sasl import PlainCache, SaslError, SaslExchange

from ._util import response_cls
from .build import build
from .context import RequestContext, Services

log = logging.getLogger("servers.kafka.sasl")

_HANDSHAKE = int(ApiKey.SASL_HANDSHAKE)
_AUTHENTICATE = 36  # SaslAuthenticate
_API_VERSIONS = int(ApiKey.API_VERSIONS)
_BEFORE_AUTH = frozenset({_API_VERSIONS, _HANDSHAKE, _AUTHENTICATE})
# Kafka's sasl.server.max.receive.size: the largest frame a connection may send before it authenticates (a larger
# one closes it), so an unauthenticated client cannot make the daemon read and parse 100 MB tokens.
MAX_RECEIVE_BEFORE_AUTH = 524_288


@dataclass(frozen=True, slots=True)
class SaslConfig:
    """A SASL listener's settings: the enabled mechanisms, where credentials are looked up, and
    ``connections.max.reauth.ms`` (0: sessions do not expire)."""

    mechanisms: tuple[str, ...]
    credentials: CredentialLookup
    max_reauth_ms: int = 0
    plain_cache: PlainCache = field(default_factory=PlainCache)  # PLAIN logins verified lately (security.sasl)


class SaslState:
    """One connection's authentication state. ``passes`` is asked for every request (cheap); the SASL requests and
    anything refused go to ``answer``."""

    __slots__ = ("config", "error", "exchange", "expires", "mechanism", "principal", "reauthenticating", "state")

    def __init__(self, config: SaslConfig) -> None:
        self.config = config
        self.state = "handshake"  # -> "authenticate" -> "complete" (-> "handshake"/"authenticate" to re-authenticate)
        self.exchange: SaslExchange | None = None
        self.mechanism: str | None = None
        self.principal: str | None = None  # set once authenticated
        self.reauthenticating = False
        self.expires: float | None = None  # monotonic seconds when the session ends (connections.max.reauth.ms)
        self.error = 0  # the error code of the last SASL answer (for kgc_requests_total)

    @staticmethod
    def may_send(frame: bytes) -> bool:
        """Before authentication (and during re-authentication): whether a frame's API key is ApiVersions,
        SaslHandshake or SaslAuthenticate, read from the header before anything is decoded."""
        return len(frame) >= 2 and int.from_bytes(frame[:2], "big", signed=True) in _BEFORE_AUTH

    def passes(self, api_key: int, now: float) -> bool:
        """Whether the request is served as usual: ApiVersions unless the session expired; the others once
        authenticated (not while re-authenticating) and not expired."""
        if api_key in (_HANDSHAKE, _AUTHENTICATE) or (self.state != "complete" and api_key != _API_VERSIONS):
            return False
        return self.expires is None or now < self.expires

    def answer(self, request: Request, now: float) -> tuple[bytes | None, str | None]:
        """The frame answering a SASL request (or None: no answer) and why the connection must close after it
        (None: it stays open). Called for every request ``passes`` refused."""
        header, body = request
        key = header.api_key
        if key == _HANDSHAKE:
            return self._handshake(request, body.mechanism)
        if key == _AUTHENTICATE:
            return self._authenticate(request, body.auth_bytes, now)
        if self.principal is not None and self.expires is not None and now >= self.expires:
            log.info("closing connection of %s: SASL session expired (connections.max.reauth.ms)", self.principal)
            return None, "reauth"
        if self.reauthenticating:  # Kafka: "Unexpected Kafka request ... during SASL authentication"
            log.info("closing connection of %s: api key %d during re-authentication", self.principal, key,
                     extra={"throttle": ("sasl",)})  # fmt: skip
            return None, "sasl"
        log.info("closing connection: api key %d before SASL authentication", key, extra={"throttle": ("sasl",)})
        return None, "sasl"

    def _handshake(self, request: Request, mechanism: str) -> tuple[bytes | None, str | None]:
        enabled = self.config.mechanisms
        if self.state not in ("handshake", "complete"):
            return self._hs(request, ErrorCode.illegal_sasl_state, enabled), "sasl"
        if mechanism not in enabled:
            return self._hs(request, ErrorCode.unsupported_sasl_mechanism, enabled), "sasl"
        if self.state == "complete":
            if self.expires is None:  # sessions do not expire: no re-authentication (Kafka's KafkaApis answers this)
                return self._hs(request, ErrorCode.illegal_sasl_state, enabled), None
            if mechanism != self.mechanism:  # KIP-368: a re-authentication keeps its mechanism
                return self._hs(request, ErrorCode.illegal_sasl_state, enabled), "sasl"
            self.reauthenticating = True
        self.mechanism = mechanism
        self.exchange = SaslExchange(mechanism, self.config.credentials, self.config.plain_cache)
        self.state = "authenticate"
        return self._hs(request, ErrorCode.none, enabled), None

    def _authenticate(self, request: Request, token: bytes, now: float) -> tuple[bytes | None, str | None]:
        exchange = self.exchange
        if self.state != "authenticate" or exchange is None:
            return self._auth(request, ErrorCode.illegal_sasl_state, "SaslHandshake first", b""), "sasl"
        try:
            challenge = exchange.step(bytes(token))
        except SaslError as exc:
            log.info("SASL %s authentication failed: %s", exchange.mechanism, exc, extra={"throttle": ("sasl-fail",)})
            return self._auth(request, ErrorCode.sasl_authentication_failed, str(exc), b""), "sasl"
        if not exchange.complete:
            return self._auth(request, ErrorCode.none, None, challenge), None
        principal = user(exchange.user or "")
        if self.reauthenticating and principal != self.principal:
            message = "cannot change principals during re-authentication"
            return self._auth(request, ErrorCode.sasl_authentication_failed, message, b""), "sasl"
        self.principal = principal
        self.state = "complete"
        self.exchange = None
        self.reauthenticating = False
        lifetime = self.config.max_reauth_ms
        self.expires = now + lifetime / 1000 if lifetime > 0 else None
        return self._auth(request, ErrorCode.none, None, challenge, lifetime), None

    def _hs(self, request: Request, error: ErrorCode, mechanisms: tuple[str, ...]) -> bytes:
        self.error = int(error)
        return _handshake_frame(request, error, mechanisms)

    def _auth(
        self, request: Request, error: ErrorCode, message: str | None, auth_bytes: bytes, lifetime_ms: int = 0
    ) -> bytes:
        self.error = int(error)
        return _authenticate_frame(request, error, message, auth_bytes, lifetime_ms)


def _handshake_frame(request: Request, error: ErrorCode, mechanisms: tuple[str, ...]) -> bytes:
    ctx = _ctx(request)
    return encode_response(request.header, build(response_cls(ctx), {"error_code": error, "mechanisms": mechanisms}))


def _authenticate_frame(
    request: Request, error: ErrorCode, message: str | None, auth_bytes: bytes, lifetime_ms: int = 0
) -> bytes:
    ctx = _ctx(request)
    data = {
        "error_code": error,
        "error_message": message,
        "auth_bytes": auth_bytes,
        "session_lifetime": timedelta(milliseconds=lifetime_ms),
    }
    return encode_response(request.header, build(response_cls(ctx), data))


def _ctx(request: Request) -> RequestContext:
    header = request.header
    return RequestContext(header.api_key, header.api_version, header.correlation_id, header.client_id or "", "")


def handle_sasl_handshake(services: Services, ctx: RequestContext, body: Any) -> Any:
    """On a listener without SASL (PLAINTEXT, SSL): ILLEGAL_SASL_STATE, as Kafka answers."""
    return build(response_cls(ctx), {"error_code": ErrorCode.illegal_sasl_state, "mechanisms": ()})


def handle_sasl_authenticate(services: Services, ctx: RequestContext, body: Any) -> Any:
    """On a listener without SASL (PLAINTEXT, SSL): ILLEGAL_SASL_STATE, as Kafka answers."""
    data = {
        "error_code": ErrorCode.illegal_sasl_state,
        "error_message": "SASL is not enabled on this listener",
        "auth_bytes": b"",
        "session_lifetime": timedelta(0),
    }
    return build(response_cls(ctx), data)
