"""The credential store: every user's SCRAM credentials in memory, changed only by durable records.

Kafka keeps SCRAM credentials (KIP-554) per user and mechanism - salt, stored key, server key, iterations, never the
password - and manages them with DescribeUserScramCredentials (50) and AlterUserScramCredentials (51); the client
derives the salted password, the broker only the keys. We do the same and keep them in the database through the
record log (``security.credential_records``): an alteration is answered once its records are durable, and only then
does the store change, so a user created is usable by the next authentication and a deleted one cannot authenticate
again (connections already authenticated keep their session, as in Kafka, until they re-authenticate).

``UserStore`` implements ``security.credentials.CredentialLookup`` for the SCRAM exchanges, and ``verify_plain``
checks a PLAIN password against the same credentials (there is no second password store): it recomputes the
StoredKey with PBKDF2 (about 3 ms for SHA-256 and 7 ms for SHA-512 at the default 8192 iterations). A successful
check is remembered per user as an HMAC of the password under a key drawn at start (in memory only, dropped when the
credential changes), so a client that reconnects costs one HMAC; a wrong password always costs the full PBKDF2,
which slows guessing. A caller on an event loop facing many distinct PLAIN logins may still run it in an executor.

Alteration rules (Kafka's controller, ``ScramControlManager``), each per user, in the order users first appear:
a user named twice in one request (deletions and upsertions together) -> DUPLICATE_RESOURCE; an empty name ->
UNACCEPTABLE_CREDENTIAL; an unknown mechanism -> UNSUPPORTED_SASL_MECHANISM; iterations outside 4096..16384 ->
UNACCEPTABLE_CREDENTIAL; deleting a credential that does not exist -> RESOURCE_NOT_FOUND. A user with an error has
none of its alterations applied.
"""

from __future__ import annotations

import hashlib
import hmac
import secrets
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from protocol.errors import ErrorCode

from .credential_records import CredentialRecord, ScramCredentialDeleted, ScramCredentialSet
from .credentials import SCRAM_MECHANISMS, SCRAM_SHA_256, SCRAM_SHA_512, ScramCredential
from .scram_keys import DEFAULT_ITERATIONS as DEFAULT_BOOTSTRAP_ITERATIONS
from .scram_keys import MAX_ITERATIONS, MIN_ITERATIONS, credential_from_salted, fake_credential, password_matches

# the int8 on the wire (Kafka's ScramMechanism)
MECHANISM_CODES = {1: SCRAM_SHA_256, 2: SCRAM_SHA_512}
MECHANISM_NUMBERS = {name: code for code, name in MECHANISM_CODES.items()}


class CredentialLog(Protocol):
    """Where the records go (``storage.SqlRecordLog``, or a log that is durable at once): ``on_done(None)`` once
    durable, ``on_done(failure)`` if not; successive calls are persisted in order."""

    def append(self, records: Sequence[Any], on_done: Callable[[Any], None] | None = None) -> None: ...


@dataclass(frozen=True, slots=True)
class Upsertion:
    user: str
    mechanism: int  # wire code: 1 SCRAM-SHA-256, 2 SCRAM-SHA-512
    iterations: int
    salt: bytes
    salted_password: bytes


@dataclass(frozen=True, slots=True)
class Deletion:
    user: str
    mechanism: int


@dataclass(frozen=True, slots=True)
class UserResult:
    user: str
    error: ErrorCode = ErrorCode.none
    message: str | None = None


@dataclass(frozen=True, slots=True)
class DescribedUser:
    user: str
    credentials: tuple[tuple[int, int], ...] = ()  # (mechanism code, iterations)
    error: ErrorCode = ErrorCode.none
    message: str | None = None


_Key = tuple[str, str]  # (user, mechanism name)


