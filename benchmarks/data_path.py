"""Data-path benchmarks: durable produce against bare baselines, fetch from the store, produce-to-consume latency per
client, group heartbeats and commits while produce saturates the daemon, and the consumer fetch pipeline.

    python -m benchmarks.data_path --json benchmarks/results/data_path.json \\
        --out docs/performance.md --out benchmarks/notes.md                     # everything, about 15 minutes
    python -m benchmarks.data_path --only produce,fetch ...                       # a subset
    python -m benchmarks.data_path --quick --out /tmp/dp.md                      # smoke sizes, about a minute
    python -m benchmarks.data_path --render benchmarks/results/data_path.json --out docs/performance.md

Scenarios (``--only``): ``produce`` (also measures ``fetch``), ``latency``, ``coordinator``, ``pipeline``. The daemon
runs under ``taskset -c 0``, this runner and every client process on core 1 (``benchmarks.servers``). PostgreSQL
runs when ``--pg-url`` answers: a fresh database ``kgc_dp_<pid>`` is created beside it and dropped afterwards.
``--out FILE`` replaces the section between the data-path markers in FILE (appends it when absent), so that the
report written by ``benchmarks.run`` (whose notes end with this section) keeps it.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import subprocess
import sys
import tempfile
import time
from dataclasses import replace
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from benchmarks import data_raw, load, run, servers
from benchmarks.data_clients import CLIENTS
from benchmarks.load import Options

ALL = ("produce", "latency", "coordinator", "pipeline")
BEGIN = "<!-- BEGIN data-path benchmarks (python -m benchmarks.data_path) -->"
END = "<!-- END data-path benchmarks -->"
Result = dict[str, Any]
PARTITIONS = 8


def _scale(quick: bool) -> dict[str, Any]:
    if quick:
        return {
            "quick": True,
            "repeats": 1,
            "seconds": 1.0,
            "warmup": 0.3,
            "sizes": [(1024, 16)],
            "latency_rates": [200],
            "latency_seconds": 0.5,
            "coord_rate": 200,
            "pipe_messages": 2_000,
            "pipe_work_us": [50],
            "pipe_variants": 1,
            "pipe_latency": False,
        }
    return {
        "quick": False,
        "repeats": 3,
        "seconds": 6.0,
        "warmup": 1.5,
        "sizes": [(1024, 16), (102_400, 1)],
        "latency_rates": [1000, 10000],
        "latency_seconds": 6.0,
        "coord_rate": 1000,
        "pipe_messages": 50_000,
        "pipe_work_us": [0, 50],
        "pipe_variants": 3,
        "pipe_latency": True,
    }


PIN = {"on": True}  # --no-pin: leave the scheduler alone (the smoke test, which runs inside pytest)


class Daemon:
    """The daemon with its HTTP port known (for /metrics), restartable on the same data directory."""

    def __init__(self, work: Path, name: str, storage_url: str | None, topics: list[str]) -> None:
        self.work, self.name, self.storage_url, self.topics = work, name, storage_url, topics
        self.http_port = servers.free_port()
        self.server: servers.Server | None = None

    def start(self) -> servers.Server:
        extra = ["--http-listen", f"127.0.0.1:{self.http_port}"]
        for topic in self.topics:
            extra += ["--topic", topic]
        self.server = servers.daemon(
            self.work,
            storage_url=self.storage_url,
            partitions=PARTITIONS,
            extra=extra,
            name=self.name,
            pin_core=PIN["on"],
        )
        self.server.wait_ready(120)
        return self.server

    def stop(self) -> None:
        if self.server is not None:
            self.server.stop()
            self.server = None


# -- produce and fetch ----------------------------------------------------------------------------------------------


def run_produce(work: Path, s: dict[str, Any], pg_url: str | None) -> list[Result]:
    out: list[Result] = []
    stores: list[tuple[str, str | None]] = [("SQLite", None)]
    pg_db = f"kgc_dp_{os.getpid()}"
    pg_ok = bool(pg_url and run._pg_version(pg_url))
    if pg_url and pg_ok:
        asyncio.run(run._pg_admin(pg_url, f'DROP DATABASE IF EXISTS "{pg_db}"'))
        asyncio.run(run._pg_admin(pg_url, f'CREATE DATABASE "{pg_db}"'))
        stores.append(("PostgreSQL", f"{pg_url.rsplit('/', 1)[0]}/{pg_db}"))
    try:
        for store, url in stores:
            for size, per_batch in s["sizes"]:
                name = f"produce-{store.lower()}-{size}"
                if url:  # a fresh database per run
                    _fresh_pg(url)
                out += _produce_one(work, s, store, url, size, per_batch, name)
    finally:
        if pg_url and pg_ok:
            asyncio.run(run._pg_admin(pg_url, f'DROP DATABASE IF EXISTS "{pg_db}"'))
    return out


def _median(values: list[float]) -> float:
    ordered = sorted(values)
    return ordered[len(ordered) // 2] if ordered else 0.0


def _produce_one(
    work: Path, s: dict[str, Any], store: str, url: str | None, size: int, per_batch: int, name: str
) -> list[Result]:
    """``repeats`` rounds of: the daemon on a fresh log, then the baselines with the grouping it used (alternating,
    so that both see the same minutes of a shared machine); medians, each run's figure beside them."""
    label = f"produce {_size(size)} on {store}"
    batch = data_raw.record_batch(size, per_batch)
    runs: list[Result] = []
    daemon = Daemon(work, name, url, [])
    for rep in range(s["repeats"]):
        print(f"  {label} ({rep + 1}/{s['repeats']}) ...", end="", flush=True)
        daemon = Daemon(work, f"{name}-{rep}", url, [])
        if url and rep:
            _fresh_pg(url)
        srv = daemon.start()
        try:
            before = data_raw.scrape(daemon.http_port)
            result = asyncio.run(
                data_raw.produce(
                    srv.port, "bench", PARTITIONS, size=size, per_batch=per_batch, seconds=s["seconds"],
                    warmup=s["warmup"],
                )
            )  # fmt: skip
            after = data_raw.scrape(daemon.http_port)
        finally:
            daemon.stop()
        r: Result = result.as_dict()
        r["transactions"], r["batches_per_transaction"] = data_raw.write_grouping(before, after)
        group = max(1, round(r["batches_per_transaction"]))
        r["file"] = data_raw.file_baseline(work, batch, group, s["seconds"])
        if url is None:
            r["store_bare"] = data_raw.sqlite_baseline(work, batch, group, s["seconds"], per_batch)
        else:
            r["store_bare"] = asyncio.run(data_raw.pg_baseline(url, batch, group, s["seconds"], per_batch))
        runs.append(r)
        print(
            f" {r['mb_per_s']:.1f} MB/s, {r['batches_per_transaction']:.1f} batches/txn; "
            f"file {r['file']['mb_per_s']:.1f}"
            f" MB/s, bare {store} {r['store_bare']['mb_per_s']:.1f} MB/s, errors={r['errors']}",
            flush=True,
        )
    mb = _median([r["mb_per_s"] for r in runs])
    file_mb = _median([r["file"]["mb_per_s"] for r in runs])
    bare_mb = _median([r["store_bare"]["mb_per_s"] for r in runs])
    out: Result = {
        "scenario": "produce",
        "label": label,
        "store": store,
        "size": size,
        "records_per_batch": per_batch,
        "batch_bytes": len(batch),
        "mb_per_s": mb,
        "msgs_per_s": _median([r["msgs_per_s"] for r in runs]),
        "batches_per_transaction": _median([r["batches_per_transaction"] for r in runs]),
        "file_mb_per_s": file_mb,
        "bare_store_mb_per_s": bare_mb,
        "ratio_file": mb / file_mb if file_mb else 0.0,
        "ratio_bare_store": mb / bare_mb if bare_mb else 0.0,
        "errors": sum(r["errors"] for r in runs),
        "runs": runs,
    }
    if not s["quick"]:
        out["file1_mb_per_s"] = data_raw.file_baseline(work, batch, 1, s["seconds"])["mb_per_s"]
    print(
        f"  -> median {mb:.1f} MB/s = {out['ratio_file']:.0%} of the file, {out['ratio_bare_store']:.0%} of bare "
        f"{store}",
        flush=True,
    )
    # Fetch from the store: the last run's log, the daemon restarted on it, so nothing read comes from memory.
    print(f"  fetch {_size(size)} from {store} ...", end="", flush=True)
    srv = daemon.start()
    try:
        ends = asyncio.run(data_raw.high_watermarks(srv.port, "bench", PARTITIONS))
        f = asyncio.run(data_raw.fetch_all(srv.port, "bench", ends))
    finally:
        daemon.stop()
    fetched = {"scenario": "fetch", "label": f"fetch {_size(size)} from {store}", "store": store, "size": size, **f}
    # The bare readers of the same bytes on the same disk, right after (issue #20 point 5)
    fetched["file_read"] = data_raw.file_read_baseline(work, batch, f["bytes"])
    fetched["sqlite_read"] = data_raw.sqlite_read_baseline(work, batch, f["bytes"], per_batch)
    print(
        f" {f['mb_per_s']:.1f} MB/s ({f['bytes'] / 1e6:.0f} MB, {f['requests']} requests); bare file reader "
        f"{fetched['file_read']['mb_per_s']:.1f} MB/s, bare SQLite reader "
        f"{fetched['sqlite_read']['mb_per_s']:.1f} MB/s",
        flush=True,
    )
    return [out, fetched]


