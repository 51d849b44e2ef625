import itertools
import struct

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from protocol.errors import FrameTooLarge, MalformedFrame
from protocol.framing import DEFAULT_MAX_FRAME_SIZE, FrameDecoder, encode_frame


def frame(payload: bytes) -> bytes:
    return struct.pack(">i", len(payload)) + payload


def test_encode_frame_prefixes_big_endian_size() -> None:
    assert encode_frame(b"abc") == b"\x00\x00\x00\x03abc"
    assert encode_frame(b"") == b"\x00\x00\x00\x00"
    assert encode_frame(bytearray(b"\x01" * 300)) == b"\x00\x00\x01\x2c" + b"\x01" * 300


def test_default_limit_is_kafkas_socket_request_max_bytes() -> None:
    assert DEFAULT_MAX_FRAME_SIZE == 100 * 1024 * 1024


def test_several_frames_in_one_chunk_come_out_in_order() -> None:
    d = FrameDecoder()
    assert d.feed(frame(b"one") + frame(b"") + frame(b"three")) == [b"one", b"", b"three"]
    assert d.buffered == 0


def test_byte_by_byte_feeding_yields_each_frame_once_complete() -> None:
    data = frame(b"hello") + frame(b"world!")
    d = FrameDecoder()
    out: list[bytes] = []
    for i in range(len(data)):
        got = d.feed(data[i : i + 1])
        if i == 8:  # 4-byte prefix + 5 bytes: first frame complete
            assert got == [b"hello"]
        out.extend(got)
    assert out == [b"hello", b"world!"]
    assert d.buffered == 0


def test_partial_frame_is_kept_until_complete() -> None:
    d = FrameDecoder()
    data = frame(b"abcdef")
    assert d.feed(data[:6]) == []
    assert d.buffered == 2  # the prefix was consumed, two body bytes are waiting
    assert d.feed(data[6:] + frame(b"x")[:2]) == [b"abcdef"]
    assert d.feed(frame(b"x")[2:]) == [b"x"]


@pytest.mark.parametrize("kind", [bytes, bytearray, memoryview])
def test_accepts_any_bytes_like_and_returns_bytes(kind: type) -> None:
    d = FrameDecoder()
    frames = d.feed(kind(frame(b"payload")))
    assert frames == [b"payload"]
    assert type(frames[0]) is bytes


def test_feeding_does_not_alias_the_callers_buffer() -> None:
    buf = bytearray(frame(b"abc"))
    d = FrameDecoder()
    (out,) = d.feed(buf)
    buf[4:7] = b"xyz"
    assert out == b"abc"


def test_frame_at_the_limit_is_accepted() -> None:
    d = FrameDecoder(max_frame_size=10)
    assert d.feed(frame(b"0123456789")) == [b"0123456789"]


def test_oversized_frame_is_refused_as_soon_as_the_prefix_arrives() -> None:
    d = FrameDecoder(max_frame_size=10)
    with pytest.raises(FrameTooLarge) as e:
        d.feed(struct.pack(">i", 11))  # no body bytes sent yet
    assert (e.value.size, e.value.limit) == (11, 10)


def test_oversized_frame_after_a_good_one_is_refused() -> None:
    d = FrameDecoder(max_frame_size=10)
    with pytest.raises(FrameTooLarge):
        d.feed(frame(b"ok") + struct.pack(">i", 2**31 - 1))


def test_negative_size_is_malformed() -> None:
    d = FrameDecoder()
    with pytest.raises(MalformedFrame):
        d.feed(b"\xff\xff\xff\xfe")


def test_negative_limit_is_rejected() -> None:
    with pytest.raises(ValueError):
        FrameDecoder(max_frame_size=-1)


@settings(max_examples=300, deadline=None)
@given(
    payloads=st.lists(st.binary(max_size=40), max_size=12),
    cuts=st.lists(st.integers(min_value=0, max_value=600), max_size=20),
    kinds=st.lists(st.sampled_from([bytes, bytearray, memoryview]), min_size=1, max_size=5),
)
def test_any_split_of_the_stream_yields_the_same_frames(
    payloads: list[bytes], cuts: list[int], kinds: list[type]
) -> None:
    """Whatever the reads look like (whole frames, several, a frame cut anywhere, the prefix split; bytes or other
    buffers), the frames come out once each, in order, and nothing stays behind."""
    stream = b"".join(frame(p) for p in payloads)
    points = sorted({min(c, len(stream)) for c in cuts} | {0, len(stream)})
    d = FrameDecoder()
    out: list[bytes] = []
    for i, (a, b) in enumerate(itertools.pairwise(points)):
        got = d.feed(kinds[i % len(kinds)](stream[a:b]))
        assert all(type(f) is bytes for f in got)
        out.extend(got)
    assert out == payloads
    assert d.buffered == 0


def test_a_fresh_read_with_an_oversized_frame_behind_a_good_one_is_refused() -> None:
    d = FrameDecoder(max_frame_size=10)
    with pytest.raises(FrameTooLarge):
        d.feed(frame(b"ok") + struct.pack(">i", 11))


def test_a_body_awaited_after_its_prefix_is_not_read_as_a_new_frame() -> None:
    # The prefix arrives alone (and is consumed on the buffered path), then the body arrives as plain bytes.
    d = FrameDecoder()
    data = frame(b"\x00\x00\x00\x07")
    assert d.feed(bytearray(data[:4])) == []
    assert d.feed(data[4:]) == [b"\x00\x00\x00\x07"]
    assert d.buffered == 0
