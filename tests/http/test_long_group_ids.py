"""Group ids as long as Kafka allows (32,767 bytes) over the operator HTTP API, on the real daemon (in-process, real
sockets): a group created over the Kafka protocol can be read and deleted; a request line beyond the bound gets a
400 with a message, logged as one warning (not an ERROR with a traceback), and the API keeps serving."""

from __future__ import annotations

import json
import logging
import socket
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Iterator
from datetime import timedelta
from typing import Any

import pytest

from tests.server.conftest import RunningApp
from tests.server.wire import WireClient, build_request


@pytest.fixture
def running() -> Iterator[RunningApp]:
    app = RunningApp(http={"listen": "127.0.0.1:0"}).start()
    try:
        yield app
    finally:
        app.stop()


def http(app: RunningApp, method: str, path: str) -> tuple[int, Any]:
    url = f"http://127.0.0.1:{app.app.http_port}{path}"
    try:
        with urllib.request.urlopen(urllib.request.Request(url, method=method), timeout=10) as resp:
            return resp.status, json.load(resp)
    except urllib.error.HTTPError as e:
        body = e.read()
        try:
            return e.code, json.loads(body)
        except ValueError:
            return e.code, body.decode(errors="replace")


def commit_over_kafka(app: RunningApp, group: str, offset: int) -> int:
    partition = {"partition_index": 0, "committed_offset": offset, "committed_metadata": ""}
    request = build_request(
        8, 2, group_id=group, generation_id_or_member_epoch=-1, member_id="", retention_time=timedelta(0),
        topics=[{"name": "t", "partitions": [partition]}],
    )  # fmt: skip
    client = WireClient("127.0.0.1", app.port)
    try:
        response = client.call(request)
    finally:
        client.close()
    return int(response.topics[0].partitions[0].error_code)


@pytest.mark.parametrize(
    "group",
    [
        pytest.param("g" * 20_000, id="20000-ascii"),
        pytest.param("é" * 16_383 + "x", id="32767-bytes-utf8"),  # Kafka's maximum; 98,299 characters encoded
    ],
)
def test_long_group_id_is_read_and_deleted(running: RunningApp, group: str) -> None:
    assert commit_over_kafka(running, group, 5) == 0
    path = "/v1/groups/" + urllib.parse.quote(group, safe="")
    status, body = http(running, "GET", path)
    assert status == 200 and body["group_id"] == group, (status, str(body)[:300])
    status, body = http(running, "GET", path + "/offsets")
    assert status == 200 and [(o["topic"], o["partition"], o["offset"]) for o in body["offsets"]] == [("t", 0, 5)]
    status, body = http(running, "DELETE", path)
    assert status == 200 and body["group_id"] == group, (status, str(body)[:300])
    status, _ = http(running, "GET", path)
    assert status == 404


def test_request_line_beyond_the_bound_is_refused_with_a_message(
    running: RunningApp, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO)
    too_long = "/v1/groups/" + "g" * 300_000
    with socket.create_connection(("127.0.0.1", running.app.http_port), timeout=10) as s:
        s.sendall(f"GET {too_long} HTTP/1.1\r\nHost: x\r\n\r\n".encode())
        answer = b""
        while chunk := s.recv(65536):
            answer += chunk
    head, _, body = answer.partition(b"\r\n\r\n")
    assert head.split(b" ", 2)[1] == b"400", head
    assert b"Got more than 262144 bytes" in body, body[:300]
    assert http(running, "GET", "/healthz")[0] == 200
    errors = [r for r in caplog.records if r.levelno >= logging.ERROR]
    assert not errors, [r.getMessage()[:200] for r in errors]
    warned = [r for r in caplog.records if "bad HTTP request" in r.getMessage()]
    assert len(warned) == 1 and getattr(warned[0], "throttle", None) is not None