def _fresh_pg(url: str) -> None:
    base, _, db = url.rpartition("/")
    admin = f"{base}/postgres"
    asyncio.run(run._pg_admin(admin, f'DROP DATABASE IF EXISTS "{db}"'))
    asyncio.run(run._pg_admin(admin, f'CREATE DATABASE "{db}"'))


def _size(size: int) -> str:
    return f"{size // 1024} KiB" if size >= 1024 else f"{size} B"


# -- produce-to-consume latency -------------------------------------------------------------------------------------


def _clients_cmd(role: str, client: str, port: int, topic: str, **kw: Any) -> list[str]:
    argv = [sys.executable, "-m", "benchmarks.data_clients", role, "--client", client]
    argv += ["--bootstrap", f"127.0.0.1:{port}", "--topic", topic]
    for key, value in kw.items():
        flag = "--" + key.replace("_", "-")
        if value is True:
            argv.append(flag)
        elif value is not None and value is not False:
            argv += [flag, json.dumps(value) if isinstance(value, dict) else str(value)]
    return argv


def _last_json(text: str) -> Result:
    for line in reversed(text.strip().splitlines()):
        if line.startswith("{"):
            parsed: Result = json.loads(line)
            return parsed
    raise RuntimeError(f"no result in: {text[-2000:]}")


