"""A minimal Kafka wire client for tests: kio request in, kio response out, over a plain socket.

It speaks only through ``protocol`` (headers, framing, kio classes), so raw-socket tests can also send garbage,
pipeline requests without reading, and read responses in the order they come.
"""

from __future__ import annotations

import socket
import struct
from typing import Any

from kio.index import load_request_schema, load_response_schema

from protocol.codec import decode_body, encode_body
from protocol.framing import encode_frame
from protocol.headers import RequestHeader, encode_request_header

_I32 = struct.Struct(">i")


def request_frame(body: Any, correlation_id: int, client_id: str = "wire-test") -> bytes:
    cls = type(body)
    header = RequestHeader(int(cls.__api_key__), int(cls.__version__), correlation_id, client_id)
    return encode_frame(encode_request_header(header, bool(cls.__flexible__)) + encode_body(body))


def build_request(api_key: int, version: int, **fields: Any) -> Any:
    from servers.kafka.build import build

    return build(load_request_schema(api_key, version), fields)


class WireClient:
    def __init__(self, host: str, port: int, timeout: float = 10.0, rcvbuf: int | None = None) -> None:
        if rcvbuf is None:
            self.sock = socket.create_connection((host, port), timeout=timeout)
        else:  # a small receive buffer, set before connecting so the kernel cannot grow it: a client that reads slowly
            self.sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
            self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, rcvbuf)
            self.sock.settimeout(timeout)
            self.sock.connect((host, port))
        self._buf = b""
        self._next_id = 1
        self._sent: dict[int, tuple[int, int]] = {}  # correlation id -> (api key, version)

    def close(self) -> None:
        self.sock.close()

    def send(self, body: Any, correlation_id: int | None = None) -> int:
        cid = self._next_id if correlation_id is None else correlation_id
        self._next_id = max(self._next_id, cid) + 1
        self._sent[cid] = (int(type(body).__api_key__), int(type(body).__version__))
        self.sock.sendall(request_frame(body, cid))
        return cid

    def send_raw(self, data: bytes) -> None:
        self.sock.sendall(data)

    def _read_exact(self, n: int) -> bytes:
        while len(self._buf) < n:
            chunk = self.sock.recv(65536)
            if not chunk:
                raise ConnectionError("connection closed by the server")
            self._buf += chunk
        out, self._buf = self._buf[:n], self._buf[n:]
        return out

    def read_frame(self) -> bytes:
        (size,) = _I32.unpack(self._read_exact(4))
        return self._read_exact(size)

    def receive(self, response_version: int | None = None) -> tuple[int, Any]:
        """The next response: (correlation id, decoded kio body)."""
        frame = self.read_frame()
        (cid,) = _I32.unpack(frame[:4])
        api_key, version = self._sent.pop(cid)
        if response_version is not None:
            version = response_version
        cls = load_response_schema(api_key, version)
        flexible_header = bool(cls.__flexible__) and api_key != 18
        offset = 4
        if flexible_header:
            offset += 1  # empty tagged-field section (our server never sends response header tags)
        return cid, decode_body(cls, frame, offset)

    def call(self, body: Any) -> Any:
        cid = self.send(body)
        got, response = self.receive()
        assert got == cid
        return response

    def is_closed_by_peer(self, timeout: float = 5.0) -> bool:
        """True once the server closed the connection (EOF), False if it is still open after ``timeout``."""
        self.sock.settimeout(timeout)
        try:
            return self.sock.recv(1) == b""
        except TimeoutError:
            return False
        except ConnectionError:
            return True
