"""Answers too big to build in one go: encoded a slice at a time, yielding to the event loop in between.

A handler whose answer is a list that grows with what a client asks for (DescribeGroups of many ids, ListGroups over
every group, FindCoordinator v4+ with many keys) returns ``sliced_frame(...)`` above ``SLICE`` entries: a coroutine,
which the server parks as a task. It builds the same bytes as kio's encoding of the whole response: kio encodes the
response with the list empty (the fixed fields before it, and its tag buffer after it: the list must be the last
field), and kio's entity writer encodes each entry, ``SLICE`` entries per loop iteration.
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

from protocol.codec import encode_response
from protocol.headers import RequestHeader
from protocol.hot_responses import uvarint as _uvarint

from ._util import response_cls
from .build import build
from .context import RequestContext

SLICE = 500  # entries resolved and encoded per loop iteration
_I32 = struct.Struct(">i")


async def sliced_frame(
    ctx: RequestContext,
    top: dict[str, Any],
    field: str,
    items: Sequence[Any],
    to_dict: Callable[[Any], dict[str, Any]],
    resolve: Callable[[list[Any]], Sequence[Any]] | None = None,
) -> bytes:
    """The whole frame of the response to ``ctx`` whose last field is the array ``field``; ``top`` holds the other
    fields; ``items`` become the entries through ``resolve`` (a slice at a time, e.g. describing groups) and
    ``to_dict`` (``build``'s description of one entry)."""
    cls = response_cls(ctx)
    names = [f.name for f in dataclasses.fields(cls)]
    if names[-1] != field:
        raise ValueError(f"{cls.__name__}.{field} is not the last field")
    flexible = bool(cls.__flexible__)
    header = RequestHeader(ctx.api_key, ctx.api_version, ctx.correlation_id, None)
    empty = encode_response(header, build(cls, {**top, field: []}))
    tags = 1 if flexible else 0  # the response's (empty) tag buffer
    head = empty[4 : len(empty) - tags - (1 if flexible else 4)]  # correlation id .. the fields before the array
    entry_cls = typing.get_args(dataclasses.fields(cls)[-1].type)[0]  # tuple[Entry, ...]
    write = entity_writer(entry_cls)
    out = io.BytesIO()
    out.write(head)
    n = len(items)
    out.write(_uvarint(n + 1) if flexible else _I32.pack(n))
    for start in range(0, n, SLICE):
        await asyncio.sleep(0)  # one slice per loop iteration: everything else that is ready runs in between
        chunk = list(items[start : start + SLICE])
        for item in resolve(chunk) if resolve is not None else chunk:
            write(out, build(entry_cls, to_dict(item)))
    if tags:
        out.write(b"\x00")
    size = out.tell()
    return _I32.pack(size) + out.getvalue()
