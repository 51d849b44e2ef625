"""The audit trail's records (security.audit.AdminAction) stored in admin_actions and read back, on SQLite and
PostgreSQL, through the same record log as everything else."""

from __future__ import annotations

from coordinator.record_log import WriteFailure
from runtime.audit_trail import AuditTrail
from security.audit import Action, AdminAction, Via
from storage import SqlRecordLog

from .records_gen import commit


async def test_admin_actions_are_stored_with_their_actor_and_read_back_newest_first(record_log: SqlRecordLog) -> None:
    now = [1_000]
    assert record_log.queries is not None
    trail = AuditTrail(record_log.append, lambda: now[0], reader=record_log.queries.admin_actions)
    errors: list[WriteFailure | None] = []
    record_log.append([commit("g", "t", 0, 5, 900)], errors.append)  # in the same log as the group records
    trail.record(Via.HTTP, Action.OFFSETS_RESET, "g", group_id="g", principal="User:ada", client_id="kgc/1",
                 client_host="10.0.0.7", detail="offsets reset (to-earliest) on 1 partition(s)")  # fmt: skip
    now[0] = 2_000
    trail.record(Via.KAFKA, Action.TOPIC_DELETE, "orders", group_id=None, principal="User:ANONYMOUS",
                 client_id="adminclient-1", client_host="/127.0.0.1", detail="topic orders deleted")  # fmt: skip
    now[0] = 3_000
    trail.record(Via.KAFKA, Action.OFFSETS_ALTER, "g", group_id="g", principal="User:bob", client_id=None,
                 client_host="/127.0.0.1", detail="offsets committed outside the group")  # fmt: skip
    await record_log.flush()
    assert errors == [None]

    actions, total = await trail.actions()
    assert total == 3 and [a.action for a in actions] == [Action.OFFSETS_ALTER, Action.TOPIC_DELETE,
                                                          Action.OFFSETS_RESET]  # fmt: skip
    assert actions[2] == AdminAction(1_000, Via.HTTP, Action.OFFSETS_RESET, "g", "g", "User:ada", "kgc/1",
                                     "10.0.0.7", "offsets reset (to-earliest) on 1 partition(s)")  # fmt: skip
    assert actions[0].client_id is None
    of_g, total_g = await trail.actions("g", limit=1)
    assert total_g == 2 and [a.principal for a in of_g] == ["User:bob"]
    window, total_w = await trail.actions(since_ms=1_500, until_ms=3_000)
    assert total_w == 1 and window[0].resource == "orders"


async def test_memory_trail_coalesces_a_clients_repeated_alters() -> None:
    now = [0]
    appended: list[object] = []
    trail = AuditTrail(lambda records, _done: appended.extend(records), lambda: now[0], keep=3, coalesce_ms=10_000)

    def alter(principal: str = "User:c") -> AdminAction | None:
        return trail.record(Via.KAFKA, Action.OFFSETS_ALTER, "g", group_id="g", principal=principal, client_id="c",
                            client_host="h", detail="alter")  # fmt: skip

    assert alter() is not None
    now[0] = 9_999
    assert alter() is None and alter("User:other") is not None  # another actor is another entry
    now[0] = 10_000
    assert alter() is not None
    assert len(appended) == 3
    trail.record(Via.HTTP, Action.GROUP_DELETE, "x", group_id="x", principal="p", client_id=None, client_host=None,
                 detail="deleted")  # fmt: skip
    actions, total = await trail.actions()
    assert total == 3 and actions[0].action is Action.GROUP_DELETE  # the last `keep` only, newest first