class UserStore:
    def __init__(self, log: CredentialLog, now_ms: Callable[[], int]) -> None:
        self.log = log
        self.now_ms = now_ms
        self._users: dict[str, dict[str, ScramCredential]] = {}
        # changes appended but not yet durable, newest last: what the next alteration is validated against
        self._pending: dict[_Key, tuple[ScramCredential | None, int]] = {}
        self._sequence = 0
        # PLAIN: per user, the StoredKey last verified and HMAC(_plain_key, password) of the password that matched it
        self._plain_key = secrets.token_bytes(32)
        self._plain_ok: dict[str, tuple[bytes, bytes]] = {}

    # ---------------------------------------------------------------------------------------------- lookups

    def scram(self, user: str, mechanism: str) -> ScramCredential | None:
        creds = self._users.get(user)
        return None if creds is None else creds.get(mechanism)

    def verify_plain(self, user: str, password: str) -> bool:
        """PLAIN: whether the password matches one of the user's SCRAM credentials (SHA-512 tried first)."""
        creds = self._users.get(user)
        if not creds:  # the same PBKDF2 as a wrong password: the time taken does not tell which users exist
            password_matches(fake_credential(SCRAM_SHA_512, user), password)
            return False
        digest = hmac.new(self._plain_key, password.encode(), hashlib.sha256).digest()
        known = self._plain_ok.get(user)
        for mechanism in (SCRAM_SHA_512, SCRAM_SHA_256):
            credential = creds.get(mechanism)
            if credential is None:
                continue
            if known is not None and known[0] == credential.stored_key and hmac.compare_digest(known[1], digest):
                return True
            if password_matches(credential, password):
                self._plain_ok[user] = (credential.stored_key, digest)
                return True
        return False

    def users(self) -> list[str]:
        return sorted(self._users)

    def mechanisms(self, user: str) -> dict[str, int]:
        """The user's mechanisms and their iterations (nothing secret)."""
        return {m: c.iterations for m, c in sorted(self._users.get(user, {}).items())}

    # ---------------------------------------------------------------------------------------------- loading

    def load(self, records: Iterable[CredentialRecord]) -> None:
        """Replay stored records (start-up), in order."""
        for record in records:
            self._apply(record)

    def _apply(self, record: CredentialRecord) -> None:
        if isinstance(record, ScramCredentialSet):
            self._users.setdefault(record.user, {})[record.credential.mechanism] = record.credential
        else:
            creds = self._users.get(record.user)
            if creds is not None:
                creds.pop(record.mechanism, None)
                if not creds:
                    del self._users[record.user]
                    self._plain_ok.pop(record.user, None)

    def _exists(self, user: str, mechanism: str) -> bool:
        pending = self._pending.get((user, mechanism))
        if pending is not None:
            return pending[0] is not None
        return self.scram(user, mechanism) is not None

    # ---------------------------------------------------------------------------------------------- describe

    def describe(self, users: Sequence[str] | None) -> list[DescribedUser]:
        """DescribeUserScramCredentials: every user with a credential when ``users`` is None or empty."""
        if not users:
            return [self._described(u) for u in sorted(self._users)]
        seen: dict[str, int] = {}
        for u in users:
            seen[u] = seen.get(u, 0) + 1
        out: list[DescribedUser] = []
        for u in dict.fromkeys(users):
            if seen[u] > 1:
                out.append(
                    DescribedUser(
                        u,
                        error=ErrorCode.duplicate_resource,
                        message="Cannot describe SCRAM credentials for the same user twice in a single request",
                    )
                )
            elif u not in self._users:
                out.append(DescribedUser(u, error=ErrorCode.resource_not_found, message="Attempt to describe a user "
                                         "credential that does not exist"))  # fmt: skip
            else:
                out.append(self._described(u))
        return out

    def _described(self, user: str) -> DescribedUser:
        creds = self._users[user]
        return DescribedUser(user, tuple((MECHANISM_NUMBERS[m], c.iterations) for m, c in sorted(creds.items())))

    # ---------------------------------------------------------------------------------------------- alter

    def alter(
        self,
        deletions: Sequence[Deletion],
        upsertions: Sequence[Upsertion],
        done: Callable[[list[UserResult]], object],
    ) -> None:
        """AlterUserScramCredentials: ``done(results)``, one per user in order of first appearance, once the
        accepted changes are durable (at once when nothing is accepted)."""
        changes: list[Deletion | Upsertion] = [*deletions, *upsertions]
        counts: dict[str, int] = {}
        for change in changes:
            counts[change.user] = counts.get(change.user, 0) + 1
        results: dict[str, UserResult] = {}
        records: list[CredentialRecord] = []
        now = self.now_ms()
        for change in changes:
            user = change.user
            if user in results:
                continue
            if counts[user] > 1:
                results[user] = UserResult(
                    user, ErrorCode.duplicate_resource, "A user credential cannot be altered twice in the same request"
                )
                continue
            error = self._check(change)
            if error is not None:
                results[user] = error
                continue
            mechanism = MECHANISM_CODES[change.mechanism]
            if isinstance(change, Deletion):
                records.append(ScramCredentialDeleted(user, mechanism, now))
            else:
                credential = credential_from_salted(mechanism, change.salt, change.salted_password, change.iterations)
                records.append(ScramCredentialSet(user, credential, now))
            results[user] = UserResult(user)
        ordered = list(results)
        if not records:
            done([results[u] for u in ordered])
            return
        self._write(records, lambda failure: done(self._outcome(ordered, results, records, failure)))

    def _check(self, change: Deletion | Upsertion) -> UserResult | None:
        user = change.user
        if not user:
            return UserResult(user, ErrorCode.unacceptable_credential, "Username must not be empty")
        mechanism = MECHANISM_CODES.get(change.mechanism)
        if mechanism is None:
            return UserResult(user, ErrorCode.unsupported_sasl_mechanism, "Unknown SCRAM mechanism")
        if isinstance(change, Deletion):
            if not self._exists(user, mechanism):
                return UserResult(user, ErrorCode.resource_not_found, "Attempt to delete a user credential that "
                                  "does not exist")  # fmt: skip
            return None
        if change.iterations < MIN_ITERATIONS:
            return UserResult(user, ErrorCode.unacceptable_credential, "Too few iterations")
        if change.iterations > MAX_ITERATIONS:
            return UserResult(user, ErrorCode.unacceptable_credential, "Too many iterations")
        if not change.salt or not change.salted_password:
            return UserResult(user, ErrorCode.unacceptable_credential, "Salt and salted password must not be empty")
        return None

    @staticmethod
    def _outcome(
        ordered: list[str], results: dict[str, UserResult], records: list[CredentialRecord], failure: Any
    ) -> list[UserResult]:
        if failure is None:
            return [results[u] for u in ordered]
        written = {r.user for r in records}
        failed = UserResult("", ErrorCode.unknown_server_error, "The credential could not be stored")
        return [UserResult(u, failed.error, failed.message) if u in written else results[u] for u in ordered]

    def set_credentials(
        self, changes: Sequence[tuple[str, ScramCredential | str]], done: Callable[[Any], object] | None = None
    ) -> None:
        """Operator changes (HTTP API, bootstrap): each (user, credential) sets it, each (user, mechanism name)
        deletes it; ``done(failure or None)`` once durable. The caller has validated them."""
        now = self.now_ms()
        records: list[CredentialRecord] = [
            ScramCredentialSet(user, c, now) if isinstance(c, ScramCredential) else ScramCredentialDeleted(user, c, now)
            for user, c in changes
        ]
        self._write(records, done)

    def _write(self, records: list[CredentialRecord], done: Callable[[Any], object] | None) -> None:
        self._sequence += 1
        sequence = self._sequence
        for r in records:
            key = (r.user, r.credential.mechanism if isinstance(r, ScramCredentialSet) else r.mechanism)
            self._pending[key] = (r.credential if isinstance(r, ScramCredentialSet) else None, sequence)

        def written(failure: Any) -> None:
            for r in records:
                key = (r.user, r.credential.mechanism if isinstance(r, ScramCredentialSet) else r.mechanism)
                if self._pending.get(key, (None, -1))[1] == sequence:
                    del self._pending[key]
                if failure is None:
                    self._apply(r)
            if done is not None:
                done(failure)

        self.log.append(records, written)

    def bootstrap(self, credentials: Sequence[tuple[str, ScramCredential]], done: Callable[[Any], object]) -> list[str]:
        """The configured first credentials: each one the store does not hold yet (for that user and mechanism) is
        stored; a stored one is never overwritten (it may have been rotated since). Returns the users written."""
        missing = [(u, c) for u, c in credentials if not self._exists(u, c.mechanism)]
        if missing:
            self.set_credentials(missing, done)
        else:
            done(None)
        return sorted({u for u, _ in missing})