def produce_consume(
    port: int,
    client: str,
    topic: str,
    rate: float,
    seconds: float,
    *,
    consumer_config: dict[str, Any] | None = None,
    producer_config: dict[str, Any] | None = None,
    size: int = 100,
) -> Result:
    """A consumer process (started first, at the end of the topic) and a producer process at ``rate`` msg/s."""
    count = int(rate * seconds)
    env = {**os.environ, "PYTHONUNBUFFERED": "1"}
    consumer = subprocess.Popen(
        _clients_cmd("consume", client, port, topic, count=count, timeout=seconds + 30, config=consumer_config or {}),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
    )
    try:
        assert consumer.stdout is not None
        line = consumer.stdout.readline()
        if line.strip() != "ready":
            raise RuntimeError(f"consumer did not start: {line}{consumer.communicate(timeout=30)}")
        producer = subprocess.run(
            _clients_cmd(
                "produce", client, port, topic, rate=rate, seconds=seconds, size=size, config=producer_config or {}
            ),
            capture_output=True,
            text=True,
            env=env,
            timeout=seconds + 120,
            check=False,
        )
        out, _ = consumer.communicate(timeout=seconds + 60)
    finally:
        if consumer.poll() is None:
            consumer.kill()
            consumer.wait()
    if producer.returncode:
        raise RuntimeError(f"producer failed: {producer.stderr[-2000:]}")
    result = _last_json(out)
    result["sent"] = _last_json(producer.stdout)["sent"]
    result["lost"] = result["sent"] - result["received"]
    return result


