"""Throughput of the listener + adapters + core on the Heartbeat path (not a test; run by hand).

    python -m tests.server.bench_server [connections] [requests-per-connection]

Each connection pipelines its requests (window of 100) against the daemon in a child process; prints requests/s.
"""

from __future__ import annotations

import asyncio
import os
import socket
import subprocess
import sys
import time

from tests.server.wire import build_request, request_frame


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


async def _client(port: int, count: int, frame: bytes) -> None:
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    window = 100
    sent = received = 0
    while received < count:
        while sent < count and sent - received < window:
            writer.write(frame)
            sent += 1
        await writer.drain()
        size = int.from_bytes(await reader.readexactly(4), "big")
        await reader.readexactly(size)
        received += 1
    writer.close()


async def _main(port: int, connections: int, per_connection: int) -> float:
    frame = request_frame(build_request(12, 4, group_id="bench", generation_id=1, member_id="m"), 1)
    started = time.perf_counter()
    await asyncio.gather(*(_client(port, per_connection, frame) for _ in range(connections)))
    return connections * per_connection / (time.perf_counter() - started)


def main() -> None:
    connections = int(sys.argv[1]) if len(sys.argv) > 1 else 4
    per_connection = int(sys.argv[2]) if len(sys.argv) > 2 else 20_000
    port = _free_port()
    env = {**os.environ, "KGC_LOG__LEVEL": "WARNING"}
    daemon = subprocess.Popen([sys.executable, "-m", "daemon", "serve", "--kafka-listen", f"127.0.0.1:{port}"],
                              env=env)  # fmt: skip
    try:
        deadline = time.monotonic() + 10
        while True:
            try:
                socket.create_connection(("127.0.0.1", port), timeout=0.2).close()
                break
            except OSError:
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.05)
        rate = asyncio.run(_main(port, connections, per_connection))
        print(f"heartbeat (unknown member) round trips: {rate:,.0f}/s over {connections} pipelining connections")
    finally:
        daemon.terminate()
        daemon.wait(10)


if __name__ == "__main__":
    main()
