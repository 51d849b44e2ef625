"""The length guard (``protocol.bounds``) on bytes, for every served api/version: valid bodies decode exactly as kio's
native reader decodes them, and truncated bodies or declared lengths past the end raise ``MalformedFrame``s before
the native reader could allocate for them. Null arrays and strings the schema forbids raise ``InvalidRequest``."""

from __future__ import annotations

import contextlib
import random
import struct
import subprocess
import sys
import textwrap
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from kio.serial import entity_reader

from protocol import bounds
from protocol.codec import decode_request, encode_body, request_class
from protocol.errors import ErrorCode, InvalidRequest, LengthOutOfBounds, MalformedFrame
from protocol.responses import invalid_request_frame
from protocol.tolerant import field_shape
from tests.fuzz import frames as F

SERVED = F.SERVED
WITH_ARRAYS = [(k, v) for k, v in SERVED if list(F.array_paths(request_class(k, v)))]
WITHOUT_ARRAYS = [(k, v) for k, v in SERVED if (k, v) not in WITH_ARRAYS]


def _is_kio(cls: type[Any]) -> bool:
    return cls.__module__.startswith("kio.")


def _native(cls: type[Any], data: bytes, offset: int) -> tuple[Any, int]:
    """The reader ``decode_request`` used before the guard: kio's native one, or ``protocol.legacy``'s for the old
    versions kio has no schema for (bounds-checked on its own)."""
    if _is_kio(cls):
        value, size = entity_reader(cls)(data, offset)
        return value, offset + size
    from protocol import legacy

    result: tuple[Any, int] = legacy.decode(cls, data, offset)
    return result


def test_the_guard_runs_exactly_where_the_schema_has_an_array() -> None:
    for key, version in SERVED:
        cls = request_class(key, version)
        assert (bounds.checker(cls) is not None) == ((key, version) in WITH_ARRAYS), (key, version)
    assert len(WITH_ARRAYS) >= 80  # the 28 flexible versions with arrays that aborted, and the legacy ones


# --- valid bodies: unchanged ---------------------------------------------------------------------------------------


