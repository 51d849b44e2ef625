"""Request decoding and response encoding: the thin adapter between frames and kio's message dataclasses.

Rules of this module:

- Input may be any bytes-like object; kio's native readers need read-only ``bytes``, so anything else is copied once.
- Only versions in ``SUPPORTED_VERSIONS`` decode to a ``Request``. Anything else raises ``UnsupportedApi`` carrying
  the correlation id (and, when kio knows that api/version, the decoded client id and body) so the server can answer
  it or close the connection; see ``protocol.responses.unsupported_response_frame``.
- A header or body that does not decode raises ``MalformedFrame`` (with the correlation id once it was readable).
- Unknown tagged fields are skipped, in the header and anywhere in the body. kio's native reader raises ``KeyError``
  on them, so on ``KeyError`` the body is read again by ``protocol.tolerant``, which walks the same schema.
- Trailing bytes after the body are ignored, as Kafka's own request parser does.
- No declared length reaches kio's native reader unchecked: ``protocol.bounds`` walks every body whose schema has an
  array first (the native reader pre-allocates declared array counts). A null where the schema allows none raises
  ``InvalidRequest``, any other bad length ``LengthOutOfBounds`` (both ``MalformedFrame``).
- ``encode_response`` returns the whole frame: size prefix, response header (v0 for ApiVersions and non-flexible
  versions, v1 otherwise) and body. Heartbeat responses (the most frequent) are packed by hand with one
  ``struct`` call, OffsetCommit responses in ``protocol.hot_responses``; tests prove the bytes identical to kio's.
"""

from __future__ import annotations

import functools
import io
import struct
from collections.abc import Callable
from datetime import timedelta
from typing import Any, NamedTuple

from kio.index import KioIndexError, load_request_schema, load_response_schema
from kio.schema.api_versions.v0.response import ApiVersion as ApiVersionV0
from kio.schema.api_versions.v0.response import ApiVersionsResponse as ApiVersionsResponseV0
from kio.serial import entity_reader, entity_writer
from kio.serial.errors import DecodeError, UnexpectedNull
from kio.static.primitive import i16

from protocol import legacy
from protocol._cache import typed_cache
from protocol.apis import SUPPORTED_VERSIONS, ApiKey, is_supported
from protocol.bounds import guarded_reader
from protocol.errors import ErrorCode, InvalidRequest, MalformedFrame, UnsupportedApi
from protocol.headers import RequestHeader, parse_request_header, peek_request_prefix, skip_header_tags
from protocol.tolerant import read_entity_tolerant

__all__ = [
    "HEARTBEAT_V4_FRAME",
    "Request",
    "RequestHeader",
    "api_versions_error_frame",
    "decode_body",
    "decode_request",
    "decode_response_frame",
    "encode_body",
    "encode_response",
    "heartbeat_response_frame",
    "request_body_reader",
    "request_class",
    "response_class",
]

# What a kio reader can raise on bad input besides DecodeError: invalid enum values and UTF-8 are ValueErrors,
# out-of-range integers OverflowError. KeyError is handled separately (unknown tag -> tolerant path).
_DECODE_ERRORS = (DecodeError, ValueError, TypeError, OverflowError, IndexError)

_SIZE_AND_CORRELATION = struct.Struct(">ii")


class Request(NamedTuple):  # a tuple: built for every request, and cheaper than a frozen dataclass
    header: RequestHeader
    body: Any  # the kio request dataclass instance


@typed_cache
def request_class(api_key: int, api_version: int) -> type[Any]:
    """kio's request dataclass for that api/version. Raises ``ValueError`` if kio does not know it."""
    old = legacy.REQUEST_CLASSES.get((api_key, api_version))  # a version kio has no schema for (protocol.legacy)
    if old is not None:
        return old
    try:
        cls: type[Any] = load_request_schema(api_key, api_version)
    except KioIndexError as e:
        raise ValueError(f"no request schema for api key {api_key} version {api_version}") from e
    return cls


