"""SASL mechanisms as a per-connection exchange: PLAIN (RFC 4616) and SCRAM-SHA-256/512 (``security.scram``).

``SaslExchange.step`` takes the client's token (what SaslAuthenticate carries) and returns the server's answer; when
``complete`` is set, ``user`` is who authenticated. Any failure raises ``SaslError`` (the listener answers
SASL_AUTHENTICATION_FAILED and closes the connection, as Kafka does). PLAIN checks the password against the user's
SCRAM credential (SHA-512 first, then SHA-256), so there is no second password store; an unknown user costs the
same PBKDF2 (against a fake credential) as a wrong password, so the time taken does not tell which user names exist.
A PLAIN check costs one PBKDF2 of the credential's iteration count (milliseconds), so ``PlainCache`` remembers the
last verified logins: a keyed hash of user and password (never the password) with the stored key it matched; a
changed or deleted credential no longer matches it.
"""

from __future__ import annotations

import hashlib
import hmac
import secrets
from collections import OrderedDict
from collections.abc import Callable
from time import monotonic, perf_counter

from security.credentials import SCRAM_MECHANISMS, SCRAM_SHA_256, SCRAM_SHA_512, CredentialLookup, ScramCredential
from security.scram import ScramError, ScramServer, derive, verify_password
from security.scram_keys import fake_credential

PLAIN = "PLAIN"
MECHANISMS = (PLAIN, *SCRAM_MECHANISMS)
MAX_PLAIN_FIELD = 255  # Kafka's PlainSaslServer has no limit; user names and passwords are short


class SaslError(Exception):
    """Authentication failed; the message is safe to send to the client (it does not tell user from password)."""


class PlainCache:
    """Recently verified PLAIN logins: HMAC(process key, user NUL password) -> the stored key it was verified
    against. Bounded (least recently used out); the key is random per process, so the digests are useless elsewhere.

    Also the budget of PBKDF2 work PLAIN may do on the event loop: a PBKDF2 takes milliseconds (tens on a loaded
    host) and blocks every connection meanwhile, so a flood of wrong or unknown PLAIN logins, which needs no
    credential, would starve heartbeats and commits. The time spent is a debt that drains at ``budget`` seconds per
    second; while it exceeds ``burst`` a PLAIN login that the cache does not know fails at once (the client retries
    later) instead of deriving. Logins the cache knows and SCRAM (no PBKDF2 on the server) are not affected."""

    def __init__(
        self, size: int = 4096, budget: float = 0.25, burst: float = 1.0, clock: Callable[[], float] = monotonic
    ) -> None:
        self.size = size
        self._key = secrets.token_bytes(32)
        self._verified: OrderedDict[bytes, bytes] = OrderedDict()
        self.budget = budget
        self.burst = burst
        self._clock = clock
        self._debt = 0.0
        self._stamp = clock()
        self.refused = 0  # PLAIN logins failed for want of budget

    def may_derive(self) -> bool:
        """Whether a PBKDF2 may run now (the debt of those before has drained below ``burst``)."""
        now = self._clock()
        self._debt = max(0.0, self._debt - (now - self._stamp) * self.budget)
        self._stamp = now
        if self._debt < self.burst:
            return True
        self.refused += 1
        return False

    def charge(self, seconds: float) -> None:
        self._debt += seconds

    def digest(self, user: str, password: str) -> bytes:
        return hmac.new(self._key, f"{user}\0{password}".encode(), hashlib.sha256).digest()

    def matches(self, digest: bytes, credential: ScramCredential) -> bool:
        stored = self._verified.get(digest)
        if stored is None or not hmac.compare_digest(stored, credential.stored_key):
            return False
        self._verified.move_to_end(digest)
        return True

    def remember(self, digest: bytes, credential: ScramCredential) -> None:
        self._verified[digest] = credential.stored_key
        self._verified.move_to_end(digest)
        while len(self._verified) > self.size:
            self._verified.popitem(last=False)


class SaslExchange:
    """One authentication on one connection with one mechanism."""

    def __init__(self, mechanism: str, credentials: CredentialLookup, plain_cache: PlainCache | None = None) -> None:
        if mechanism not in MECHANISMS:
            raise ValueError(f"unsupported SASL mechanism {mechanism!r}")
        self.mechanism = mechanism
        self.credentials = credentials
        self.complete = False
        self.user: str | None = None
        self._scram = ScramServer(mechanism, credentials) if mechanism != PLAIN else None
        self._round = 0
        self._plain_cache = plain_cache

    def step(self, token: bytes) -> bytes:
        if self.complete:
            raise SaslError("authentication already complete")
        if self._scram is None:
            return self._plain(token)
        try:
            if self._round == 0:
                self._round = 1
                return self._scram.first(token)
            answer = self._scram.final(token)
        except ScramError as exc:
            raise SaslError(str(exc)) from None
        self.complete = True
        self.user = self._scram.user
        return answer

    def _plain(self, token: bytes) -> bytes:
        parts = token.split(b"\x00")
        if len(parts) != 3:
            raise SaslError("invalid PLAIN message: expected authzid NUL user NUL password")
        try:
            authzid, user, password = (part.decode() for part in parts)
        except UnicodeDecodeError:
            raise SaslError("invalid PLAIN message: not UTF-8") from None
        if not user or not password:
            raise SaslError("invalid PLAIN message: empty user name or password")
        if authzid and authzid != user:
            raise SaslError("authentication failed: authorization id must be the user name")
        cache = self._plain_cache
        credential = None
        for mechanism in (SCRAM_SHA_512, SCRAM_SHA_256):
            credential = self.credentials.scram(user, mechanism)
            if credential is not None:
                break
        digest = b""
        if cache is not None:
            if credential is not None:
                digest = cache.digest(user, password)
                if cache.matches(digest, credential):
                    self.complete = True
                    self.user = user
                    return b""
            if not cache.may_derive():
                raise SaslError("authentication failed: too many PLAIN authentications at once, retry later")
        started = perf_counter()
        # An unknown user costs the same PBKDF2 (against a fake credential) as a wrong password: the time taken does
        # not tell which user names exist.
        ok = verify_password(credential or fake_credential(SCRAM_SHA_512, user), password) and credential is not None
        if cache is not None:
            cache.charge(perf_counter() - started)
        if not ok or credential is None:
            raise SaslError("authentication failed: invalid username or password")
        if cache is not None:
            cache.remember(digest, credential)
        self.complete = True
        self.user = user
        return b""


class StaticCredentials:
    """An in-memory ``CredentialLookup`` (tests, and a daemon with no credential store): user -> mechanism ->
    credential."""

    def __init__(self) -> None:
        self._users: dict[str, dict[str, ScramCredential]] = {}

    def add(self, user: str, password: str, iterations: int = 4096) -> None:
        self._users[user] = {m: derive(m, password, iterations=iterations) for m in SCRAM_MECHANISMS}

    def remove(self, user: str) -> None:
        self._users.pop(user, None)

    def scram(self, user: str, mechanism: str) -> ScramCredential | None:
        return self._users.get(user, {}).get(mechanism)
