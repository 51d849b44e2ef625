"""SCRAM credentials in storage (SQLite and PostgreSQL): the real UserStore over the real SqlRecordLog - created,
rotated and deleted users survive a restart, rows hold the salted keys and never the password, and credential
changes share a transaction with other records."""

from __future__ import annotations

import asyncio
from typing import Any

from sqlalchemy import select

from security.credentials import SCRAM_SHA_256, SCRAM_SHA_512
from security.scram_keys import new_credential, salted_password
from security.users import Deletion, Upsertion, UserResult, UserStore
from storage import SqlRecordLog
from storage import models as m
from storage.models import table

from .conftest import Database


def upsertion(user: str, password: str, mechanism: int) -> Upsertion:
    name = SCRAM_SHA_512 if mechanism == 2 else SCRAM_SHA_256
    salt = f"salt-of-{user}".encode()
    return Upsertion(user, mechanism, 4096, salt, salted_password(name, password, salt, 4096))


async def alter(store: UserStore, deletions: list[Deletion], upsertions: list[Upsertion]) -> list[UserResult]:
    future: asyncio.Future[list[UserResult]] = asyncio.get_running_loop().create_future()
    store.alter(deletions, upsertions, future.set_result)
    return await future


async def reopened(database: Database) -> tuple[SqlRecordLog, UserStore]:
    log = await database.open_log()
    store = UserStore(log, lambda: 1)
    store.load(await log.load_credentials())
    return log, store


async def test_users_survive_a_restart_and_rows_hold_no_password(database: Database) -> None:
    log, store = await reopened(database)
    assert store.users() == []
    results = await alter(store, [], [upsertion("alice", "alice-secret", 2), upsertion("bob", "bob-secret", 1)])
    assert [r.error for r in results] == [0, 0]
    async with log.engine.connect() as conn:
        rows = (await conn.execute(select(table(m.ScramCredentialRow)))).all()
    assert sorted((r.user_name, r.mechanism, r.iterations) for r in rows) == [
        ("alice", SCRAM_SHA_512, 4096),
        ("bob", SCRAM_SHA_256, 4096),
    ]
    for r in rows:
        assert b"secret" not in bytes(r.stored_key) + bytes(r.server_key) + bytes(r.salt)
    await log.close()

    log, store = await reopened(database)
    assert store.verify_plain("alice", "alice-secret") and store.verify_plain("bob", "bob-secret")
    assert store.scram("alice", SCRAM_SHA_512) == new_credential(SCRAM_SHA_512, "alice-secret", 4096,
                                                                 b"salt-of-alice")  # fmt: skip
    # rotate alice, delete bob, in one request
    assert [r.error for r in await alter(store, [Deletion("bob", 1)], [upsertion("alice", "rotated", 2)])] == [0, 0]
    await log.close()

    log, store = await reopened(database)
    assert store.users() == ["alice"]
    assert store.verify_plain("alice", "rotated") and not store.verify_plain("alice", "alice-secret")
    assert not store.verify_plain("bob", "bob-secret")
    await log.close()


async def test_set_and_delete_of_one_user_in_one_transaction_end_deleted(record_log: SqlRecordLog) -> None:
    store = UserStore(record_log, lambda: 1)
    loop = asyncio.get_running_loop()
    done: list[asyncio.Future[Any]] = [loop.create_future() for _ in range(3)]
    cred = new_credential(SCRAM_SHA_256, "pw", 4096)
    # appended back to back: the writer merges them into one batch, whose net effect is the deletion
    store.set_credentials([("carol", cred)], done[0].set_result)
    store.set_credentials([("carol", SCRAM_SHA_256)], done[1].set_result)
    store.set_credentials([("dave", cred)], done[2].set_result)
    assert await asyncio.gather(*done) == [None, None, None]
    assert sorted((c.user, c.credential.mechanism) for c in await record_log.load_credentials()) == [
        ("dave", SCRAM_SHA_256)
    ]
    assert store.users() == ["dave"]
