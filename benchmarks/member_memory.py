"""Bytes per member of formed consumer groups, in process: the real daemon, no sockets.

    python -m benchmarks.member_memory [--groups 5000] [--members 10] [--storage sqlite|memory] [--no-per-group-metrics]
    python -m benchmarks.member_memory --groups 1000 --tracemalloc 30 [--frames 5]   # where the bytes are

The real ``daemon.app.App`` (SQLite by default, per-group metrics as configured by default) runs in process; each
group gets one in-memory connection (``benchmarks.instructions``' transport) over which its ``--members`` members
send JoinGroup v9 without an id, JoinGroup with the id, then SyncGroup (the leader's with every assignment), the
same frames as the load generator's ``scale`` scenario. Sessions are long (no expiry while measuring). After a
warm-up group, RSS (VmRSS) is read before and after forming the groups (a full collection before each read); the
difference over the members formed is the figure of benchmarks/notes.md's "Memory per member". With
``--tracemalloc N`` the allocations made while forming are traced as well and the ``N`` largest sites printed (by
file and line, or by the ``--frames`` innermost frames; tracing costs time and its own memory, so the RSS figure of
such a run is not the one to quote).

The in-memory connections stand for the clients' sockets: one per group here (a real deployment has one per
member, whose kernel buffers are not in the daemon's RSS and whose transport objects are).
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import json
import sys
import tempfile
import time
import tracemalloc
from typing import Any

from benchmarks.client import JOIN_V, decode, join_frame, sync_error, sync_frame
from benchmarks.instructions import _answers, _Transport
from servers.kafka.listener import Connection, KafkaServer

SESSION_MS = 1_800_000  # the daemon's group.max.session.timeout.ms allows 30 min; nothing expires while measuring


def rss() -> int:
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) * 1024
    raise RuntimeError("no VmRSS")


async def form(server: KafkaServer, group_id: str, members: int, keep: list[Connection]) -> None:
    """One group of ``members`` members over one connection, Stable at the end (every SyncGroup answered)."""
    written = asyncio.Event()
    transport = _Transport(written)
    connection = Connection(server)
    connection.connection_made(transport)  # type: ignore[arg-type]
    keep.append(connection)

    async def answers(n: int) -> list[bytes]:
        got: list[bytes] = []
        while True:
            got += _answers(transport)
            if len(got) >= n:
                return got
            written.clear()
            await written.wait()

    connection.data_received(b"".join(join_frame(group_id, "", SESSION_MS, 60_000) for _ in range(members)))
    ids = [decode(11, JOIN_V, p).member_id for p in await answers(members)]
    connection.data_received(b"".join(join_frame(group_id, mid, SESSION_MS, 60_000) for mid in ids))
    joins = [decode(11, JOIN_V, p) for p in await answers(members)]
    if any(int(j.error_code) for j in joins):
        raise RuntimeError(f"{group_id}: JoinGroup errors {sorted({int(j.error_code) for j in joins})}")
    leader, generation = joins[0].leader, int(joins[0].generation_id)
    everyone = [j.member_id for j in joins]
    order = [leader] + [m for m in everyone if m != leader]
    connection.data_received(
        b"".join(sync_frame(group_id, generation, m, everyone if m == leader else []) for m in order)
    )
    errors = {sync_error(p) for p in await answers(members)}
    if errors != {0}:
        raise RuntimeError(f"{group_id}: SyncGroup errors {sorted(errors)}")
    transport.out.clear()


async def measure(
    groups: int, members: int, storage: str, trace: int, per_group_metrics: bool, frames: int = 1
) -> dict[str, Any]:
    from daemon.app import App
    from daemon.settings import load_settings
    from runtime.loop import tune_gc

    with tempfile.TemporaryDirectory(prefix="kgc-member-memory-") as data_dir:
        settings = load_settings(
            kafka={"host": "127.0.0.1", "port": 0},
            http={"listen": "", "per_group_metrics": per_group_metrics},  # the series exist without the API
            storage={"url": "memory"} if storage == "memory" else {"data_dir": data_dir},
            group={"initial_rebalance_delay_ms": 0},
        )
        app = await App.open(settings)
        await app.start()
        tune_gc(settings.runtime.gc_gen0_threshold)
        keep: list[Connection] = []
        try:
            await form(app.server, "warm-up", members, keep)
            gc.collect()
            before = rss()
            if trace:
                tracemalloc.start(frames)
            traced0 = tracemalloc.get_traced_memory()[0] if trace else 0
            began = time.process_time()
            for g in range(groups):
                await form(app.server, f"group-{g:07d}", members, keep)
            cpu = time.process_time() - began
            await asyncio.sleep(0.2)  # the last durable writes settle
            gc.collect()
            after = rss()
            out: dict[str, Any] = {
                "groups": groups,
                "members": groups * members,
                "storage": storage,
                "per_group_metrics": per_group_metrics,
                "rss_before": before,
                "rss_after": after,
                "bytes_per_member": (after - before) / (groups * members),
                "form_cpu_seconds": round(cpu, 1),
            }
            if trace:
                snapshot = tracemalloc.take_snapshot()
                traced = tracemalloc.get_traced_memory()[0] - traced0
                tracemalloc.stop()
                out["traced_bytes_per_member"] = traced / (groups * members)
                stats = snapshot.filter_traces([tracemalloc.Filter(False, tracemalloc.__file__)]).statistics(
                    "lineno" if frames == 1 else "traceback"
                )
                out["top"] = [
                    f"{s.size / (groups * members):8.1f} B/member {s.count / (groups * members):6.2f} obj/member  "
                    + " <- ".join(
                        f"{_short(f.filename)}:{f.lineno}" for f in reversed(s.traceback)
                    )  # the allocating line first
                    for s in stats[:trace]
                ]
            return out
        finally:
            for connection in keep:
                connection.connection_lost(None)
            await app.stop()


def _short(filename: str) -> str:
    """The last directory and the file name of a traced frame's file (``<string>`` for generated code)."""
    return "/".join(filename.rsplit("/", 2)[-2:])


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.member_memory", description=__doc__.split("\n")[0])
    parser.add_argument("--groups", type=int, default=5000)
    parser.add_argument("--members", type=int, default=10)
    parser.add_argument("--storage", choices=("sqlite", "memory"), default="sqlite")
    parser.add_argument("--tracemalloc", type=int, default=0, metavar="N", help="print the N largest sites")
    parser.add_argument("--frames", type=int, default=1, help="traceback depth of the --tracemalloc sites")
    parser.add_argument("--no-per-group-metrics", action="store_true")
    args = parser.parse_args(argv)
    from daemon.__main__ import _run as run_like_the_daemon  # uvloop when installed

    result: dict[str, Any] = {}

    async def go() -> None:
        result.update(
            await measure(
                args.groups, args.members, args.storage, args.tracemalloc, not args.no_per_group_metrics, args.frames
            )
        )

    run_like_the_daemon(go())
    top = result.pop("top", [])
    json.dump(result, sys.stdout)
    print()
    for line in top:
        print(line)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