# (client, as shown, producer settings). librdkafka leaves Nagle's algorithm on by default (socket.nagle.disable
# false): a small Produce written while the previous one is unanswered waits for the TCP ACK of the previous one.
LATENCY_CLIENTS: list[tuple[str, str, dict[str, Any]]] = [
    ("kafka-python", "kafka-python", {}),
    ("aiokafka", "aiokafka", {}),
    ("confluent", "confluent-kafka", {}),
    ("confluent", "confluent-kafka, socket.nagle.disable=true", {"socket.nagle.disable": True}),
]


def run_latency(work: Path, s: dict[str, Any]) -> list[Result]:
    out: list[Result] = []
    daemon = Daemon(work, "latency", None, ["lat:1"])
    srv = daemon.start()
    try:
        for client, shown, producer_config in LATENCY_CLIENTS:
            for rate in s["latency_rates"]:
                label = f"latency {shown} at {rate:,}/s"
                print(f"  {label} ...", end="", flush=True)
                r = produce_consume(
                    srv.port, client, "lat", rate, s["latency_seconds"], producer_config=producer_config
                )
                r.update({"scenario": "latency", "label": label, "client": shown, "rate": rate})
                out.append(r)
                print(
                    f" p50 {r.get('p50_ms', 0):.2f} ms, p99 {r.get('p99_ms', 0):.2f} ms, "
                    f"received {r['received']}/{r['sent']}",
                    flush=True,
                )
    finally:
        daemon.stop()
    return out


# -- heartbeats and commits while produce saturates -----------------------------------------------------------------


def run_coordinator(work: Path, s: dict[str, Any]) -> list[Result]:
    out: list[Result] = []
    daemon = Daemon(work, "coordinator", None, [])
    srv = daemon.start()
    rate = s["coord_rate"]
    try:
        for loaded in (False, True):
            saturator = None
            if loaded:
                seconds = 3 * (s["seconds"] + s["warmup"]) + 60
                saturator = subprocess.Popen(
                    [
                        sys.executable,
                        "-m",
                        "benchmarks.data_path",
                        "--saturate",
                        str(srv.port),
                        "--seconds",
                        str(seconds),
                    ],
                    stdout=subprocess.DEVNULL,
                    stderr=subprocess.DEVNULL,
                )
                time.sleep(1.0)
            try:
                common = {"port": srv.port, "duration": s["seconds"], "warmup": s["warmup"], "workers": 1}
                for kind, opts in (
                    (
                        "commit",
                        Options("commit", groups=16, members=1, partitions=4, connections=8, window=8, **common),
                    ),
                    ("heartbeat", Options("heartbeat", groups=20, members=5, connections=8, window=8, **common)),
                ):
                    tag = f"{kind}-{'sat' if loaded else 'idle'}-"
                    label = f"{kind} at {rate:,}/s, {'produce saturating' if loaded else 'no produce'}"
                    print(f"  {label} ...", end="", flush=True)
                    r = load.run(replace(opts, rate=float(rate), tag=tag))
                    r.update({"scenario": "coordinator", "label": label, "kind": kind, "loaded": loaded})
                    out.append(r)
                    print(f" p50 {r.get('p50_ms', 0):.2f} ms, p99 {r.get('p99_ms', 0):.2f} ms", flush=True)
                if saturator is not None:
                    r = out[-1]
                    r["produce_running"] = saturator.poll() is None
            finally:
                if saturator is not None:
                    saturator.terminate()
                    saturator.wait(30)
    finally:
        daemon.stop()
    return out


def saturate(port: int, seconds: float) -> None:
    """Closed-loop 1 KiB produce (16 per batch, 16 in flight) for ``seconds``: the daemon's data path kept busy."""
    asyncio.run(data_raw.produce(port, "bench", PARTITIONS, size=1024, per_batch=16, seconds=seconds, warmup=0))


# -- the consumer fetch pipeline ------------------------------------------------------------------------------------

