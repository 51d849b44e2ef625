"""The credential store's rules (security/users.py) and the SCRAM key derivation (security/scram_keys.py), with a
log whose writes complete when the test says so."""

from __future__ import annotations

import base64
import hashlib
import hmac
from collections.abc import Callable, Sequence
from typing import Any

from protocol.errors import ErrorCode
from security.credential_records import ScramCredentialDeleted, ScramCredentialSet
from security.credentials import SCRAM_SHA_256, SCRAM_SHA_512, CredentialLookup
from security.scram_keys import credential_from_salted, new_credential, password_matches, salted_password
from security.users import Deletion, DescribedUser, Upsertion, UserResult, UserStore

SHA256, SHA512 = 1, 2


class HeldLog:
    """Appends are held until ``complete`` (None: durable, else the failure)."""

    def __init__(self) -> None:
        self.held: list[tuple[list[Any], Callable[[Any], None] | None]] = []
        self.stored: list[Any] = []

    def append(self, records: Sequence[Any], on_done: Callable[[Any], None] | None = None) -> None:
        self.held.append((list(records), on_done))

    def complete(self, failure: Any = None) -> None:
        held, self.held = self.held, []
        for records, on_done in held:
            if failure is None:
                self.stored.extend(records)
            if on_done is not None:
                on_done(failure)


def upsert(user: str, password: str, mechanism: int = SHA512, iterations: int = 4096) -> Upsertion:
    name = SCRAM_SHA_512 if mechanism == SHA512 else SCRAM_SHA_256
    salt = hashlib.sha256(user.encode()).digest()
    return Upsertion(user, mechanism, iterations, salt, salted_password(name, password, salt, iterations))


def alter(store: UserStore, log: HeldLog, deletions: list[Deletion], upsertions: list[Upsertion]) -> list[UserResult]:
    out: list[list[UserResult]] = []
    store.alter(deletions, upsertions, out.append)
    log.complete()
    assert len(out) == 1
    return out[0]


def test_rfc7677_vector_from_the_derived_keys() -> None:
    """The keys we store reproduce RFC 7677's client proof and server signature (SCRAM-SHA-256, user/pencil)."""
    salt = base64.b64decode("W22ZaJ0SNY7soEsUEjb6gQ==")
    cred = new_credential(SCRAM_SHA_256, "pencil", 4096, salt)
    nonce = "rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0"
    auth = f"n=user,r=rOprNGfwEbeRWgbNEkqO,r={nonce},s=W22ZaJ0SNY7soEsUEjb6gQ==,i=4096,c=biws,r={nonce}".encode()
    client_key = hmac.new(salted_password(SCRAM_SHA_256, "pencil", salt, 4096), b"Client Key", "sha256").digest()
    assert hashlib.sha256(client_key).digest() == cred.stored_key
    signature = hmac.new(cred.stored_key, auth, "sha256").digest()
    proof = bytes(a ^ b for a, b in zip(client_key, signature, strict=True))
    assert base64.b64encode(proof).decode() == "dHzbZapWIk4jUhN+Ute9ytag9zjfMHgsqmmiz7AndVQ="
    server_signature = hmac.new(cred.server_key, auth, "sha256").digest()
    assert base64.b64encode(server_signature).decode() == "6rriTRBi23WpRR/wtup+mMhUZUn/dB5nLTJRsjl95G4="


def test_password_matches_only_its_own_password() -> None:
    cred = new_credential(SCRAM_SHA_512, "s3cret", 4096)
    assert password_matches(cred, "s3cret")
    assert not password_matches(cred, "s3cret ")
    assert credential_from_salted(SCRAM_SHA_512, cred.salt, salted_password(SCRAM_SHA_512, "s3cret", cred.salt, 4096),
                                  4096) == cred  # fmt: skip


