"""The ACL bindings in the database (table ``acls``, migration 0005): loaded at start, written by CreateAcls and
DeleteAcls before they answer.

ACL changes are rare administrative writes, not part of the coordinator's record stream: each call is one short
transaction of its own on the engine, outside the batch writer. The authorizer's in-memory index
(``security.acls.AclIndex``) is changed by the caller only after the transaction committed, so an answered
CreateAcls survives a restart and a failed one changes nothing.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence

from sqlalchemy import and_, delete, insert, select
from sqlalchemy.ext.asyncio import AsyncConnection, AsyncEngine

from security.acls import AclBinding, AclOperation, PatternType, PermissionType, ResourceType

from .models import AclRow, table

_ACLS = table(AclRow)


class SqlAclStore:
    def __init__(self, engine: AsyncEngine, now_ms: Callable[[], int] = lambda: int(time.time() * 1000)) -> None:
        self.engine = engine
        self.now_ms = now_ms  # the created_ms of new rows

    async def load(self) -> list[AclBinding]:
        c = _ACLS.c
        async with self.engine.connect() as conn:
            rows = (
                await conn.execute(
                    select(
                        c.resource_type, c.resource_name, c.pattern_type, c.principal, c.host, c.operation,
                        c.permission,
                    )
                )
            ).all()  # fmt: skip
        return [
            AclBinding(
                ResourceType(r[0]), r[1], PatternType(r[2]), r[3], r[4], AclOperation(r[5]), PermissionType(r[6])
            )
            for r in rows
        ]

    async def create(self, bindings: Sequence[AclBinding]) -> None:
        """Store ``bindings`` in one transaction (one stored already is stored again, not an error)."""
        if not bindings:
            return
        now_ms = self.now_ms()
        async with self.engine.begin() as conn:
            # Idempotent: two CreateAcls racing with the same binding both succeed (Kafka: creating an existing ACL
            # is no error), instead of the second failing on the primary key.
            await _delete(conn, bindings)
            await conn.execute(insert(_ACLS), [{**_columns(b), "created_ms": now_ms} for b in bindings])

    async def delete(self, bindings: Sequence[AclBinding]) -> None:
        """Delete ``bindings`` in one transaction."""
        if not bindings:
            return
        async with self.engine.begin() as conn:
            await _delete(conn, bindings)


async def _delete(conn: AsyncConnection, bindings: Sequence[AclBinding]) -> None:
    c = _ACLS.c
    for b in bindings:
        await conn.execute(delete(_ACLS).where(and_(*(c[k] == v for k, v in _columns(b).items()))))


def _columns(b: AclBinding) -> dict[str, object]:
    return {
        "resource_type": int(b.resource_type),
        "resource_name": b.resource_name,
        "pattern_type": int(b.pattern_type),
        "principal": b.principal,
        "host": b.host,
        "operation": int(b.operation),
        "permission": int(b.permission),
    }
