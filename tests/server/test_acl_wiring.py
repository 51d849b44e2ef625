"""ACLs in the running server: the settings (Kafka's names) build the authorizer, the Heartbeat fast path checks
Read on the group like the adapter path, and an ACL created on the live index applies to the next heartbeat of a
member already in the group (ACLs take effect at once on open connections)."""

from __future__ import annotations

from typing import Any

import pytest

from daemon.settings import SettingsError, load_settings, parse_set_options
from protocol.errors import ErrorCode
from security.acls import AclBinding, AclOperation, PatternType, PermissionType, ResourceType
from servers.kafka import RequestContext
from servers.kafka.membership import handle_heartbeat

from .test_heartbeat_path import _generic, _request, _stable_app


def test_settings_by_kafka_name() -> None:
    settings = load_settings(
        None,
        **parse_set_options(
            ["authorizer.enabled=true", "super.users=User:admin; User:ops", "allow.everyone.if.no.acl.found=true"]
        ),
    )
    a = settings.authorizer
    assert (a.enabled, a.super_users, a.allow_everyone_if_no_acl_found) == (True, ["User:admin", "User:ops"], True)
    assert load_settings(None).authorizer.enabled is False  # off by default
    with pytest.raises((SettingsError, ValueError)):
        load_settings(None, **parse_set_options(["super.users=admin"]))


def _code(frame: Any) -> int:
    return int.from_bytes(frame[-3:-1], "big", signed=True)  # v4: ... error_code (int16), tagged fields (0)


async def test_heartbeat_fast_path_checks_read_on_the_group_at_once() -> None:
    app, member_id, generation = await _stable_app()
    try:
        authorizer = app.services.authorizer
        authorizer.enabled = True
        authorizer.allow_everyone_if_no_acl_found = True
        request = _request(4, group_id="g", generation_id=generation, member_id=member_id, group_instance_id=None)
        allowed = app.server.handle(request, "/127.0.0.1", "User:alice")
        assert allowed == _generic(app.services, request)
        assert _code(allowed) != ErrorCode.group_authorization_failed.value
        deny = AclBinding(ResourceType.GROUP, "g", PatternType.LITERAL, "User:alice", "*", AclOperation.READ,
                          PermissionType.DENY)  # fmt: skip
        authorizer.index.add(deny)
        denied = app.server.handle(request, "/127.0.0.1", "User:alice")
        assert _code(denied) == ErrorCode.group_authorization_failed.value
        # the adapter path answers the same
        ctx = RequestContext(12, 4, 41, "c", "/127.0.0.1", principal="User:alice")
        assert handle_heartbeat(app.services, ctx, request.body).error_code == ErrorCode.group_authorization_failed
        # the group has an ACL now, so allow.everyone.if.no.acl.found no longer lets bob in either
        assert _code(app.server.handle(request, "/127.0.0.1", "User:bob")) == ErrorCode.group_authorization_failed.value
        authorizer.index.remove(deny)
        assert _code(app.server.handle(request, "/127.0.0.1", "User:bob")) != ErrorCode.group_authorization_failed.value
    finally:
        app.timer.cancel_all()