@typed_cache
def response_class(api_key: int, api_version: int) -> type[Any]:
    """kio's response dataclass for that api/version. Raises ``ValueError`` if kio does not know it."""
    old = legacy.RESPONSE_CLASSES.get((api_key, api_version))  # a version kio has no schema for (protocol.legacy)
    if old is not None:
        return old
    try:
        cls: type[Any] = load_response_schema(api_key, api_version)
    except KioIndexError as e:
        raise ValueError(f"no response schema for api key {api_key} version {api_version}") from e
    return cls


@typed_cache
def _reader(cls: type[Any]) -> Callable[[bytes, int], tuple[Any, int]]:
    if cls in legacy.CLASSES:  # protocol.legacy's hand-written, bounds-checked reader
        return functools.partial(legacy.decode, cls)
    return entity_reader(cls)  # type: ignore[no-any-return]


@typed_cache
def _writer(cls: type[Any]) -> Callable[[io.BytesIO, Any], None]:
    return entity_writer(cls)  # type: ignore[no-any-return]


# (api_key, api_version) -> (request class, native reader, flexible); filled on first use of each version.
_decoders: dict[tuple[int, int], tuple[type[Any], Callable[[bytes, int], tuple[Any, int]], bool]] = {}


def _decoder(api_key: int, api_version: int) -> tuple[type[Any], Callable[[bytes, int], tuple[Any, int]], bool]:
    entry = _decoders.get((api_key, api_version))
    if entry is None:
        cls = request_class(api_key, api_version)
        entry = (cls, _guarded_reader(cls), bool(cls.__flexible__))
        _decoders[(api_key, api_version)] = entry
    return entry


def request_body_reader(api_key: int, api_version: int) -> tuple[Callable[[bytes, int], tuple[Any, int]], bool] | None:
    """The body reader ``decode_request`` uses for a served api/version (``reader(buf, offset) -> (body, end)``) and
    whether its header is flexible (v2, a tag section after the client id); None for a version we do not serve.
    For a server reading a request in place, out of the bytes it received: it checks the header itself, and the
    reader raises on a body ``decode_request`` would not accept."""
    if not is_supported(api_key, api_version):
        return None
    _, reader, flexible = _decoder(api_key, api_version)
    return reader, flexible


@typed_cache
def _guarded_reader(cls: type[Any]) -> Callable[[bytes, int], tuple[Any, int]]:
    """kio's native reader of ``cls``, behind ``protocol.bounds``' length check when the schema has an array (the
    native reader pre-allocates a declared array count: an unchecked one can abort the process)."""
    return guarded_reader(cls, _reader(cls))


def decode_body(cls: type[Any], data: bytes | bytearray | memoryview, offset: int = 0) -> Any:
    """Read one kio entity of ``cls`` at ``offset``, skipping unknown tagged fields.

    Raises kio's ``DecodeError`` (or ``ValueError`` etc., see ``_DECODE_ERRORS``) on malformed input.
    """
    if type(data) is not bytes:
        data = bytes(data)
    try:
        value, _ = _guarded_reader(cls)(data, offset)
    except KeyError:
        # kio's native reader met a tagged field it does not know; Kafka says skip it.
        value, _ = read_entity_tolerant(cls, data, offset)
    return value


def decode_request(frame: bytes | bytearray | memoryview) -> Request:
    """Decode one frame payload (size prefix already removed) into header and kio body."""
    data = frame if frame.__class__ is bytes else bytes(frame)
    # The usual request: an api/version served and seen before (only those are in ``_decoders``). Its header is read
    # once, as v1; a flexible version's v2 tag section follows it. Anything else takes the checked path below.
    try:
        header, offset = parse_request_header(data, False)
    except MalformedFrame:
        pass  # reported by the checked path, with the unsupported api/version first
    else:
        entry = _decoders.get((header.api_key, header.api_version))
        if entry is not None:
            return _request_body(entry, header, data, skip_header_tags(data, offset, header) if entry[2] else offset)
    api_key, api_version, correlation_id = peek_request_prefix(data)
    if not is_supported(api_key, api_version):
        raise _unsupported(data, api_key, api_version, correlation_id)
    entry = _decoder(api_key, api_version)
    header, offset = parse_request_header(data, entry[2])
    return _request_body(entry, header, data, offset)


