"""Issue #15, point 3: 20 pipelined Metadata requests for every one of 100,000 topics (a few hundred bytes) must not
freeze the daemon: a real consumer in a group beside them keeps its session, and another connection is answered
throughout. Before the Metadata answers were cached and built in slices, each cost seconds of a blocked event loop
and all 20 were computed before anything else was read: the consumer's heartbeats sat unread and it was evicted.
Also point 4's auto-creation limits, as the daemon applies them by default.
"""

from __future__ import annotations

import json
import socket
import struct
import threading
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest

from protocol.codec import decode_response_frame
from tests.server.wire import build_request, request_frame

from .daemon import DEFAULT_ARGS, Daemon
from .helpers import KafkaPythonMember, wait_for

pytestmark = pytest.mark.e2e

TOPICS = 100_000
PARTITIONS = 6
REQUESTS = 20
GROUP = "flood-bystander"


@pytest.fixture(scope="module")
def crowded(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Daemon]:
    workdir: Path = tmp_path_factory.mktemp("crowded")
    config = workdir / "kgc.toml"
    lines = ["[topics.initial]", *(f'"flood-{i:06d}" = {PARTITIONS}' for i in range(TOPICS))]
    config.write_text("\n".join(lines) + "\n")
    d = Daemon(workdir, extra_args=(*DEFAULT_ARGS, "--config", str(config))).start(timeout=120)
    try:
        yield d
    finally:
        code = d.stop()
        assert code == 0, f"daemon exit code {code}:\n{d.log_text()[-3000:]}"


def read_exact(sock: socket.socket, n: int) -> bytes:
    buf = bytearray(n)
    view = memoryview(buf)
    got = 0
    while got < n:
        k = sock.recv_into(view[got:])
        if not k:
            raise AssertionError(f"connection closed after {got} of {n} bytes")
        got += k
    return bytes(buf)


class Prober(threading.Thread):
    """Another client: ApiVersions v0 every 20 ms on its own connection; records the slowest round trip."""

    def __init__(self, port: int) -> None:
        super().__init__(daemon=True)
        self.port = port
        self.worst = 0.0
        self.count = 0
        self.stop = threading.Event()

    def run(self) -> None:
        with socket.create_connection(("127.0.0.1", self.port), timeout=120) as sock:
            while not self.stop.is_set():
                started = time.perf_counter()
                sock.sendall(request_frame(build_request(18, 0), self.count))
                (size,) = struct.unpack(">i", read_exact(sock, 4))
                read_exact(sock, size)
                self.worst = max(self.worst, time.perf_counter() - started)
                self.count += 1
                time.sleep(0.02)


def rebalances(daemon: Daemon, group: str) -> list[dict[str, object]]:
    with urllib.request.urlopen(f"{daemon.http_url}/v1/groups/{group}/rebalances", timeout=10) as response:
        return list(json.load(response)["rebalances"])


def test_pipelined_metadata_for_every_topic_keeps_a_consumer_in_its_group(crowded: Daemon) -> None:
    member = KafkaPythonMember(crowded.bootstrap, GROUP, "e2e6")
    member.start()
    prober = Prober(crowded.port)
    try:
        wait_for(lambda: member.assignment == frozenset(range(6)), 30, "the consumer's assignment")
        generation = member.generation()
        request = build_request(3, 12, topics=None, allow_auto_topic_creation=False,
                                include_topic_authorized_operations=False)  # fmt: skip
        flood = b"".join(request_frame(request, correlation_id, "flood") for correlation_id in range(REQUESTS))
        assert len(flood) < 500  # what the attacker sends
        prober.start()
        started = time.perf_counter()
        sizes: list[int] = []
        with socket.create_connection(("127.0.0.1", crowded.port), timeout=60) as attacker:
            attacker.sendall(flood)
            first = b""
            for _ in range(REQUESTS):
                head = read_exact(attacker, 8)
                size, correlation_id = struct.unpack(">ii", head)
                assert correlation_id == len(sizes)
                body = read_exact(attacker, size - 4)
                if not first:
                    first = head + body
                sizes.append(size)
        elapsed = time.perf_counter() - started
        time.sleep(1.0)  # a few more heartbeats after the flood
        prober.stop.set()
        prober.join(10)
        print(
            f"\n{REQUESTS} Metadata answers of {sizes[0] / 1e6:.1f} MB ({TOPICS:,} topics) read in {elapsed:.2f} s; "
            f"slowest ApiVersions round trip meanwhile {prober.worst * 1000:.0f} ms over {prober.count} probes"
        )
        assert len(set(sizes)) == 1
        _, response = decode_response_frame(3, 12, first)
        assert len(response.topics) == TOPICS + 3  # and the daemon's own e2e6, e2e2 and __consumer_offsets
        assert {len(t.partitions) for t in response.topics if t.name.startswith("flood-")} == {PARTITIONS}
        assert member.generation() == generation, "the consumer rejoined: its session expired during the flood"
        causes = [r["cause"] for r in rebalances(crowded, GROUP)]
        assert "session_timeout" not in causes, causes
        assert prober.worst < 3.0  # loose: before, the other connection waited for all 20 answers (a minute)
    finally:
        prober.stop.set()
        member.close()
    assert "level=error" not in crowded.log_text()


def metadata(port: int, names: list[str]) -> dict[str, int]:
    """Topic name -> error code of a Metadata v9 request for ``names`` (auto-creation allowed)."""
    request = build_request(3, 9, topics=[{"name": n} for n in names], allow_auto_topic_creation=True,
                            include_cluster_authorized_operations=False,
                            include_topic_authorized_operations=False)  # fmt: skip
    with socket.create_connection(("127.0.0.1", port), timeout=30) as sock:
        sock.sendall(request_frame(request, 1))
        (size,) = struct.unpack(">i", read_exact(sock, 4))
        frame = struct.pack(">i", size) + read_exact(sock, size)
    _, response = decode_response_frame(3, 9, frame)
    return {t.name: int(t.error_code) for t in response.topics}


def test_auto_creation_is_limited_in_the_daemon(crowded: Daemon) -> None:
    # 100,002 topics exist: beyond auto_create_max_topics (10,000), so nothing more is auto-created; an illegal name
    # is INVALID_TOPIC_EXCEPTION (17), the others UNKNOWN_TOPIC_OR_PARTITION (3), as Kafka answers a topic it does
    # not create; existing topics are answered.
    got = metadata(crowded.port, ["e2e6", "brand-new", "bad name", "flood-000001"])
    assert got == {"e2e6": 0, "brand-new": 3, "bad name": 17, "flood-000001": 0}
    again = metadata(crowded.port, ["brand-new"])
    assert again == {"brand-new": 3}  # still not created


def test_one_request_auto_creates_at_most_100_topics(daemon: Daemon) -> None:
    names = [f"made-{i:03d}" for i in range(150)]
    got = metadata(daemon.port, names)
    assert sorted(got.values()) == [0] * 100 + [3] * 50  # auto_create_max_per_request (100)
    assert [got[n] for n in names[:100]] == [0] * 100  # the first 100 asked for
    assert set(metadata(daemon.port, names[100:]).values()) == {0}  # the next request creates the rest
