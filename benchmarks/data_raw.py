"""The data path driven at the wire, and the lean baselines it is compared with.

* ``produce``: a closed-loop producer of prebuilt Produce v9 frames (acks=all, one record batch per request, built
  once with kafka-python's batch builder), ``connections`` x ``window`` requests in flight, round robin over the
  partitions. It measures the server, not a client library: each request costs the load process a frame write and
  a small response decode.
* ``fetch``: a consumer of Fetch v12 requests reading every partition of a topic from offset 0 to its end, each
  answer up to ``max_bytes``; MB/s of record batches received.
* ``file_baseline``: the bare append-and-fsync writer: the same batch bytes appended to a plain file, ``group``
  batches per ``fsync``.
* ``sqlite_baseline``: the bare INSERT + COMMIT loop with the stdlib ``sqlite3`` and the daemon's pragmas, ``group``
  rows of the same bytes per transaction, in a table shaped like ``partition_batches``: SQLite's own cost.
* ``pg_baseline``: the same with asyncpg against PostgreSQL.
"""

from __future__ import annotations

import asyncio
import os
import time
import urllib.request
from dataclasses import dataclass
from datetime import timedelta
from pathlib import Path
from typing import Any

from kafka.record.default_records import DefaultRecordBatchBuilder

from benchmarks.client import Conn, connect, decode, frame
from protocol.record_batch import read_batches

PRODUCE_V, FETCH_V = 9, 12


def record_batch(size: int, count: int, *, seed: int = 0) -> bytes:
    """One uncompressed RecordBatch of ``count`` records with ``size``-byte values (not compressible: random)."""
    builder = DefaultRecordBatchBuilder(
        magic=2, compression_type=0, is_transactional=False, producer_id=-1, producer_epoch=-1,
        base_sequence=-1, batch_size=max(size * count * 2, 1 << 16),
    )  # fmt: skip
    ts = int(time.time() * 1000)
    for i in range(count):
        value = os.urandom(size)
        assert builder.append(i, timestamp=ts, key=b"k%d" % ((seed + i) % 16), value=value, headers=[]) is not None
    return bytes(builder.build())


def produce_frame(topic: str, partition: int, batch: bytes, timeout_ms: int = 30_000) -> bytes:
    return frame(
        0,
        PRODUCE_V,
        {
            "transactional_id": None,
            "acks": -1,
            "timeout": timedelta(milliseconds=timeout_ms),
            "topic_data": [{"name": topic, "partition_data": [{"index": partition, "records": batch}]}],
        },
    )


def produce_errors(payload: bytes) -> list[int]:
    body = decode(0, PRODUCE_V, payload)
    return [p.error_code for t in body.responses for p in t.partition_responses if p.error_code]


@dataclass
class ProduceResult:
    batches: int
    seconds: float
    batch_bytes: int
    records_per_batch: int
    errors: int
    first_error: int | None

    def as_dict(self) -> dict[str, Any]:
        rate = self.batches / self.seconds if self.seconds else 0.0
        return {
            "batches": self.batches,
            "seconds": round(self.seconds, 3),
            "batches_per_s": rate,
            "msgs_per_s": rate * self.records_per_batch,
            "mb_per_s": rate * self.batch_bytes / 1e6,
            "batch_bytes": self.batch_bytes,
            "records_per_batch": self.records_per_batch,
            "errors": self.errors,
            "first_error": self.first_error,
        }