# Per client: the defaults (prefetch on), then the settings that take the prefetch or the batching away.
PIPELINE_VARIANTS: dict[str, list[tuple[str, dict[str, Any]]]] = {
    "kafka-python": [
        ("defaults (max_poll_records 500, fetch_min_bytes 1)", {}),
        ("max_poll_records 10", {"max_poll_records": 10}),
        ("fetch_min_bytes 1 MiB, fetch_max_wait_ms 100", {"fetch_min_bytes": 1 << 20, "fetch_max_wait_ms": 100}),
    ],
    "aiokafka": [
        ("defaults (max_poll_records None, fetch_min_bytes 1)", {}),
        ("max_poll_records 10", {"max_poll_records": 10}),
        ("fetch_min_bytes 1 MiB, fetch_max_wait_ms 100", {"fetch_min_bytes": 1 << 20, "fetch_max_wait_ms": 100}),
    ],
    "confluent": [
        ("defaults (queued.min.messages 100000)", {}),
        ("queued.min.messages 1 (prefetch off)", {"queued.min.messages": 1}),
        ("fetch.min.bytes 1 MiB, fetch.wait.max.ms 100", {"fetch.min.bytes": 1 << 20, "fetch.wait.max.ms": 100}),
    ],
}


def run_pipeline(work: Path, s: dict[str, Any]) -> list[Result]:
    out: list[Result] = []
    daemon = Daemon(work, "pipeline", None, ["pipe:4", "pipelat:1"])
    srv = daemon.start()
    n = s["pipe_messages"]
    try:
        fill = subprocess.run(
            _clients_cmd("produce", "confluent", srv.port, "pipe", partitions=4, count=n, size=1024, rate=0),
            capture_output=True,
            text=True,
            timeout=600,
            check=True,
        )
        print(f"  filled pipe:4 with {_last_json(fill.stdout)['sent']:,} messages of 1 KiB", flush=True)
        for client in CLIENTS:
            for name, config in PIPELINE_VARIANTS[client][: s["pipe_variants"]]:
                for work_us in s["pipe_work_us"]:
                    label = f"pipeline {client}: {name}, {work_us} us/msg"
                    print(f"  {label} ...", end="", flush=True)
                    cmd = _clients_cmd(
                        "consume", client, srv.port, "pipe", partitions=4, count=n, from_beginning=True,
                        work_us=work_us, config=config, timeout=300,
                    )  # fmt: skip
                    done = subprocess.run(cmd, capture_output=True, text=True, timeout=400, check=False)
                    r = _last_json(done.stdout)
                    r.update(
                        {"scenario": "pipeline", "kind": "drain", "label": label, "client": client, "variant": name}
                    )
                    r["work_us"] = work_us
                    out.append(r)
                    print(f" {r['msgs_per_s']:,.0f} msg/s ({r['received']:,} in {r['seconds']} s)", flush=True)
                if not s["pipe_latency"]:
                    continue
                label = f"pipeline latency {client}: {name}"
                print(f"  {label} ...", end="", flush=True)
                rate = s["latency_rates"][0]
                r = produce_consume(srv.port, client, "pipelat", rate, s["latency_seconds"], consumer_config=config)
                r.update({"scenario": "pipeline", "kind": "latency", "label": label, "client": client})
                r.update({"variant": name, "rate": rate})
                out.append(r)
                print(f" p50 {r.get('p50_ms', 0):.2f} ms, p99 {r.get('p99_ms', 0):.2f} ms", flush=True)
    finally:
        daemon.stop()
    return out


# -- the report -----------------------------------------------------------------------------------------------------


def _f(value: Any, digits: int = 1) -> str:
    if value is None:
        return "-"
    return f"{value:,.{digits}f}"


