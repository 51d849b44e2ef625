"""The SCRAM key derivation of RFC 5802 (SHA-256 and SHA-512, RFC 7677), as Kafka's ``ScramFormatter`` computes it.

``SaltedPassword = PBKDF2-HMAC-H(password, salt, i)``, ``StoredKey = H(HMAC(SaltedPassword, "Client Key"))``,
``ServerKey = HMAC(SaltedPassword, "Server Key")``. A credential keeps the salt, both keys and the iteration count,
never the password. PBKDF2 runs only when a credential is made (or when a PLAIN password is checked against one);
the SCRAM exchange itself needs only HMACs and hashes.
"""

from __future__ import annotations

import hashlib
import hmac
import secrets

from .credentials import SCRAM_SHA_256, SCRAM_SHA_512, ScramCredential

HASHES = {SCRAM_SHA_256: "sha256", SCRAM_SHA_512: "sha512"}
# Kafka's limits (ScramMechanism: minimum 4096; the KRaft controller refuses more than 16384)
MIN_ITERATIONS = 4096
MAX_ITERATIONS = 16384
DEFAULT_ITERATIONS = 8192
SALT_BYTES = 32


def salted_password(mechanism: str, password: str, salt: bytes, iterations: int) -> bytes:
    return hashlib.pbkdf2_hmac(HASHES[mechanism], password.encode(), salt, iterations)


def credential_from_salted(mechanism: str, salt: bytes, salted: bytes, iterations: int) -> ScramCredential:
    """What AlterUserScramCredentials gets (the client computes the salted password): the stored credential."""
    name = HASHES[mechanism]
    client_key = hmac.new(salted, b"Client Key", name).digest()
    stored_key = hashlib.new(name, client_key).digest()
    server_key = hmac.new(salted, b"Server Key", name).digest()
    return ScramCredential(mechanism, bytes(salt), stored_key, server_key, iterations)


def new_credential(
    mechanism: str, password: str, iterations: int = DEFAULT_ITERATIONS, salt: bytes | None = None
) -> ScramCredential:
    """A fresh credential for a password (a random salt unless one is given)."""
    salt = secrets.token_bytes(SALT_BYTES) if salt is None else salt
    return credential_from_salted(mechanism, salt, salted_password(mechanism, password, salt, iterations), iterations)


# A per-process key for the credentials of users that do not exist (``fake_credential``).
_FAKE_KEY = secrets.token_bytes(32)


def fake_credential(mechanism: str, user: str) -> ScramCredential:
    """A credential for a user that does not exist, so an unknown user is not told apart from a wrong password (RFC
    5802 section 5.1: the server simulates the exchange). The salt is the same for the same user for the life of the
    process (a client asking twice sees no difference from a real user), the keys are random to everyone (no password
    derives them: no proof ever matches), the iteration count is the default. One HMAC: it costs what a lookup of a
    real user costs."""
    name = HASHES[mechanism]
    seed = hmac.new(_FAKE_KEY, f"{mechanism}\0{user}".encode(), "sha512").digest()
    salt = seed[:SALT_BYTES]
    stored_key = hmac.new(seed, b"stored", name).digest()
    server_key = hmac.new(seed, b"server", name).digest()
    return ScramCredential(mechanism, salt, stored_key, server_key, DEFAULT_ITERATIONS)


def password_matches(credential: ScramCredential, password: str) -> bool:
    """Whether a PLAIN password is the one the credential was made from (constant-time comparison of StoredKey)."""
    candidate = new_credential(credential.mechanism, password, credential.iterations, credential.salt)
    return hmac.compare_digest(candidate.stored_key, credential.stored_key)
