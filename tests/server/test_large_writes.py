"""Large answers pipelined to a client that reads slowly: written one by one as the client reads, never joined.

Twenty pipelined all-topics Metadata answers of 19 MB each used to be joined into one write (a 388 MB copy in one
loop step). Now an answer of ``LARGE_WRITE`` bytes or more is written on its own and writing stops while the
transport's buffer is full, so what the daemon holds in the transport is about one answer, not all of them.
"""

from __future__ import annotations

import time

from daemon.app import App
from daemon.settings import load_settings
from servers.kafka.listener import LARGE_WRITE

from .conftest import RunningApp
from .wire import WireClient, build_request, request_frame

TOPICS = 20_000
ANSWERS = 20


def test_large_pipelined_answers_wait_in_the_queue_not_in_one_joined_write() -> None:
    app = RunningApp()
    app.app = App(
        load_settings(
            None,
            kafka={"host": "127.0.0.1", "port": 0, "max_inflight": 32},
            http={"listen": ""},
            topics={"initial": {f"topic-{i:05d}": 2 for i in range(TOPICS)}},
        )
    )
    app.start()
    # The client's receive buffer is kept small so the kernel cannot absorb the answers on its behalf (loopback
    # buffers grow to several MB otherwise, and the test then depends on the machine's TCP settings).
    client = WireClient("127.0.0.1", app.port, timeout=30, rcvbuf=65_536)
    try:
        client.send(build_request(3, 1, topics=None))
        client.receive()  # the all-topics answer is now kept: the pipelined ones below are all ready at once
        # One send, so the daemon reads every request in one go and all the answers are ready together.
        sent = list(range(1000, 1000 + ANSWERS + 1))
        bodies = [build_request(3, 1, topics=None)] * ANSWERS + [build_request(18, 0)]
        client.send_raw(b"".join(request_frame(body, cid) for body, cid in zip(bodies, sent, strict=True)))

        def server_side() -> tuple[int, int, bool]:
            (connection,) = app.app.server.open_connections
            assert connection.transport is not None
            return connection.transport.get_write_buffer_size(), len(connection.slots), connection.writing_paused

        deadline = time.monotonic() + 20
        while True:  # until every answer is built and the transport refused more
            buffered, queued, paused = app.call(server_side)
            if paused or time.monotonic() > deadline:
                break
            time.sleep(0.05)
        first = client.read_frame()
        assert len(first) > LARGE_WRITE
        assert paused, "the client did not read, yet the transport never filled"
        # Once the transport is full the rest wait, as queued answers or as frames not yet dispatched (``queued`` is
        # either); what the transport holds beyond the kernel's buffers is about one answer. A joined write of every
        # ready answer leaves them all in the transport's buffer instead.
        assert buffered <= 2 * len(first), f"{buffered} bytes buffered in the transport ({queued} queued): joined"

        received = [first] + [client.read_frame() for _ in range(ANSWERS)]
        cids = [int.from_bytes(frame[:4], "big") for frame in received]
        assert cids == sent
        assert all(len(frame) == len(first) for frame in received[:ANSWERS])
    finally:
        client.close()
        app.stop()