async def produce(
    port: int,
    topic: str,
    partitions: int,
    *,
    size: int,
    per_batch: int,
    seconds: float,
    warmup: float,
    connections: int = 4,
    window: int = 4,
    stop: asyncio.Event | None = None,
) -> ProduceResult:
    """Closed loop for ``warmup + seconds`` (or until ``stop``); counts the batches acknowledged in the window."""
    frames = [produce_frame(topic, p, record_batch(size, per_batch, seed=p)) for p in range(partitions)]
    batch_bytes = len(record_batch(size, per_batch))
    conns: list[Conn] = [await connect("127.0.0.1", port) for _ in range(connections)]
    counted = 0
    errors = 0
    first_error: int | None = None
    loop = asyncio.get_running_loop()
    start = loop.time()
    window_start = start + warmup
    end = window_start + seconds
    measured_end = end
    sequence = 0

    async def lane(conn: Conn) -> None:
        nonlocal counted, errors, first_error, sequence
        while loop.time() < end and not (stop is not None and stop.is_set()):
            sequence += 1
            payload = await conn.request(frames[sequence % partitions])
            bad = produce_errors(payload)
            if bad:
                errors += 1
                first_error = first_error or bad[0]
            elif window_start <= loop.time() <= end:
                counted += 1

    try:
        await asyncio.gather(*(lane(c) for c in conns for _ in range(window)))
    finally:
        for c in conns:
            c.close()
    measured_end = min(loop.time(), end)
    return ProduceResult(counted, max(measured_end - window_start, 0.0), batch_bytes, per_batch, errors, first_error)


def fetch_frame(topic: str, offsets: dict[int, int], *, max_bytes: int, partition_max_bytes: int) -> bytes:
    return frame(
        1,
        FETCH_V,
        {
            "replica_id": -1,
            "max_wait": timedelta(milliseconds=100),
            "min_bytes": 1,
            "max_bytes": max_bytes,
            "isolation_level": 0,
            "session_id": 0,
            "session_epoch": -1,
            "topics": [
                {
                    "topic": topic,
                    "partitions": [
                        {
                            "partition": p,
                            "current_leader_epoch": -1,
                            "fetch_offset": offset,
                            "last_fetched_epoch": -1,
                            "log_start_offset": -1,
                            "partition_max_bytes": partition_max_bytes,
                        }
                        for p, offset in offsets.items()
                    ],
                }
            ],
            "forgotten_topics_data": [],
            "rack_id": "",
        },
    )


async def high_watermarks(port: int, topic: str, partitions: int) -> dict[int, int]:
    conn = await connect("127.0.0.1", port)
    try:
        offsets = {p: 1 << 62 for p in range(partitions)}  # out of range: no records, just the high watermark
        body = decode(1, FETCH_V, await conn.request(fetch_frame(topic, offsets, max_bytes=1, partition_max_bytes=1)))
    finally:
        conn.close()
    return {part.partition_index: part.high_watermark for t in body.responses for part in t.partitions}


async def fetch_all(
    port: int, topic: str, ends: dict[int, int], *, max_bytes: int = 50 << 20, partition_max_bytes: int = 1 << 20
) -> dict[str, Any]:
    """Read every partition from 0 to ``ends[p]`` (its high watermark); MB/s of record batches received."""
    conn = await connect("127.0.0.1", port)
    offsets = {p: 0 for p in ends}
    received = 0
    requests = 0
    records = 0
    started = time.perf_counter()
    try:
        while any(offsets[p] < ends[p] for p in ends):
            wanted = {p: o for p, o in offsets.items() if o < ends[p]}
            payload = await conn.request(
                fetch_frame(topic, wanted, max_bytes=max_bytes, partition_max_bytes=partition_max_bytes)
            )
            requests += 1
            body = decode(1, FETCH_V, payload)
            assert body.error_code == 0, body.error_code
            for t in body.responses:
                for part in t.partitions:
                    assert part.error_code == 0, part.error_code
                    data = part.records or b""
                    if not data:
                        continue
                    received += len(data)
                    headers = read_batches(bytes(data), check_crc=False)
                    last = headers[-1]
                    offsets[part.partition_index] = last.base_offset + last.last_offset_delta + 1
                    records += sum(h.records_count for h in headers)
    finally:
        conn.close()
    seconds = time.perf_counter() - started
    return {
        "bytes": received,
        "records": records,
        "requests": requests,
        "seconds": round(seconds, 3),
        "mb_per_s": received / seconds / 1e6 if seconds else 0.0,
        "msgs_per_s": records / seconds if seconds else 0.0,
    }