def produce_tables(results: list[Result], level: str = "###") -> list[str]:
    """The durable-produce and fetch tables of ``results`` (also in ``benchmarks.run``'s report)."""
    lines: list[str] = []
    add = lines.append
    prod = [r for r in results if r["scenario"] == "produce"]
    if prod:
        add(f"{level} Durable produce (acks=all) against bare writers on the same disk")
        add("")
        add(
            "A wire-level producer (prebuilt Produce v9 frames, one uncompressed batch per request, 4 connections x 4 "
            f"requests in flight, {PARTITIONS} partitions); 1 KiB messages go 16 to a batch (16.6 KB, the Java "
            "client's `batch.size`), 100 KiB messages one to a batch. The daemon's storage writer merges "
            "concurrent appends into one transaction; *batches/txn* is its measured grouping "
            "(`kgc_storage_write_batch_records`). Right after each daemon run the baselines write the same batch "
            "bytes with that grouping on the same disk: *file* is a plain file `write` + `fsync` per group; *bare "
            "store* is SQLite through the stdlib `sqlite3` with the daemon's pragmas (WAL, `synchronous=FULL`), or "
            "PostgreSQL through one asyncpg connection (`INSERT ... SELECT unnest(...)` + COMMIT, the daemon's "
            "statement form), into a table shaped like `partition_batches`. Each row is the median of "
            "the alternating runs (every run in the JSON); *file 1/fsync* is the file with one batch per fsync."
        )
        add("")
        add(
            "| run | MB/s | msg/s | batches/txn | file MB/s | daemon / file | bare store MB/s | daemon / bare store "
            "| file 1/fsync MB/s | runs (MB/s) |"
        )
        add("|---|---:|---:|---:|---:|---:|---:|---:|---:|---|")
        for r in prod:
            each = ", ".join(_f(x["mb_per_s"]) for x in r.get("runs", []))
            add(
                f"| {r['label']} | {_f(r['mb_per_s'])} | {_f(r['msgs_per_s'], 0)} | "
                f"{_f(r['batches_per_transaction'])} | {_f(r['file_mb_per_s'])} | {r['ratio_file']:.0%} | "
                f"{_f(r['bare_store_mb_per_s'])} | {r['ratio_bare_store']:.0%} | {_f(r.get('file1_mb_per_s'))} | "
                f"{each} |"
            )
        add("")
    fetch = [r for r in results if r["scenario"] == "fetch"]
    if fetch:
        add(f"{level} Fetch from the store")
        add("")
        add(
            "The topic the produce run filled, read from offset 0 to the high watermark of every partition by one "
            "wire-level consumer (Fetch v12, `max_bytes` 50 MiB, 1 MiB per partition, one request in flight), on "
            "the daemon restarted on that log (nothing from the daemon's memory). Right after, the bare readers "
            "read the same number of bytes of the same batches on the same disk: *file* a plain file written and "
            "fsync'd, then read from the start in 1 MiB reads; *bare SQLite* a table shaped like "
            "`partition_batches` read in offset order by one `SELECT` of the stdlib `sqlite3` (both from the page "
            "cache, as the daemon's freshly written log is)."
        )
        add("")
        add(
            "| run | MB/s | msg/s | MB read | requests | bare file reader MB/s | daemon / file | bare SQLite reader "
            "MB/s | daemon / bare SQLite |"
        )
        add("|---|---:|---:|---:|---:|---:|---:|---:|---:|")
        for r in fetch:
            file_mb = (r.get("file_read") or {}).get("mb_per_s")
            sql_mb = (r.get("sqlite_read") or {}).get("mb_per_s")
            of_file = f"{r['mb_per_s'] / file_mb:.0%}" if file_mb else "-"
            of_sql = f"{r['mb_per_s'] / sql_mb:.0%}" if sql_mb else "-"
            add(
                f"| {r['label']} | {_f(r['mb_per_s'])} | {_f(r['msgs_per_s'], 0)} | {_f(r['bytes'] / 1e6, 0)} | "
                f"{r['requests']} | {_f(file_mb)} | {of_file} | {_f(sql_mb)} | {of_sql} |"
            )
        add("")
    return lines