__all__ = [
    "MECHANISM_CODES",
    "MECHANISM_NUMBERS",
    "SCRAM_MECHANISMS",
    "CredentialLog",
    "Deletion",
    "DescribedUser",
    "Upsertion",
    "UserResult",
    "UserStore",
    "parse_scram_spec",
]


def parse_scram_spec(spec: str) -> tuple[str, str, str, int]:
    """Kafka's ``--add-scram`` form (``kafka-storage.sh format``, ``kafka-configs.sh``):
    ``SCRAM-SHA-512=[name=alice,password=alice-secret,iterations=8192]`` -> (mechanism, user, password,
    iterations). A value may be double-quoted (then it may hold commas and ``]``). Raises ValueError naming what is
    wrong, never echoing the password."""
    mechanism, sep, rest = spec.strip().partition("=")
    mechanism = mechanism.strip().upper()
    if mechanism not in SCRAM_MECHANISMS:
        raise ValueError(f"unknown SCRAM mechanism {mechanism!r} (expected one of {', '.join(SCRAM_MECHANISMS)})")
    rest = rest.strip()
    if not sep or not rest.startswith("[") or not rest.endswith("]"):
        raise ValueError(f"expected {mechanism}=[name=...,password=...]")
    fields: dict[str, str] = {}
    body, i = rest[1:-1], 0
    while i < len(body):
        key, eq, _ = body[i:].partition("=")
        if not eq:
            raise ValueError("expected key=value pairs separated by commas")
        i += len(key) + 1
        if body[i : i + 1] == '"':
            end = body.find('"', i + 1)
            if end < 0:
                raise ValueError("unterminated quoted value")
            value, i = body[i + 1 : end], end + 1
        else:
            end = body.find(",", i)
            end = len(body) if end < 0 else end
            value, i = body[i:end], end
        if i < len(body) and body[i] != ",":
            raise ValueError("expected a comma after a quoted value")
        i += 1
        fields[key.strip().lower()] = value
    unknown = set(fields) - {"name", "password", "iterations"}
    if unknown:
        raise ValueError(f"unknown field(s) {', '.join(sorted(unknown))} (name, password, iterations)")
    name, password = fields.get("name", ""), fields.get("password", "")
    if not name or not password:
        raise ValueError("name and password are required")
    try:
        iterations = int(fields.get("iterations", DEFAULT_BOOTSTRAP_ITERATIONS))
    except ValueError:
        raise ValueError("iterations must be an integer") from None
    if not MIN_ITERATIONS <= iterations <= MAX_ITERATIONS:
        raise ValueError(f"iterations must be between {MIN_ITERATIONS} and {MAX_ITERATIONS}")
    return mechanism, name, password, iterations