def _request_body(
    entry: tuple[type[Any], Callable[[bytes, int], tuple[Any, int]], bool],
    header: RequestHeader,
    data: bytes,
    offset: int,
) -> Request:
    cls, reader, _ = entry
    try:
        try:
            body, _ = reader(data, offset)
        except KeyError:
            body, _ = read_entity_tolerant(cls, data, offset)
    except MalformedFrame as e:  # from protocol.bounds, which knows no header
        raise type(e)(
            f"malformed {cls.__name__} v{header.api_version} body: {e}",
            header.correlation_id,
            header.api_key,
            header.api_version,
        ) from None
    except UnexpectedNull as e:  # kio's own string/bytes readers, for schemas the guard does not walk
        raise InvalidRequest(
            f"malformed {cls.__name__} v{header.api_version} body: {e}",
            header.correlation_id,
            header.api_key,
            header.api_version,
        ) from e
    except (*_DECODE_ERRORS, KeyError) as e:
        raise MalformedFrame(
            f"malformed {cls.__name__} v{header.api_version} body: {type(e).__name__}: {e}",
            header.correlation_id,
            header.api_key,
            header.api_version,
        ) from e
    return Request(header, body)


def _unsupported(data: bytes, api_key: int, api_version: int, correlation_id: int) -> UnsupportedApi:
    """The exception for an unserved api/version, with client id and body when kio can still decode them."""
    try:
        cls = request_class(api_key, api_version)
    except ValueError:
        return UnsupportedApi(api_key, api_version, correlation_id)
    try:
        header, offset = parse_request_header(data, bool(cls.__flexible__))
    except MalformedFrame:
        return UnsupportedApi(api_key, api_version, correlation_id)
    try:
        body = decode_body(cls, data, offset)
    except (*_DECODE_ERRORS, KeyError, MalformedFrame):
        body = None
    return UnsupportedApi(api_key, api_version, correlation_id, header.client_id, body)


def encode_body(body: Any) -> bytes:
    """kio's encoding of one entity, without any header."""
    out = io.BytesIO()
    _writer(type(body))(out, body)
    return out.getvalue()


def encode_response(header: RequestHeader, body: Any) -> bytes:
    """The full response frame (size prefix, response header, body) answering the request with ``header``."""
    cls = type(body)
    if cls.__api_key__ != header.api_key:
        raise ValueError(f"{cls.__name__} does not answer api key {header.api_key}")
    if header.api_key == ApiKey.API_VERSIONS:
        # Always response header v0, so a client can read it before knowing our versions. The body version may
        # differ from the request's (the v0-format UNSUPPORTED_VERSION answer).
        flexible_header = False
    else:
        if cls.__version__ != header.api_version:
            raise ValueError(f"{cls.__name__} is v{cls.__version__}, the request was v{header.api_version}")
        fast = _FAST_ENCODERS.get(cls)
        if fast is not None:
            return fast(header.correlation_id, body)
        flexible_header = bool(cls.__flexible__)
    return _encode_with_kio(header.correlation_id, flexible_header, body)


def decode_response_frame(api_key: int, api_version: int, frame: bytes) -> tuple[int, Any]:
    """(correlation id, kio response body) of a whole response frame (size prefix included): the inverse of
    ``encode_response``, for tests and tools that read what the server wrote."""
    size, correlation_id = _SIZE_AND_CORRELATION.unpack_from(frame, 0)
    if size != len(frame) - 4:
        raise MalformedFrame(f"frame size {size} but {len(frame) - 4} bytes follow")
    cls = response_class(api_key, api_version)
    offset = 8
    if cls.__flexible__ and api_key != ApiKey.API_VERSIONS:
        offset += 1  # response header v1: an empty tag buffer (we never write header tags)
    return correlation_id, decode_body(cls, frame, offset)