def render(results: list[Result], meta: dict[str, Any]) -> str:
    lines = [BEGIN, "", "## The data path", ""]
    add = lines.append
    add(
        f"Measured {meta['started']} -> {meta['finished']} ({'quick' if meta['quick'] else 'full'}) on: "
        f"{meta['machine']}; load average before/after: {meta['load_before']} / "
        f"{meta['load_after']}. Command: `{meta['command']}` (`benchmarks/data_path.py`, client processes in "
        "`benchmarks/data_clients.py`, the wire-level producer and consumer and the baselines in "
        "`benchmarks/data_raw.py`). The daemon runs on core 0, every client on core 1."
    )
    add("")
    lines += produce_tables(results)
    lat = [r for r in results if r["scenario"] == "latency"]
    if lat:
        add("### Produce-to-consume latency")
        add("")
        add(
            "One producer process and one consumer process of the same library, one partition, 100-byte values "
            "carrying the send time (`time.monotonic_ns()`), producer `acks=all`, linger 0, paced to a fixed rate "
            "(open loop); the consumer assigned (no group), defaults otherwise. Latency = receive - send call, so it "
            "includes the client's queueing on both sides. SQLite storage."
        )
        add("")
        add("| client | rate | p50 ms | p99 ms | p99.9 ms | max ms | received / sent |")
        add("|---|---:|---:|---:|---:|---:|---:|")
        for r in lat:
            add(
                f"| {r['client']} | {r['rate']:,}/s | {_f(r.get('p50_ms'), 2)} | {_f(r.get('p99_ms'), 2)} | "
                f"{_f(r.get('p999_ms'), 2)} | {_f(r.get('max_ms'), 1)} | {r['received']:,} / {r['sent']:,} |"
            )
        add("")
    coord = [r for r in results if r["scenario"] == "coordinator"]
    if coord:
        add("### Heartbeats and commits while produce saturates the daemon")
        add("")
        add(
            "The commit load of `benchmarks.load` (16 single-member groups, OffsetCommit v8 of 4 partitions, "
            "answered when durable) and its heartbeat load (20 groups of 5), each at a fixed rate from one "
            "process, first alone, then while a second process keeps the closed-loop 1 KiB producer above "
            "running on the same daemon (SQLite): commits and produce batches share the storage writer's "
            "transactions."
        )
        add("")
        add("| load | produce | p50 ms | p99 ms | p99.9 ms | max ms | answered/s |")
        add("|---|---|---:|---:|---:|---:|---:|")
        for r in coord:
            add(
                f"| {r['kind']} at {r['options']['rate']:,.0f}/s | {'saturating' if r['loaded'] else 'none'} | "
                f"{_f(r.get('p50_ms'), 2)} | {_f(r.get('p99_ms'), 2)} | {_f(r.get('p999_ms'), 2)} | "
                f"{_f(r.get('max_ms'), 1)} | {_f(r.get('rate'), 0)} |"
            )
        add("")
    pipe = [r for r in results if r["scenario"] == "pipeline"]
    if pipe:
        add("### The consumer fetch pipeline")
        add("")
        add(
            "Drain: a topic of 4 partitions pre-filled with 1 KiB messages, read from the beginning by one consumer "
            "(assigned), without processing and with a processing time per message (a `sleep` per poll of "
            "*n* x that time, which releases the GIL as I/O would). Latency: as above at the first latency rate, "
            "with the same consumer settings. kafka-python and aiokafka always prefetch (kafka-python sends the "
            "next Fetch before it returns a drained buffer, aiokafka's fetch task refills in the background); "
            "librdkafka prefetches until `queued.min.messages` are queued."
        )
        add("")
        add("| client | settings | drain msg/s, no work | drain msg/s, with work | latency p50 / p99 ms |")
        add("|---|---|---:|---:|---:|")
        keyed: dict[tuple[str, str], dict[str, Result]] = {}
        for r in pipe:
            kind = r["kind"] if r["kind"] == "latency" else ("work" if r["work_us"] else "free")
            keyed.setdefault((r["client"], r["variant"]), {})[kind] = r
        for (client, variant), row in keyed.items():
            free, busy, latency = row.get("free"), row.get("work"), row.get("latency")
            add(
                f"| {client} | {variant} | {_f(free and free['msgs_per_s'], 0)} | "
                f"{_f(busy and busy['msgs_per_s'], 0)} ({busy['work_us'] if busy else '-'} us/msg) | "
                f"{_f(latency and latency.get('p50_ms'), 2)} / {_f(latency and latency.get('p99_ms'), 2)} |"
            )
        add("")
    add(meta.get("notes", "").rstrip())
    add("")
    add(END)
    return "\n".join(lines) + "\n"