@pytest.mark.parametrize(("key", "version"), SERVED)
@settings(
    max_examples=15,
    derandomize=True,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
@given(data=st.data())
def test_valid_bodies_decode_as_the_native_reader_does(key: int, version: int, data: st.DataObject) -> None:
    cls = request_class(key, version)
    body = data.draw(st.from_type(cls)) if _is_kio(cls) else F.random_body(cls, random.Random(data.draw(st.integers())))
    raw = encode_body(body)
    tail = data.draw(st.sampled_from([b"", b"\x00", b"junk"]))  # trailing bytes are ignored, as Kafka does
    frame = F.payload(key, version, raw + tail)
    offset = len(frame) - len(raw) - len(tail)
    try:
        expected, end = _native(cls, frame, offset)
    except ValueError:  # e.g. a timedelta_i64 beyond Python's timedelta: kio cannot read it either way
        with pytest.raises(MalformedFrame):
            decode_request(frame)
        return
    assert end == offset + len(raw)
    assert decode_request(frame).body == expected
    assert bounds.check_body(cls, frame, offset) == end  # the walk follows the same bytes as the reader


@pytest.mark.parametrize(("key", "version"), SERVED)
def test_every_truncation_raises_malformed_frame(key: int, version: int) -> None:
    cls = request_class(key, version)
    rng = random.Random(version * 100 + key)
    for _ in range(5):
        raw = encode_body(F.random_body(cls, rng))
        head = F.header_bytes(key, version)
        for cut in range(len(raw)):
            with pytest.raises(MalformedFrame):
                decode_request(head + raw[:cut])


# --- declared lengths past the end ---------------------------------------------------------------------------------


@pytest.mark.parametrize(("key", "version"), WITH_ARRAYS)
def test_huge_declared_array_counts_raise_before_the_native_reader(key: int, version: int) -> None:
    """0x7fffffff / 0xffffffff / huge varints as the count of every array, top level and nested: the 31-byte
    ListGroups v4 frame that aborted the process, and its siblings."""
    cls = request_class(key, version)
    checked = 0
    for path, what, body, is_null in F.bad_count_bodies(cls):
        frame = F.payload(key, version, body)
        nullable = field_shape(F.path_field(cls, path))[2]
        if is_null and nullable:
            decode_request(frame)  # a null the schema allows decodes (Metadata topics, OffsetFetch topics)
            continue
        with pytest.raises(InvalidRequest if is_null else LengthOutOfBounds) as e:
            decode_request(frame)
        assert e.value.correlation_id == 77 and (e.value.api_key, e.value.api_version) == (key, version), what
        checked += 1
    assert checked


def test_the_31_byte_list_groups_frame() -> None:
    frame = F.frame(16, 4, F.uvarint(0xFFFFFFFF + 1) + b"\x00")
    assert len(frame) <= 31
    with pytest.raises(LengthOutOfBounds):
        decode_request(frame[4:])


@pytest.mark.parametrize(("key", "version"), WITH_ARRAYS)
def test_huge_declared_string_lengths_in_array_schemas_are_refused(key: int, version: int) -> None:
    cls = request_class(key, version)
    body = encode_body(F.neutral(cls))
    flexible = bool(cls.__flexible__)
    # a huge length written at every position: the frame is refused as malformed or decodes; nothing else happens
    for pos in range(len(body)):
        for raw in (F.uvarint(0xFFFFFFFF),) if flexible else (struct.pack(">h", 0x7FFF), struct.pack(">i", 0x7FFFFFFF)):
            mutated = body[:pos] + raw + body[pos + len(raw) :]
            with contextlib.suppress(MalformedFrame):
                decode_request(F.payload(key, version, mutated))


def _string_prefix_offset(cls: type[Any]) -> tuple[int, bool] | None:
    """Offset of the first top-level string's length prefix in ``encode_body(neutral(cls))``, and its nullability."""
    import dataclasses

    for f in dataclasses.fields(cls):
        if f.metadata.get("tag") is None and f.metadata.get("kafka_type") == "string" and not field_shape(f)[1]:
            empty = encode_body(F.neutral(cls))
            one = encode_body(cls(**{**vars_of(F.neutral(cls)), f.name: "x"}))
            pos = next(i for i, (a, b) in enumerate(zip(empty, one, strict=False)) if a != b)
            return (pos if cls.__flexible__ else pos - 1), field_shape(f)[2]
    return None


def vars_of(entity: Any) -> dict[str, Any]:
    import dataclasses

    return {f.name: getattr(entity, f.name) for f in dataclasses.fields(entity)}


def test_native_string_readers_check_lengths_before_allocating() -> None:
    """Why schemas without arrays skip the guard, and the guard stops after the last array: kio's native string/bytes
    readers refuse a length past the buffer before allocating, and so does its tagged-field reader. Run in a child
    limited to 512 MB of address space: an allocation of the declared size would fail there (and abort the child)."""
    script = textwrap.dedent(
        """
        import resource, struct
        resource.setrlimit(resource.RLIMIT_AS, (512 << 20, 512 << 20))
        from kio.serial import readers as r
        from kio.serial.errors import DecodeError
        from protocol.codec import decode_request
        from protocol.errors import MalformedFrame
        from tests.fuzz import frames as F
        from tests.protocol.test_bounds import WITHOUT_ARRAYS, _string_prefix_offset
        from protocol.codec import request_class, encode_body
        cases = [
            (r.read_compact_string, F.uvarint(0xFFFFFFFF) + b"ab"),
            (r.read_compact_string_nullable, F.uvarint(0xFFFFFFFF) + b"ab"),
            (r.read_compact_string_as_bytes, F.uvarint(0xFFFFFFFF) + b"ab"),
            (r.read_legacy_bytes, struct.pack(">i", 0x7FFFFFFF) + b"ab"),
            (r.read_nullable_legacy_bytes, struct.pack(">i", 0x7FFFFFFF) + b"ab"),
            (r.read_legacy_string, struct.pack(">h", 0x7FFF) + b"ab"),
        ]
        for reader, data in cases:
            try:
                reader(data, 0)
            except DecodeError:
                pass
            else:
                raise SystemExit(f"{reader.__name__} accepted {data!r}")
        from kio.serial import entity_reader
        hb = request_class(12, 4)
        hb_body = encode_body(F.neutral(hb))[:-1]  # without its empty tag section
        fetch = request_class(1, 12)
        fetch_body = encode_body(F.neutral(fetch))[:-1]
        for cls, data in (
            (hb, hb_body + F.uvarint(0xFFFFFFFF)),  # a tag count: not pre-allocated
            (fetch, fetch_body + b"\\x01\\x00" + F.uvarint(0xFFFFFFFF) + b"\\x05ab"),  # known tag 0, huge size
        ):
            try:
                entity_reader(cls)(data, 0)
            except DecodeError:
                pass
            else:
                raise SystemExit(f"{cls.__name__} accepted {data!r}")
        n = 0
        for key, version in WITHOUT_ARRAYS:
            cls = request_class(key, version)
            found = _string_prefix_offset(cls)
            if found is None:
                continue
            pos, _ = found
            body = encode_body(F.neutral(cls))
            raw = F.uvarint(0xFFFFFFFF) if cls.__flexible__ else struct.pack(">h", 0x7FFF)
            width = 1 if cls.__flexible__ else 2
            try:
                decode_request(F.payload(key, version, body[:pos] + raw + body[pos + width:]))
            except MalformedFrame:
                n += 1
            else:
                raise SystemExit(f"{key} v{version} accepted a huge string")
        print("ok", n)
        """
    )
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120, check=False)
    assert done.returncode == 0, done.stderr[-2000:] + done.stdout
    assert done.stdout.startswith("ok ") and int(done.stdout.split()[1]) >= 10