def file_baseline(directory: Path, batch: bytes, group: int, seconds: float) -> dict[str, Any]:
    """Append ``group`` copies of ``batch`` to a plain file, then ``fsync``; repeat for ``seconds``."""
    path = directory / f"baseline-{os.getpid()}.log"
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
    payload = batch * group
    syncs = 0
    started = time.perf_counter()
    end = started + seconds
    try:
        while time.perf_counter() < end:
            os.write(fd, payload)
            os.fsync(fd)
            syncs += 1
    finally:
        os.close(fd)
        path.unlink(missing_ok=True)
    elapsed = time.perf_counter() - started
    rate = syncs * group / elapsed
    return {"batches_per_s": rate, "mb_per_s": rate * len(batch) / 1e6, "group": group, "fsyncs": syncs}


_TABLE = """CREATE TABLE IF NOT EXISTS bare_batches (
    topic text NOT NULL, partition_index integer NOT NULL, base_offset bigint NOT NULL, last_offset bigint NOT NULL,
    max_timestamp_ms bigint NOT NULL, size_bytes integer NOT NULL, data {blob} NOT NULL,
    PRIMARY KEY (topic, partition_index, base_offset))"""


def _rows(batch: bytes, group: int, first: int, records_per_batch: int, now: int) -> list[tuple[Any, ...]]:
    return [
        ("bench", 0, o, o + records_per_batch - 1, now, len(batch), batch)
        for o in range(first, first + group * records_per_batch, records_per_batch)
    ]


def sqlite_baseline(
    directory: Path, batch: bytes, group: int, seconds: float, records_per_batch: int
) -> dict[str, Any]:
    """``group`` INSERTs of the batch bytes + COMMIT with the stdlib ``sqlite3``, the daemon's pragmas (WAL,
    ``synchronous=FULL``), into a table shaped like ``partition_batches``: what SQLite itself costs."""
    import sqlite3

    path = directory / f"bare-{os.getpid()}.db"
    conn = sqlite3.connect(path, isolation_level=None)
    try:
        conn.execute("PRAGMA journal_mode=WAL")
        conn.execute("PRAGMA synchronous=FULL")
        conn.execute(_TABLE.format(blob="BLOB"))
        offset = 0
        commits = 0
        now = int(time.time() * 1000)
        started = time.perf_counter()
        end = started + seconds
        while time.perf_counter() < end:
            conn.execute("BEGIN")
            conn.executemany(
                "INSERT INTO bare_batches VALUES (?, ?, ?, ?, ?, ?, ?)",
                _rows(batch, group, offset, records_per_batch, now),
            )
            conn.execute("COMMIT")
            offset += group * records_per_batch
            commits += 1
        elapsed = time.perf_counter() - started
    finally:
        conn.close()
        for suffix in ("", "-wal", "-shm"):
            Path(f"{path}{suffix}").unlink(missing_ok=True)
    rate = commits * group / elapsed
    return {"batches_per_s": rate, "mb_per_s": rate * len(batch) / 1e6, "group": group, "commits": commits}


