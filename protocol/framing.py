"""Kafka's framing: every request and response is a 4-byte big-endian signed size followed by that many bytes.

``FrameDecoder`` is sans-I/O: feed it whatever the socket produced and it returns the complete frame payloads (size
prefix removed). It checks a size prefix as soon as its four bytes have arrived, before buffering the body, so an
oversized frame is refused without reading it (Kafka's ``socket.request.max.bytes`` behaviour). After it raised, the
decoder is in an undefined state: the connection must be closed.
"""

from __future__ import annotations

import struct

from protocol.errors import FrameTooLarge, MalformedFrame

__all__ = ["DEFAULT_MAX_FRAME_SIZE", "FrameDecoder", "encode_frame"]

DEFAULT_MAX_FRAME_SIZE = 104_857_600  # Kafka's socket.request.max.bytes default (100 MiB)

_SIZE = struct.Struct(">i")


class FrameDecoder:
    __slots__ = ("_buf", "_max", "_need")

    def __init__(self, max_frame_size: int = DEFAULT_MAX_FRAME_SIZE) -> None:
        if max_frame_size < 0:
            raise ValueError("max_frame_size must not be negative")
        self._max = max_frame_size
        self._buf = bytearray()
        self._need = -1  # payload size of the frame being read, -1 while its prefix is incomplete

    @property
    def max_frame_size(self) -> int:
        return self._max

    @max_frame_size.setter
    def max_frame_size(self, value: int) -> None:
        """A new limit for the frames not read yet (a SASL connection's is raised once it authenticates)."""
        if value < 0:
            raise ValueError("max_frame_size must not be negative")
        self._max = value

    @property
    def buffered(self) -> int:
        """Bytes received but not yet returned as a frame."""
        return len(self._buf)

    def feed(self, data: bytes | bytearray | memoryview) -> list[bytes]:
        """Add received bytes; return every frame payload completed by them, in order."""
        buf = self._buf
        buf += data
        frames: list[bytes] = []
        pos = 0
        end = len(buf)
        need = self._need
        while True:
            if need < 0:
                if end - pos < 4:
                    break
                need = _SIZE.unpack_from(buf, pos)[0]
                if need < 0:
                    raise MalformedFrame(f"negative frame size {need}")
                if need > self._max:
                    raise FrameTooLarge(need, self._max)
                pos += 4
            if end - pos < need:
                break
            frames.append(bytes(buf[pos : pos + need]))
            pos += need
            need = -1
        if pos:
            del buf[:pos]
        self._need = need
        return frames


def encode_frame(payload: bytes | bytearray | memoryview) -> bytes:
    """The size prefix followed by ``payload``."""
    return _SIZE.pack(len(payload)) + bytes(payload)
