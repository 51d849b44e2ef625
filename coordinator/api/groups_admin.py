"""ListGroups (16, v0-5), DescribeGroups (15, v0-5), DeleteGroups (42, v0-2).

ListGroups over every group and DescribeGroups of many groups are the admin answers that grow without bound (a
client can create a group per JoinGroup). Up to ``SLICE_GROUPS`` groups they are built and encoded at once, as every
other answer; beyond it the handler returns a coroutine (parked by the server) that describes and encodes the groups
``SLICE_GROUPS`` at a time, yielding to the event loop in between, so one request never holds the loop for long.
The sliced answer is the same bytes as kio's (the response's head and tail are encoded by kio around the groups
array, each group by kio's entity writer; tests/api/test_large_responses.py compares them for every version).
"""

from __future__ import annotations

import asyncio
import dataclasses
import io
import struct
import typing
from collections.abc import Callable, Sequence
from typing import Any

from kio.serial import entity_writer

from coordinator.core import messages as m
from protocol.codec import encode_response
from protocol.errors import ErrorCode
from protocol.headers import RequestHeader

from ._util import response_cls, then
from .build import build
from .context import RequestContext, Services

SLICE_GROUPS = 500  # groups described or encoded per step of a large answer
_SIZE = struct.Struct(">i")

# Kafka's AclOperation bits for what a group allows when authorization is off: READ(3), DESCRIBE(8), DELETE(6).
_GROUP_OPERATIONS = (1 << 3) | (1 << 6) | (1 << 8)
_NOT_REQUESTED = -(2**31)


def handle_list_groups(services: Services, ctx: RequestContext, body: Any) -> Any:
    states = list(getattr(body, "states_filter", ()))
    types = list(getattr(body, "types_filter", ()))
    groups = services.coordinator.list_groups(states, types)
    if len(groups) > SLICE_GROUPS:
        return _sliced(ctx, {"error_code": ErrorCode.none}, groups, _listed)
    return build(response_cls(ctx), {"error_code": ErrorCode.none, "groups": [_listed(g) for g in groups]})


def _listed(group: m.ListedGroup) -> dict[str, Any]:
    return {
        "group_id": group.group_id,
        "protocol_type": group.protocol_type,
        "group_state": group.state,
        "group_type": group.group_type,
    }


def _described(group: m.DescribedGroup, include_operations: bool) -> dict[str, Any]:
    return {
        "error_code": group.error,
        "group_id": group.group_id,
        "group_state": group.state,
        "protocol_type": group.protocol_type,
        "protocol_data": group.protocol_data,
        "authorized_operations": (
            _GROUP_OPERATIONS if include_operations and group.error is ErrorCode.none else _NOT_REQUESTED
        ),
        "members": [
            {
                "member_id": x.member_id,
                "group_instance_id": x.group_instance_id,
                "client_id": x.client_id,
                "client_host": x.client_host,
                "member_metadata": x.metadata,
                "member_assignment": x.assignment,
            }
            for x in group.members
        ],
    }


def handle_describe_groups(services: Services, ctx: RequestContext, body: Any) -> Any:
    include_operations = bool(getattr(body, "include_authorized_operations", False))
    group_ids = list(body.groups)

    def described(group: m.DescribedGroup) -> dict[str, Any]:
        return _described(group, include_operations)

    if len(group_ids) > SLICE_GROUPS:
        coordinator = services.coordinator
        return _sliced(ctx, {}, group_ids, described, coordinator.describe_groups)  # described a slice at a time
    groups = services.coordinator.describe_groups(group_ids)
    return build(response_cls(ctx), {"groups": [described(g) for g in groups]})


async def _sliced(
    ctx: RequestContext,
    top: dict[str, Any],
    items: Sequence[Any],
    to_dict: Callable[[Any], dict[str, Any]],
    resolve: Callable[[list[Any]], Sequence[Any]] | None = None,
) -> bytes:
    """The whole frame of a response whose last field before its tags is the ``groups`` array: ``top`` holds the
    other fields, ``items`` become the array's entries through ``resolve`` (per slice) and ``to_dict``."""
    cls = response_cls(ctx)
    flexible = bool(cls.__flexible__)
    empty = encode_response(
        RequestHeader(ctx.api_key, ctx.api_version, ctx.correlation_id, None), build(cls, {**top, "groups": []})
    )
    tail = 1 if flexible else 0  # the response's tag buffer (empty)
    head = empty[4 : len(empty) - tail - (1 if flexible else 4)]  # correlation id .. fields before the array
    entry_cls = _entry_class(cls)
    write = entity_writer(entry_cls)
    out = io.BytesIO()
    n = len(items)
    out.write(_uvarint(n + 1) if flexible else _SIZE.pack(n))
    for start in range(0, n, SLICE_GROUPS):
        await asyncio.sleep(0)  # one slice per loop iteration: other connections are served in between
        chunk = list(items[start : start + SLICE_GROUPS])
        for item in resolve(chunk) if resolve is not None else chunk:
            write(out, build(entry_cls, to_dict(item)))
    if tail:
        out.write(b"\x00")
    body = out.getvalue()
    return b"".join((_SIZE.pack(len(head) + len(body)), head, body))


def _entry_class(cls: type) -> Any:
    [field] = [f for f in dataclasses.fields(cls) if f.name == "groups"]
    return typing.get_args(field.type)[0]  # tuple[Entry, ...]


def _uvarint(n: int) -> bytes:
    out = bytearray()
    while n >= 0x80:
        out.append((n & 0x7F) | 0x80)
        n >>= 7
    out.append(n)
    return bytes(out)


def handle_delete_groups(services: Services, ctx: RequestContext, body: Any) -> Any:
    ids = list(dict.fromkeys(body.groups_names))  # Kafka de-duplicates

    def respond(results: list[m.DeleteGroupResult]) -> Any:
        return build(response_cls(ctx), {"results": [{"group_id": r.group_id, "error_code": r.error} for r in results]})

    return then(services.coordinator.delete_groups(ids), respond)
