"""The 31-byte ListGroups frame and its siblings against the real daemon process: for every served api/version with
an array, every array (top level and nested) declared with 0x7fffffff / 0xffffffff / huge-varint elements, and null
where the schema forbids it. Before ``protocol.bounds`` the first such frame aborted the process (SIGABRT in kio's
native reader, no log line). After each frame the daemon must be alive and answer ApiVersions on a fresh connection.
"""

from __future__ import annotations

import dataclasses
import socket
import struct
from collections.abc import Iterator
from pathlib import Path

import pytest

from protocol.codec import decode_response_frame, request_class, response_class
from protocol.tolerant import field_shape
from tests.e2e.daemon import Daemon
from tests.fuzz import frames as F

pytestmark = pytest.mark.e2e

INVALID_REQUEST = 42
_API_VERSIONS_V0 = F.frame(18, 0, b"", correlation_id=1)


@pytest.fixture(scope="module")
def daemon(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Daemon]:
    d = Daemon(Path(tmp_path_factory.mktemp("lengths")), topics=("lengths:2",)).start()
    try:
        yield d
    finally:
        d.stop()


def _read_frame(sock: socket.socket) -> bytes | None:
    """One whole response frame, or None on EOF."""
    buf = b""
    while len(buf) < 4 or len(buf) < 4 + struct.unpack(">i", buf[:4])[0]:
        chunk = sock.recv(65536)
        if not chunk:
            return None
        buf += chunk
    return buf[: 4 + struct.unpack(">i", buf[:4])[0]]


def _send(daemon: Daemon, frame: bytes) -> bytes | None:
    """Send one frame on a fresh connection; the answer, or None when the daemon closed the connection instead."""
    with socket.create_connection(("127.0.0.1", daemon.port), timeout=10) as sock:
        sock.sendall(frame)
        try:
            return _read_frame(sock)
        except ConnectionResetError:
            return None


def _assert_alive(daemon: Daemon, what: str) -> None:
    assert daemon.process is not None
    assert daemon.process.poll() is None, f"daemon died after {what} (exit {daemon.process.returncode})"
    answer = _send(daemon, _API_VERSIONS_V0)
    assert answer is not None, f"no ApiVersions answer after {what}"
    _, body = decode_response_frame(18, 0, answer)
    assert body.error_code == 0


WITH_ARRAYS = [(k, v) for k, v in F.SERVED if list(F.array_paths(request_class(k, v)))]


def test_the_31_byte_list_groups_frame(daemon: Daemon) -> None:
    frame = F.frame(16, 4, F.uvarint(0xFFFFFFFF + 1) + b"\x00")
    assert len(frame) <= 31
    assert _send(daemon, frame) is None  # closed: there is no answer to a frame that cannot be read
    _assert_alive(daemon, "the 31-byte ListGroups v4 frame")


@pytest.mark.parametrize(("key", "version"), WITH_ARRAYS)
def test_huge_and_null_array_counts(daemon: Daemon, key: int, version: int) -> None:
    cls = request_class(key, version)
    for path, what, body, is_null in F.bad_count_bodies(cls):
        label = f"{key} v{version} {'.'.join(path)} count {what}"
        answer = _send(daemon, F.frame(key, version, body, correlation_id=9))
        _assert_alive(daemon, label)
        if not is_null:
            assert answer is None, f"{label}: answered a frame with an impossible count"
            continue
        if field_shape(F.path_field(cls, path))[2]:
            assert answer is not None, f"{label}: a null the schema allows must be answered"
            continue
        if not _has_top_level_error(key, version):
            assert answer is None, f"{label}: no top-level error code to answer with, the connection must close"
            continue
        assert answer is not None, f"{label}: must be answered INVALID_REQUEST"
        correlation_id, response = decode_response_frame(key, version, answer)
        assert correlation_id == 9
        assert response.error_code == INVALID_REQUEST, label


def _has_top_level_error(key: int, version: int) -> bool:
    return any(f.name == "error_code" for f in dataclasses.fields(response_class(key, version)))


def test_no_error_lines(daemon: Daemon) -> None:
    _assert_alive(daemon, "everything")
    log = daemon.log_text()
    assert "Traceback" not in log
    assert not [line for line in log.splitlines() if "level=error" in line or "level=critical" in line]
