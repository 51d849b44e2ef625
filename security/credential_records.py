"""The records of the credential store, persisted by the same record log as every other record.

* ``ScramCredentialSet`` - a user's credential for one mechanism was created or replaced (salt, stored key, server
  key, iterations: never the password). The newest one per (user, mechanism) is what start-up loads.
* ``ScramCredentialDeleted`` - a user's credential for one mechanism was removed: the user cannot authenticate with
  that mechanism any more (and not at all once no mechanism is left; PLAIN checks every remaining credential).
"""

from __future__ import annotations

from dataclasses import dataclass

from .credentials import ScramCredential


@dataclass(frozen=True, slots=True)
class ScramCredentialSet:
    user: str
    credential: ScramCredential
    timestamp_ms: int


@dataclass(frozen=True, slots=True)
class ScramCredentialDeleted:
    user: str
    mechanism: str
    timestamp_ms: int


CredentialRecord = ScramCredentialSet | ScramCredentialDeleted
