"""Request and response headers.

Request header versions (Kafka's ``RequestHeader.json``):

- v0: api_key i16, api_version i16, correlation_id i32 (only ControlledShutdown v0 used it; we never see it);
- v1: v0 + client_id as a *nullable legacy* string (i16 length, -1 = null) — even in flexible versions;
- v2: v1 + a tagged-field section; used with every flexible request version. Unknown header tags are skipped
  (Kafka defines none we need).

Response header v0 is the correlation id; v1 adds an (empty) tagged-field section and goes with flexible versions,
except that ApiVersions responses always use v0 so that a client can parse the answer before it knows our versions.

The header is parsed by hand rather than through kio: it is on every request, it is four fixed fields, and the first
three are needed even when the api or version is unknown (to answer or report it).
"""

from __future__ import annotations

import struct
from typing import NamedTuple

from kio.serial.errors import DecodeError

from protocol.errors import MalformedFrame
from protocol.tolerant import skip_tagged_fields

__all__ = [
    "RequestHeader",
    "encode_request_header",
    "encode_response_header",
    "parse_request_header",
    "peek_request_prefix",
    "skip_header_tags",
]

_PREFIX = struct.Struct(">hhi")
_PREFIX_AND_CLIENT_LEN = struct.Struct(">hhih")
_I16 = struct.Struct(">h")
_I32 = struct.Struct(">i")
_EMPTY_TAGS = b"\x00"


class RequestHeader(NamedTuple):  # a tuple: built for every request, and cheaper than a frozen dataclass
    api_key: int
    api_version: int
    correlation_id: int
    client_id: str | None


def peek_request_prefix(frame: bytes) -> tuple[int, int, int]:
    """(api_key, api_version, correlation_id) — the fields every header version starts with."""
    if len(frame) < _PREFIX.size:
        raise MalformedFrame(f"request of {len(frame)} bytes is shorter than a request header")
    api_key, api_version, correlation_id = _PREFIX.unpack_from(frame, 0)
    return api_key, api_version, correlation_id


def parse_request_header(frame: bytes, flexible: bool) -> tuple[RequestHeader, int]:
    """Parse a v1 (``flexible=False``) or v2 (``flexible=True``) request header; return it and the body offset."""
    if len(frame) < _PREFIX_AND_CLIENT_LEN.size:
        api_key, api_version, correlation_id = peek_request_prefix(frame)
        raise MalformedFrame("truncated request header", correlation_id, api_key, api_version)
    api_key, api_version, correlation_id, client_len = _PREFIX_AND_CLIENT_LEN.unpack_from(frame, 0)
    offset = _PREFIX_AND_CLIENT_LEN.size
    client_id: str | None
    if client_len < 0:
        client_id = None
    else:
        end = offset + client_len
        if end > len(frame):
            raise MalformedFrame("truncated client_id", correlation_id, api_key, api_version)
        try:
            client_id = frame[offset:end].decode("utf-8")
        except UnicodeDecodeError as e:
            raise MalformedFrame(f"client_id is not UTF-8: {e}", correlation_id, api_key, api_version) from e
        offset = end
    header = RequestHeader(api_key, api_version, correlation_id, client_id)
    return header, (skip_header_tags(frame, offset, header) if flexible else offset)


def skip_header_tags(frame: bytes, offset: int, header: RequestHeader) -> int:
    """The body offset after a v2 header's tagged-field section, which starts at ``offset`` (unknown tags skipped)."""
    if offset < len(frame) and frame[offset] == 0:  # no header tags: the usual case, skip the call
        return offset + 1
    try:
        return skip_tagged_fields(frame, offset)
    except (DecodeError, ValueError) as e:  # kio's varint reader raises ValueError on a varint over 5 bytes
        raise MalformedFrame(
            f"bad request header tagged fields: {e}", header.correlation_id, header.api_key, header.api_version
        ) from e


def encode_request_header(header: RequestHeader, flexible: bool) -> bytes:
    """A v1 or v2 request header (for tests and tools; the server only reads requests)."""
    if header.client_id is None:
        client = _I16.pack(-1)
    else:
        raw = header.client_id.encode("utf-8")
        client = _I16.pack(len(raw)) + raw
    out = _PREFIX.pack(header.api_key, header.api_version, header.correlation_id) + client
    return out + _EMPTY_TAGS if flexible else out


def encode_response_header(correlation_id: int, flexible: bool) -> bytes:
    """A v0 (``flexible=False``) or v1 response header."""
    out = _I32.pack(correlation_id)
    return out + _EMPTY_TAGS if flexible else out
