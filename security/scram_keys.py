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


def password_matches(credential: ScramCredential, password: str) -> bool:
    """Whether a PLAIN password is the one the credential was made from (constant-time comparison of StoredKey)."""
    candidate = new_credential(credential.mechanism, password, credential.iterations, credential.salt)
    return hmac.compare_digest(candidate.stored_key, credential.stored_key)