def write_section(path: Path, section: str) -> None:
    """Replace the marked section of ``path`` (or append it)."""
    text = path.read_text() if path.exists() else ""
    if BEGIN in text and END in text:
        head, _, rest = text.partition(BEGIN)
        _, _, tail = rest.partition(END)
        text = head + section.rstrip("\n") + tail
    else:
        text = text.rstrip("\n") + ("\n\n" if text else "") + section
    path.write_text(text)


def _machine(pg_url: str | None) -> str:
    m = run.machine(pg_url)
    import aiokafka
    import confluent_kafka
    import kafka

    m["clients"] = (
        f"kafka-python {kafka.__version__}, aiokafka {aiokafka.__version__}, confluent-kafka "
        f"{confluent_kafka.__version__} (librdkafka {confluent_kafka.libversion()[0]})"
    )
    return "; ".join(f"{k} {v}" for k, v in m.items())


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--out", type=Path, action="append", default=[], help="Markdown file(s) to put the section in")
    parser.add_argument("--json", type=Path, help="write the raw results here")
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--only", default=",".join(ALL), help=f"comma-separated subset of {','.join(ALL)}")
    parser.add_argument("--pg-url", default="postgresql://postgres@127.0.0.1:5432/test")
    parser.add_argument("--notes", type=Path, help="Markdown put at the end of the section (analysis)")
    parser.add_argument("--render", type=Path, help="results JSON of an earlier run: only write the section again")
    parser.add_argument("--no-pin", action="store_true", help="run the daemon and the clients on any core")
    parser.add_argument("--saturate", type=int, metavar="PORT", help=argparse.SUPPRESS)
    parser.add_argument("--seconds", type=float, default=60.0, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.saturate:
        saturate(args.saturate, args.seconds)
        return 0
    if args.render:
        earlier = json.loads(args.render.read_text())
        if args.notes and args.notes.exists():
            earlier["meta"]["notes"] = args.notes.read_text()
        for path in args.out:
            write_section(path, render(earlier["results"], earlier["meta"]))
            print(f"wrote {path}")
        return 0
    only = [x for x in args.only.split(",") if x]
    s = _scale(args.quick)
    PIN["on"] = not args.no_pin
    if PIN["on"]:
        servers.pin_self_to_load_core()
    meta: dict[str, Any] = {
        "machine": _machine(args.pg_url),
        "started": datetime.now(UTC).strftime("%Y-%m-%d %H:%M UTC"),
        "load_before": ", ".join(f"{x:.2f}" for x in os.getloadavg()),
        "quick": args.quick,
        "command": "python -m benchmarks.data_path " + " ".join(argv if argv is not None else sys.argv[1:]),
    }
    results: list[Result] = []
    with tempfile.TemporaryDirectory(prefix="kgc-dp-") as tmp:
        work = Path(tmp)
        for name in only:
            print(f"{name}:", flush=True)
            if name in ("produce", "fetch"):
                results += run_produce(work, s, args.pg_url)
            elif name == "latency":
                results += run_latency(work, s)
            elif name == "coordinator":
                results += run_coordinator(work, s)
            elif name == "pipeline":
                results += run_pipeline(work, s)
            else:
                parser.error(f"unknown scenario {name}")
    meta["finished"] = datetime.now(UTC).strftime("%H:%M UTC")
    meta["load_after"] = ", ".join(f"{x:.2f}" for x in os.getloadavg())
    if args.notes and args.notes.exists():
        meta["notes"] = args.notes.read_text()
    if args.json:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps({"meta": meta, "results": results}, indent=1, default=str))
    for path in args.out:
        write_section(path, render(results, meta))
        print(f"wrote {path}")
    bad = [r for r in results if r.get("errors") or r.get("lost")]
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