def file_read_baseline(directory: Path, batch: bytes, total_bytes: int) -> dict[str, Any]:
    """The bare reader of a plain file: about ``total_bytes`` of copies of ``batch`` written to a file on the same
    disk (and fsync'd, as a durable log is), then read back from the start in 1 MiB reads; MB/s of the read. The
    page cache holds what was just written, as it holds the daemon's freshly written log."""
    path = directory / f"read-baseline-{os.getpid()}.log"
    copies = max(1, total_bytes // len(batch))
    fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_TRUNC, 0o644)
    try:
        chunk = batch * max(1, (1 << 20) // len(batch))
        left = copies
        per_chunk = len(chunk) // len(batch)
        while left > 0:
            n = min(left, per_chunk)
            os.write(fd, chunk if n == per_chunk else batch * n)
            left -= n
        os.fsync(fd)
        os.lseek(fd, 0, os.SEEK_SET)
        read = 0
        started = time.perf_counter()
        while data := os.read(fd, 1 << 20):
            read += len(data)
        seconds = time.perf_counter() - started
    finally:
        os.close(fd)
        path.unlink(missing_ok=True)
    return {"bytes": read, "seconds": round(seconds, 4), "mb_per_s": read / seconds / 1e6 if seconds else 0.0}


def sqlite_read_baseline(directory: Path, batch: bytes, total_bytes: int, records_per_batch: int) -> dict[str, Any]:
    """The bare reader of SQLite: the same batches as rows of a table shaped like ``partition_batches`` (written in
    transactions of 100 with the daemon's pragmas), then read back in offset order with the stdlib ``sqlite3``, one
    ``SELECT`` over the table; MB/s of the read."""
    import sqlite3

    path = directory / f"read-bare-{os.getpid()}.db"
    copies = max(1, total_bytes // len(batch))
    conn = sqlite3.connect(path, isolation_level=None)
    try:
        conn.execute("PRAGMA journal_mode=WAL")
        conn.execute("PRAGMA synchronous=FULL")
        conn.execute(_TABLE.format(blob="BLOB"))
        now = int(time.time() * 1000)
        offset = 0
        while offset < copies * records_per_batch:
            group = min(100, copies - offset // records_per_batch)
            conn.execute("BEGIN")
            rows = _rows(batch, group, offset, records_per_batch, now)
            conn.executemany("INSERT INTO bare_batches VALUES (?, ?, ?, ?, ?, ?, ?)", rows)
            conn.execute("COMMIT")
            offset += group * records_per_batch
        read = 0
        started = time.perf_counter()
        for (data,) in conn.execute("SELECT data FROM bare_batches ORDER BY topic, partition_index, base_offset"):
            read += len(data)
        seconds = time.perf_counter() - started
    finally:
        conn.close()
        for suffix in ("", "-wal", "-shm"):
            Path(f"{path}{suffix}").unlink(missing_ok=True)
    return {"bytes": read, "seconds": round(seconds, 4), "mb_per_s": read / seconds / 1e6 if seconds else 0.0}


async def pg_baseline(url: str, batch: bytes, group: int, seconds: float, records_per_batch: int) -> dict[str, Any]:
    """``group`` rows of the batch bytes in one ``INSERT ... SELECT unnest(...)`` + COMMIT (asyncpg, one connection;
    the daemon's writer uses the same statement form), into a table shaped like ``partition_batches`` with the same
    ``STORAGE EXTERNAL`` (no compression attempt on the blobs)."""
    import asyncpg  # a dependency of the daemon

    conn = await asyncpg.connect(url)
    insert = (
        "INSERT INTO bare_batches SELECT * FROM unnest($1::text[], $2::int[], $3::bigint[], $4::bigint[], "
        "$5::bigint[], $6::int[], $7::bytea[])"
    )
    try:
        await conn.execute("DROP TABLE IF EXISTS bare_batches")
        await conn.execute(_TABLE.format(blob="bytea"))
        await conn.execute("ALTER TABLE bare_batches ALTER COLUMN data SET STORAGE EXTERNAL")
        offset = 0
        commits = 0
        now = int(time.time() * 1000)
        started = time.perf_counter()
        end = started + seconds
        while time.perf_counter() < end:
            columns = list(zip(*_rows(batch, group, offset, records_per_batch, now), strict=True))
            async with conn.transaction():
                await conn.execute(insert, *columns)
            offset += group * records_per_batch
            commits += 1
        elapsed = time.perf_counter() - started
        await conn.execute("DROP TABLE bare_batches")
    finally:
        await conn.close()
    rate = commits * group / elapsed
    return {"batches_per_s": rate, "mb_per_s": rate * len(batch) / 1e6, "group": group, "commits": commits}


def scrape(http_port: int) -> dict[str, float]:
    """The daemon's Prometheus samples without labels (name -> value)."""
    with urllib.request.urlopen(f"http://127.0.0.1:{http_port}/metrics", timeout=10) as answer:
        text = answer.read().decode()
    out: dict[str, float] = {}
    for line in text.splitlines():
        if line and not line.startswith("#") and "{" not in line:
            name, _, value = line.partition(" ")
            try:
                out[name] = float(value)
            except ValueError:
                continue
    return out


def write_grouping(before: dict[str, float], after: dict[str, float]) -> tuple[int, float]:
    """(transactions, records per transaction) of the daemon's storage writer between two scrapes."""
    name = "kgc_storage_write_batch_records"
    transactions = int(after.get(f"{name}_count", 0) - before.get(f"{name}_count", 0))
    records = after.get(f"{name}_sum", 0) - before.get(f"{name}_sum", 0)
    return transactions, (records / transactions if transactions else 0.0)