def _encode_with_kio(correlation_id: int, flexible_header: bool, body: Any) -> bytes:
    out = io.BytesIO()
    out.write(b"\x00\x00\x00\x00\x00\x00\x00\x00\x00" if flexible_header else b"\x00\x00\x00\x00\x00\x00\x00\x00")
    _writer(type(body))(out, body)
    size = out.tell() - 4
    buf = out.getbuffer()
    _SIZE_AND_CORRELATION.pack_into(buf, 0, size, correlation_id)
    del buf
    return out.getvalue()


# --- hand-encoded fixed-shape responses on the hot path (byte-identical to kio's, see tests/protocol) -------------

_HEARTBEAT_V0 = struct.Struct(">iih")  # size, correlation id | error
_HEARTBEAT_V1_3 = struct.Struct(">iiih")  # size, correlation id | throttle, error
_HEARTBEAT_V4 = struct.Struct(">iibihb")  # size, correlation id, header tags | throttle, error, tags
# The v4 answer's layout, for a server packing it inline: (12, correlation id, 0, 0, error, 0).
HEARTBEAT_V4_FRAME = _HEARTBEAT_V4


def _throttle_ms(value: timedelta) -> int:
    return round(value.total_seconds() * 1000) if value else 0  # kio's write_timedelta_i32; 0 is the usual case


def _heartbeat_v0(correlation_id: int, body: Any) -> bytes:
    return _HEARTBEAT_V0.pack(6, correlation_id, body.error_code.value)


def _heartbeat_v1_3(correlation_id: int, body: Any) -> bytes:
    return _HEARTBEAT_V1_3.pack(10, correlation_id, _throttle_ms(body.throttle_time), body.error_code.value)


def _heartbeat_v4(correlation_id: int, body: Any) -> bytes:
    return _HEARTBEAT_V4.pack(12, correlation_id, 0, _throttle_ms(body.throttle_time), body.error_code.value, 0)


def heartbeat_response_frame(api_version: int, correlation_id: int, error: int) -> bytes:
    """The whole Heartbeat response frame for ``error`` (an ``ErrorCode``, an int) with no throttling, without a kio
    body (the server's hot path); byte-identical to ``encode_response`` of the kio response (tests/protocol). The
    error is packed as the int it is: ``ErrorCode.value`` goes through the enum's descriptor (~1 us)."""
    if api_version >= 4:
        return _HEARTBEAT_V4.pack(12, correlation_id, 0, 0, error, 0)
    if api_version >= 1:
        return _HEARTBEAT_V1_3.pack(10, correlation_id, 0, error)
    return _HEARTBEAT_V0.pack(6, correlation_id, error)


_FAST_ENCODERS: dict[type[Any], Callable[[int, Any], bytes]] = {
    response_class(ApiKey.HEARTBEAT, 0): _heartbeat_v0,
    response_class(ApiKey.HEARTBEAT, 1): _heartbeat_v1_3,
    response_class(ApiKey.HEARTBEAT, 2): _heartbeat_v1_3,
    response_class(ApiKey.HEARTBEAT, 3): _heartbeat_v1_3,
    response_class(ApiKey.HEARTBEAT, 4): _heartbeat_v4,
    **legacy.RESPONSE_ENCODERS,  # the old versions kio has no schema for
}


_SUPPORTED_V0 = tuple(
    ApiVersionV0(api_key=i16(int(k)), min_version=i16(lo), max_version=i16(hi))
    for k, (lo, hi) in sorted(SUPPORTED_VERSIONS.items())
)


def api_versions_error_frame(correlation_id: int) -> bytes:
    """The answer to an ApiVersions request of a version we do not serve: a v0-format body with error 35
    (UNSUPPORTED_VERSION) and our supported key list, behind response header v0. Clients retry with a version
    from that list (Kafka's ``ApiVersionsRequest.getErrorResponse`` behaviour)."""
    body = ApiVersionsResponseV0(error_code=ErrorCode.unsupported_version, api_keys=_SUPPORTED_V0)
    return encode_response(RequestHeader(ApiKey.API_VERSIONS, 0, correlation_id, None), body)
