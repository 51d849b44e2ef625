"""The server side of SCRAM (RFC 5802, with RFC 7677's SHA-256 and Kafka's SHA-512), as Kafka's ScramSaslServer runs it.

Two round trips. The client's first message ``n,[a=authzid],n=user,r=cnonce`` names the user; the server answers
``r=cnonce+snonce,s=salt,i=iterations`` from the stored credential. The client's final message
``c=base64(gs2 header),r=nonce,p=proof`` proves it knows the password: ``H(proof XOR HMAC(StoredKey, AuthMessage))``
must equal StoredKey. The server answers ``v=base64(HMAC(ServerKey, AuthMessage))`` so the client knows the server
holds the credential too. Only the salt, StoredKey, ServerKey and iteration count are ever stored (``derive``).

Like Kafka: only the gs2 header ``n`` (no channel binding) is accepted - ``y`` and ``p=`` are refused, as Kafka's
``ClientFirstMessage`` refuses them -, an authorization id must equal the user name, the only extension Kafka knows
(``tokenauth``, delegation tokens) is refused here (no delegation tokens), and every failure is one ``ScramError``
whose message does not say whether the user or the password was wrong. Unlike Kafka, which fails an unknown user at
the first message (so a client can tell which user names exist), an unknown user gets a server-first message from a
fake credential (``scram_keys.fake_credential``: the same salt every time, the default iteration count) and fails at
the final message with the wrong-password error, after the same work: RFC 5802 section 5.1's simulated exchange.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import secrets
from collections.abc import Callable

from security.credentials import CredentialLookup, ScramCredential
from security.scram_keys import (
    HASHES,
    MAX_ITERATIONS,
    MIN_ITERATIONS,
    fake_credential,
    new_credential,
    password_matches,
    salted_password,
)

__all__ = ["HASHES", "MAX_ITERATIONS", "MIN_ITERATIONS", "ScramError", "ScramServer", "derive", "salted_password",
           "verify_password"]  # fmt: skip


class ScramError(Exception):
    """The exchange failed (bad message, unknown user, wrong proof): SASL_AUTHENTICATION_FAILED."""


def _hmac(algorithm: str, key: bytes, data: bytes) -> bytes:
    return hmac.new(key, data, algorithm).digest()


def derive(
    mechanism: str, password: str, salt: bytes | None = None, iterations: int = MIN_ITERATIONS
) -> ScramCredential:
    """The stored credential of ``password`` (``security.scram_keys``: the one key derivation of the daemon)."""
    if mechanism not in HASHES:
        raise ValueError(f"unknown SCRAM mechanism {mechanism!r}")
    return new_credential(mechanism, password, iterations, salt)


def verify_password(credential: ScramCredential, password: str) -> bool:
    """Whether ``password`` is the one ``credential`` was derived from (PLAIN checks against SCRAM credentials)."""
    return password_matches(credential, password)


def _attributes(message: str) -> list[tuple[str, str]]:
    pairs = []
    for part in message.split(","):
        key, sep, value = part.partition("=")
        if not sep or len(key) != 1:
            raise ScramError(f"invalid SCRAM attribute {part!r}")
        pairs.append((key, value))
    return pairs


def _sasl_name(value: str) -> str:
    """RFC 5802 saslname: "=2C" is ",", "=3D" is "="; any other "=" is invalid."""
    out = []
    i = 0
    while i < len(value):
        char = value[i]
        if char == "=":
            code = value[i + 1 : i + 3]
            if code == "2C":
                out.append(",")
            elif code == "3D":
                out.append("=")
            else:
                raise ScramError("invalid escape in SCRAM user name")
            i += 3
            continue
        out.append(char)
        i += 1
    return "".join(out)


class ScramServer:
    """One SCRAM exchange on one connection: ``first`` then ``final``; ``user`` is set once it succeeds."""

    def __init__(self, mechanism: str, credentials: CredentialLookup, nonce: Callable[[], str] | None = None) -> None:
        if mechanism not in HASHES:
            raise ValueError(f"unknown SCRAM mechanism {mechanism!r}")
        self.mechanism = mechanism
        self.algorithm = HASHES[mechanism]
        self.credentials = credentials
        self._nonce = nonce or (lambda: secrets.token_urlsafe(24))
        self._user: str | None = None
        self._credential: ScramCredential | None = None
        self._gs2_header = ""
        self._client_first_bare = ""
        self._server_first = ""
        self._nonce_value = ""
        self.user: str | None = None  # the authenticated user, once ``final`` succeeded
        self.complete = False

    def first(self, message: bytes) -> bytes:
        """The client-first-message -> the server-first-message."""
        if self._credential is not None or self.complete:
            raise ScramError("unexpected SCRAM client-first message")
        try:
            text = message.decode()
        except UnicodeDecodeError:
            raise ScramError("SCRAM message is not UTF-8") from None
        parts = text.split(",", 2)
        if len(parts) != 3 or parts[0] != "n" or (parts[1] and not parts[1].startswith("a=")):
            raise ScramError("invalid SCRAM gs2 header (channel binding is not supported)")
        self._gs2_header = f"{parts[0]},{parts[1]},"
        bare = parts[2]
        fields = bare.split(",")
        if len(fields) < 2 or fields[0][:2] != "n=" or fields[1][:2] != "r=" or len(fields[1]) == 2:
            raise ScramError("invalid SCRAM client-first message")
        if not all("\x21" <= c <= "\x7e" for c in fields[1][2:]):
            raise ScramError("invalid SCRAM nonce")
        user = _sasl_name(fields[0][2:])
        authzid = _sasl_name(parts[1][2:]) if parts[1] else ""
        if authzid and authzid != user:
            raise ScramError("authorization id must be the user name")
        # Extensions follow the nonce as name=value pairs, name alphabetic; Kafka ignores those it does not know.
        # The one it knows, "tokenauth" (delegation tokens), is refused: there are no delegation tokens here.
        for extension in fields[2:]:
            name, sep, _ = extension.partition("=")
            if not sep or not name.isascii() or not name.isalpha():
                raise ScramError("invalid SCRAM extension")
            if name == "tokenauth":
                raise ScramError("delegation tokens are not supported")
        credential = self.credentials.scram(user, self.mechanism)
        if credential is None:  # fails at the final message, as a wrong password does (module docstring)
            credential = fake_credential(self.mechanism, user)
        self._user = user
        self._credential = credential
        self._client_first_bare = bare
        self._nonce_value = fields[1][2:] + self._nonce()
        salt = base64.b64encode(credential.salt).decode()
        self._server_first = f"r={self._nonce_value},s={salt},i={credential.iterations}"
        return self._server_first.encode()

    def final(self, message: bytes) -> bytes:
        """The client-final-message -> the server-final-message (``v=`` server signature)."""
        credential = self._credential
        if credential is None or self.complete:
            raise ScramError("unexpected SCRAM client-final message")
        try:
            text = message.decode()
        except UnicodeDecodeError:
            raise ScramError("SCRAM message is not UTF-8") from None
        without_proof, sep, proof_text = text.rpartition(",p=")
        if not sep:
            raise ScramError("invalid SCRAM client-final message")
        attributes = dict(_attributes(without_proof))
        expected_binding = base64.b64encode(self._gs2_header.encode()).decode()
        if attributes.get("c") != expected_binding:
            raise ScramError("invalid SCRAM channel binding")
        if attributes.get("r") != self._nonce_value:
            raise ScramError("invalid SCRAM nonce")
        try:
            proof = base64.b64decode(proof_text, validate=True)
        except ValueError:
            raise ScramError("invalid SCRAM proof") from None
        auth_message = f"{self._client_first_bare},{self._server_first},{without_proof}".encode()
        signature = _hmac(self.algorithm, credential.stored_key, auth_message)
        if len(proof) != len(signature):
            raise ScramError(f"authentication failed: invalid credentials with SASL mechanism {self.mechanism}")
        client_key = bytes(a ^ b for a, b in zip(proof, signature, strict=True))
        if not hmac.compare_digest(hashlib.new(self.algorithm, client_key).digest(), credential.stored_key):
            raise ScramError(f"authentication failed: invalid credentials with SASL mechanism {self.mechanism}")
        self.complete = True
        self.user = self._user
        server_signature = _hmac(self.algorithm, credential.server_key, auth_message)
        return b"v=" + base64.b64encode(server_signature)
