"""The ACL store (table ``acls``, migration 0005) on SQLite and PostgreSQL: created bindings load back after the
log is reopened, deleted ones do not, every enum and the host survive as written."""

from __future__ import annotations

from security.acls import AclBinding, AclOperation, PatternType, PermissionType, ResourceType
from storage.acls import SqlAclStore

from .conftest import Database

A = AclBinding(ResourceType.GROUP, "g", PatternType.LITERAL, "User:alice", "*", AclOperation.READ, PermissionType.ALLOW)
B = AclBinding(
    ResourceType.TOPIC, "pay.", PatternType.PREFIXED, "User:*", "10.0.0.1", AclOperation.WRITE, PermissionType.DENY
)
C = AclBinding(
    ResourceType.CLUSTER,
    "kafka-cluster",
    PatternType.LITERAL,
    "User:bob",
    "*",
    AclOperation.ALTER,
    PermissionType.ALLOW,
)


async def test_acls_are_durable(database: Database) -> None:
    log = await database.open_log()
    try:
        store = SqlAclStore(log.engine, lambda: 1_234)
        assert await store.load() == []
        await store.create([A, B, C])
        await store.create([A])  # again (two racing CreateAcls): no error, still one row
        await store.delete([C])
        await store.delete([])
    finally:
        await log.close()
    log = await database.open_log()
    try:
        assert sorted(await SqlAclStore(log.engine).load(), key=repr) == sorted([A, B], key=repr)
    finally:
        await log.close()