# --- nulls ----------------------------------------------------------------------------------------------------------


# The versions without arrays whose body has a top-level string (ApiVersions v0-2, for one, has no field at all).
WITH_TOP_LEVEL_STRING = [(k, v) for k, v in WITHOUT_ARRAYS if _string_prefix_offset(request_class(k, v)) is not None]


@pytest.mark.parametrize(("key", "version"), WITH_TOP_LEVEL_STRING)
def test_a_null_non_nullable_string_is_an_invalid_request(key: int, version: int) -> None:
    cls = request_class(key, version)
    found = _string_prefix_offset(cls)
    assert found is not None
    pos, nullable = found
    body = encode_body(F.neutral(cls))
    raw, width = (b"\x00", 1) if cls.__flexible__ else (struct.pack(">h", -1), 2)
    frame = F.payload(key, version, body[:pos] + raw + body[pos + width :])
    if nullable:
        decode_request(frame)
        return
    with pytest.raises(InvalidRequest) as e:
        decode_request(frame)
    assert (e.value.api_key, e.value.api_version, e.value.correlation_id) == (key, version, 77)


def test_only_these_array_families_are_nullable() -> None:
    nullable = set()
    for key, version in WITH_ARRAYS:
        cls = request_class(key, version)
        for path in F.array_paths(cls):
            if field_shape(F.path_field(cls, path))[2]:
                nullable.add((key, path))
    assert nullable == {
        (3, ("topics",)),
        (9, ("topics",)),
        (9, ("groups", "topics")),
        (32, ("resources", "configuration_keys")),  # DescribeConfigs: null = every config
        (37, ("topics", "assignments")),  # CreatePartitions: null = placed by the broker
        (50, ("users",)),  # DescribeUserScramCredentials: null = every user
    }


def test_invalid_request_answer_only_where_the_response_has_a_top_level_error() -> None:
    from protocol.codec import decode_response_frame

    join = InvalidRequest("null", 5, 11, 5)
    frame = invalid_request_frame(join)
    assert frame is not None
    correlation_id, body = decode_response_frame(11, 5, frame)
    assert correlation_id == 5 and body.error_code == ErrorCode.invalid_request
    assert invalid_request_frame(InvalidRequest("null", 5, 8, 8)) is None  # OffsetCommit: no top-level error
    assert invalid_request_frame(InvalidRequest("null", 5, 3, 12)) is None  # Metadata: none either
    assert invalid_request_frame(InvalidRequest("null")) is None


def test_tagged_field_sizes_are_checked() -> None:
    cls = request_class(1, 12)  # Fetch v12: one known tagged field (cluster_id) and room for unknown ones
    body = encode_body(F.neutral(cls))
    assert body[-1] == 0  # the empty tagged-field section
    ok = body[:-1] + b"\x01" + F.uvarint(99) + F.uvarint(2) + b"ab"  # an unknown tag, skipped
    decode_request(F.payload(1, 12, ok))
    for bad in (
        body[:-1] + b"\x01" + F.uvarint(99) + F.uvarint(0xFFFFFFFF) + b"ab",  # size past the end
        body[:-1] + F.uvarint(0xFFFFFFF),  # a tag count past the end
        body[:-1] + b"\x01" + F.uvarint(0) + F.uvarint(2) + F.uvarint(0xFFFF) + b"a",  # cluster_id overruns its tag
    ):
        with pytest.raises(LengthOutOfBounds):  # the full walk checks them
            bounds.check_body(cls, bad, 0)
        with pytest.raises(MalformedFrame):  # the codec's walk stops after the last array; kio refuses them
            decode_request(F.payload(1, 12, bad))


def test_an_overlong_varint_in_the_header_tags_is_malformed() -> None:
    """Found by the fuzzer: kio's varint reader raised ValueError out of ``decode_request`` (logged as a codec bug
    at ERROR with a traceback) for a flexible request header whose tag count is a varint over 5 bytes."""
    head = F.header_bytes(12, 4)
    assert head[-1] == 0  # the empty header tag section
    with pytest.raises(MalformedFrame):
        decode_request(head[:-1] + b"\xff" * 6 + b"\x01")


@pytest.mark.parametrize(("key", "version"), [(11, 0), (11, 9), (8, 2), (8, 8), (14, 5), (13, 3)])
def test_a_null_non_nullable_string_in_an_array_schema_is_an_invalid_request(key: int, version: int) -> None:
    """The guard skips a null string; kio's own reader refuses it (UnexpectedNull), which the codec reports as
    ``InvalidRequest``, like a null array."""
    cls = request_class(key, version)
    found = _string_prefix_offset(cls)
    assert found is not None and not found[1]
    pos, _ = found
    body = encode_body(F.neutral(cls))
    raw, width = (b"\x00", 1) if cls.__flexible__ else (struct.pack(">h", -1), 2)
    with pytest.raises(InvalidRequest):
        decode_request(F.payload(key, version, body[:pos] + raw + body[pos + width :]))
