"""HTTP Basic on the operator API with the SCRAM users of the Kafka listeners (issue #19: "optionally use the same
SCRAM users over HTTP Basic on TLS"; ``docs/security.md``).

A request with ``Authorization: Basic base64(user:password)`` is checked against the user's stored SCRAM credential,
as SASL/PLAIN is (``security.sasl``): SCRAM-SHA-512 if the user has one, else SCRAM-SHA-256; the password is
recomputed into the StoredKey with PBKDF2 and compared in constant time. There is no second password store. The
principal is ``User:<name>``, as on the Kafka listeners (the same name in the audit trail), and its role comes from
``[http] user_roles`` (``"User:alice" = "operator"``); a user who is not listed authenticates but has no role
(403 on everything but the public routes).

Cost. The PBKDF2 (milliseconds) runs in the default thread pool (``hashlib`` releases the GIL), at most
``MAX_CONCURRENT`` at a time, so the event loop keeps serving heartbeats. A verified login is remembered by
``security.sasl.PlainCache`` (a keyed hash of user and password with the stored key it matched; a changed or deleted
credential no longer matches), so a script polling the API pays one HMAC per request. A failed login always pays
the PBKDF2, for an unknown user too (against a fixed dummy credential of the default iteration count), so the answer
takes about as long whether the user or the password was wrong, and says neither.

Only over TLS: the daemon refuses ``[http] basic_auth`` without the HTTP keystore, and a Basic header on a plain
connection is refused without being checked (the password is the Kafka one).
"""

from __future__ import annotations

import asyncio
import base64
import binascii
from collections.abc import Mapping

from security.credentials import SCRAM_SHA_256, SCRAM_SHA_512, CredentialLookup, ScramCredential
from security.sasl import MAX_PLAIN_FIELD, PlainCache
from security.scram import derive, verify_password
from security.scram_keys import DEFAULT_ITERATIONS

from .access import HttpPrincipal, Role

MAX_CONCURRENT = 4  # PBKDF2 checks in the thread pool at once; more requests wait their turn
CHALLENGE = 'Basic realm="kgc", charset="UTF-8"'


class BasicAuth:
    def __init__(self, credentials: CredentialLookup, roles: Mapping[str, Role], cache: PlainCache | None = None):
        self.credentials = credentials
        self.roles = dict(roles)
        self.cache = cache if cache is not None else PlainCache()
        self._slots = asyncio.Semaphore(MAX_CONCURRENT)
        # What an unknown user's password is checked against, so that it costs what a wrong password costs.
        self._dummy = derive(SCRAM_SHA_512, "kgc-no-such-user", iterations=DEFAULT_ITERATIONS)
        self.verifications = 0  # PBKDF2 checks run (observability, tests)

    @staticmethod
    def parse(value: str) -> tuple[str, str] | None:
        """``base64(user:password)`` -> (user, password); None if it is not that."""
        try:
            decoded = base64.b64decode(value.strip(), validate=True).decode("utf-8")
        except (binascii.Error, ValueError):
            return None
        user, sep, password = decoded.partition(":")
        if not sep or not user or not password or len(user) > MAX_PLAIN_FIELD or len(password) > MAX_PLAIN_FIELD:
            return None
        return user, password

    async def authenticate(self, value: str) -> HttpPrincipal | None:
        """The principal of a Basic credential (the part after ``Basic ``), or None."""
        parsed = self.parse(value)
        if parsed is None:
            return None
        user, password = parsed
        credential = self.credentials.scram(user, SCRAM_SHA_512) or self.credentials.scram(user, SCRAM_SHA_256)
        if credential is None:
            await self._verify(self._dummy, password)
            return None
        digest = self.cache.digest(user, password)
        if not self.cache.matches(digest, credential):
            if not await self._verify(credential, password):
                return None
            self.cache.remember(digest, credential)
        name = f"User:{user}"
        return HttpPrincipal(name, self.roles.get(name, Role.NONE))

    async def _verify(self, credential: ScramCredential, password: str) -> bool:
        async with self._slots:
            self.verifications += 1
            return await asyncio.get_running_loop().run_in_executor(None, verify_password, credential, password)