def test_created_user_is_usable_once_durable_and_deleted_one_is_gone() -> None:
    log = HeldLog()
    store = UserStore(log, lambda: 1000)
    lookup: CredentialLookup = store  # what the SASL exchanges take (checked by mypy on the tests too)
    assert lookup.scram("alice", SCRAM_SHA_512) is None
    results: list[list[UserResult]] = []
    store.alter([], [upsert("alice", "pw-a")], results.append)
    assert results == [] and store.scram("alice", SCRAM_SHA_512) is None  # not durable yet: not usable
    log.complete()
    assert results == [[UserResult("alice")]]
    assert store.scram("alice", SCRAM_SHA_512) is not None and store.scram("alice", SCRAM_SHA_256) is None
    assert store.verify_plain("alice", "pw-a") and not store.verify_plain("alice", "pw-b")
    assert not store.verify_plain("bob", "pw-a")
    assert isinstance(log.stored[0], ScramCredentialSet) and b"pw-a" not in repr(log.stored[0]).encode()
    assert alter(store, log, [Deletion("alice", SHA512)], []) == [UserResult("alice")]
    assert store.scram("alice", SCRAM_SHA_512) is None and not store.verify_plain("alice", "pw-a")
    assert store.users() == [] and log.stored[-1] == ScramCredentialDeleted("alice", SCRAM_SHA_512, 1000)


def test_plain_checks_every_mechanism_of_the_user() -> None:
    log = HeldLog()
    store = UserStore(log, lambda: 0)
    alter(store, log, [], [upsert("carol", "one", SHA256)])
    assert store.verify_plain("carol", "one")
    alter(store, log, [], [upsert("carol", "two", SHA512)])
    assert store.verify_plain("carol", "one") and store.verify_plain("carol", "two")
    assert store.mechanisms("carol") == {SCRAM_SHA_256: 4096, SCRAM_SHA_512: 4096}


def test_alter_errors_are_kafkas_per_user() -> None:
    log = HeldLog()
    store = UserStore(log, lambda: 0)
    results = alter(
        store,
        log,
        [Deletion("ghost", SHA256), Deletion("dup", SHA256), Deletion("", SHA256)],
        [
            upsert("dup", "x"),
            upsert("few", "x", iterations=4095),
            upsert("many", "x", iterations=16385),
            Upsertion("mech", 3, 4096, b"s", b"p"),
            upsert("ok", "x", iterations=16384),
        ],
    )
    assert [(r.user, r.error) for r in results] == [
        ("ghost", ErrorCode.resource_not_found),
        ("dup", ErrorCode.duplicate_resource),
        ("", ErrorCode.unacceptable_credential),
        ("few", ErrorCode.unacceptable_credential),
        ("many", ErrorCode.unacceptable_credential),
        ("mech", ErrorCode.unsupported_sasl_mechanism),
        ("ok", ErrorCode.none),
    ]
    assert [r.message for r in results][3:5] == ["Too few iterations", "Too many iterations"]
    assert store.users() == ["ok"] and [type(r) for r in log.stored] == [ScramCredentialSet]


def test_nothing_accepted_answers_at_once_without_a_write() -> None:
    log = HeldLog()
    store = UserStore(log, lambda: 0)
    out: list[list[UserResult]] = []
    store.alter([Deletion("ghost", SHA512)], [], out.append)
    assert out and out[0][0].error == ErrorCode.resource_not_found and log.held == []


def test_a_failed_write_changes_nothing() -> None:
    log = HeldLog()
    store = UserStore(log, lambda: 0)
    out: list[list[UserResult]] = []
    store.alter([], [upsert("dave", "pw")], out.append)
    log.complete(failure="unavailable")
    assert out[0][0].error == ErrorCode.unknown_server_error
    assert store.scram("dave", SCRAM_SHA_512) is None
    # and the pending change is forgotten: deleting it now is RESOURCE_NOT_FOUND
    assert alter(store, log, [Deletion("dave", SHA512)], [])[0].error == ErrorCode.resource_not_found


def test_a_deletion_is_checked_against_a_creation_still_being_written() -> None:
    log = HeldLog()
    store = UserStore(log, lambda: 0)
    first: list[list[UserResult]] = []
    second: list[list[UserResult]] = []
    store.alter([], [upsert("erin", "pw")], first.append)
    store.alter([Deletion("erin", SHA512)], [], second.append)
    log.complete()
    assert first[0][0].error == ErrorCode.none and second[0][0].error == ErrorCode.none
    assert store.scram("erin", SCRAM_SHA_512) is None


