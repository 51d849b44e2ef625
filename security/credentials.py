"""SCRAM credentials (RFC 5802 / RFC 7677, as Kafka keeps them: ``ScramCredential`` of salt, stored key, server key
and iterations - never the password) and the store the SASL exchanges look them up in."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol

SCRAM_SHA_256 = "SCRAM-SHA-256"
SCRAM_SHA_512 = "SCRAM-SHA-512"
SCRAM_MECHANISMS = (SCRAM_SHA_256, SCRAM_SHA_512)


@dataclass(frozen=True, slots=True)
class ScramCredential:
    mechanism: str  # SCRAM-SHA-256 or SCRAM-SHA-512
    salt: bytes
    stored_key: bytes
    server_key: bytes
    iterations: int


class CredentialLookup(Protocol):
    """Where the SASL exchanges find a user's credential (None: no such user or no credential for that mechanism)."""

    def scram(self, user: str, mechanism: str) -> ScramCredential | None: ...