def test_describe_all_named_missing_and_duplicate() -> None:
    log = HeldLog()
    store = UserStore(log, lambda: 0)
    alter(store, log, [], [upsert("b", "x", SHA256, 8192), upsert("a", "y")])
    assert store.describe(None) == [DescribedUser("a", ((SHA512, 4096),)), DescribedUser("b", ((SHA256, 8192),))]
    assert store.describe([]) == store.describe(None)
    named = store.describe(["b", "zz", "a", "a"])
    assert [(d.user, d.error) for d in named] == [
        ("b", ErrorCode.none),
        ("zz", ErrorCode.resource_not_found),
        ("a", ErrorCode.duplicate_resource),
    ]


def test_bootstrap_stores_only_what_is_missing_and_load_replays() -> None:
    log = HeldLog()
    store = UserStore(log, lambda: 5)
    admin = new_credential(SCRAM_SHA_512, "first", 4096)
    seen: list[Any] = []
    assert store.bootstrap([("admin", admin)], seen.append) == ["admin"]
    log.complete()
    assert seen == [None] and store.verify_plain("admin", "first")
    rotated = new_credential(SCRAM_SHA_512, "rotated", 4096)
    alter(store, log, [], [Upsertion("admin", SHA512, 4096, rotated.salt,
                                     salted_password(SCRAM_SHA_512, "rotated", rotated.salt, 4096))])  # fmt: skip
    assert store.bootstrap([("admin", admin)], seen.append) == []  # a restart does not undo the rotation
    assert store.verify_plain("admin", "rotated") and not store.verify_plain("admin", "first")
    again = UserStore(HeldLog(), lambda: 0)
    again.load(log.stored)
    assert again.scram("admin", SCRAM_SHA_512) == store.scram("admin", SCRAM_SHA_512)


def test_parse_scram_spec_kafkas_add_scram_form() -> None:
    from security.users import parse_scram_spec

    assert parse_scram_spec("SCRAM-SHA-256=[name=alice,password=alice-secret]") == (
        SCRAM_SHA_256, "alice", "alice-secret", 8192,
    )  # fmt: skip
    assert parse_scram_spec('scram-sha-512=[name=bob,password="a,b]c",iterations=4096]') == (
        SCRAM_SHA_512, "bob", "a,b]c", 4096,
    )  # fmt: skip
    bad = [
        "SCRAM-SHA-1=[name=a,password=b]",
        "SCRAM-SHA-512=name=a,password=b",
        "SCRAM-SHA-512=[name=a]",
        "SCRAM-SHA-512=[name=a,password=b,iterations=100]",
        "SCRAM-SHA-512=[name=a,password=b,salt=c]",
        'SCRAM-SHA-512=[name=a,password="unterminated]',
    ]
    for spec in bad:
        try:
            parse_scram_spec(spec)
        except ValueError as e:
            assert "unterminated" not in str(e).replace("unterminated quoted", "")  # the password is never echoed
        else:
            raise AssertionError(f"accepted {spec!r}")


def test_a_remembered_plain_password_is_forgotten_when_the_credential_changes() -> None:
    log = HeldLog()
    store = UserStore(log, lambda: 0)
    alter(store, log, [], [upsert("gina", "old", SHA256)])
    assert store.verify_plain("gina", "old") and store.verify_plain("gina", "old")  # the second one remembered
    assert not store.verify_plain("gina", "old2")
    alter(store, log, [], [upsert("gina", "new", SHA256)])  # same salt, other password: another StoredKey
    assert not store.verify_plain("gina", "old") and store.verify_plain("gina", "new")
    alter(store, log, [Deletion("gina", SHA256)], [])
    assert not store.verify_plain("gina", "new")
    alter(store, log, [], [upsert("gina", "new", SHA256)])  # re-created with the same password: verified afresh
    assert store.verify_plain("gina", "new")


def test_an_empty_store_is_still_a_store() -> None:
    """A listener that picks ``credentials or NoCredentials()`` must keep an empty store: users come later."""
    assert bool(UserStore(HeldLog(), lambda: 0))
