"""CPU instructions per request, by request kind, counted by valgrind's callgrind: a measure this noisy VM cannot blur.

    python -m benchmarks.instructions [--members 1000] [--storage memory|sqlite] [--phase join1,join2,sync,heartbeat]
    python -m benchmarks.instructions --server lean --phase heartbeat,heartbeat16   # the lean baseline, same phases

The real daemon (``daemon.app.App``, storage as chosen) runs in process behind in-memory transports, so a
request costs what the daemon's own code costs: framing, decoding, the adapter, the core, the storage hand-off,
the answer, the metrics; not the kernel's send/recv. A warm-up group goes through the whole exchange first (the
first use of each path imports and compiles), then one group of ``--members`` members does:

* ``join1``: JoinGroup without a member id (answered MEMBER_ID_REQUIRED),
* ``join2``: JoinGroup with the id (adds the member; parked until the join phase ends),
* ``sync``: SyncGroup (the leader's first, with every assignment; then the followers'),
* ``heartbeat``: one Heartbeat per member (each read holds one frame),
* ``heartbeat16``: 16 Heartbeats per member, all arriving in one read (as pipelined by the load generator, which
  keeps 32 in flight per connection); counted per heartbeat.
* ``commit``: one OffsetCommit v8 of 4 partitions per member (the commit benchmark's request), counted up to the
  hand-off to storage (on SQLite the answer is written when the writer thread is done, outside the count; with
  memory storage it is counted).

``--server lean`` runs the same exchange against ``benchmarks.lean_server`` (its connections behind the same
in-memory transports), the denominator of the heartbeat ratio: the daemon's instructions per heartbeat over the lean
server's is the cost of everything the daemon adds, without the kernel and without this VM's noise.

Each phase runs inside one ``functools.reduce`` call and callgrind counts only inside that function
(``--toggle-collect=functools_reduce``); one valgrind run per phase. Instructions per request = the count / members.
Answers completed later by a timer or a storage write (the join phase's answers; the SyncGroup answers on SQLite)
are encoded outside the counted phases; with memory storage the leader's write completes at once, so the
followers' SyncGroup answers are counted in ``sync``. Used to measure each optimisation before and after
(benchmarks/notes.md, fourth round).
"""

from __future__ import annotations

import argparse
import asyncio
import functools
import os
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from benchmarks.client import (
    HEARTBEAT_V,
    JOIN_V,
    commit_frame,
    commit_ok,
    decode,
    heartbeat_frame,
    join_frame,
    sync_error,
    sync_frame,
)
from protocol.framing import FrameDecoder
from servers.kafka.listener import Connection, KafkaServer

PHASES = ("join1", "join2", "sync", "heartbeat", "heartbeat16", "commit")
COMMIT_PARTITIONS = 4  # per OffsetCommit in the commit phase, as the commit benchmark sends
BATCH = 16  # heartbeats per read in the heartbeat16 phase


class _Transport:
    """Collects what the daemon writes (and says so on ``written``); never pauses."""

    def __init__(self, written: asyncio.Event) -> None:
        self.out: list[bytes] = []
        self.written = written

    def write(self, data: bytes) -> None:
        self.out.append(data)
        self.written.set()

    def get_extra_info(self, name: str, default: Any = None) -> Any:
        return ("127.0.0.1", 50000) if name == "peername" else default

    def is_closing(self) -> bool:
        return False

    def pause_reading(self) -> None: ...

    def resume_reading(self) -> None: ...

    def close(self) -> None: ...

    def abort(self) -> None: ...


def _answers(transport: _Transport) -> list[bytes]:
    """The frame payloads written so far (size prefixes removed), and forget them."""
    payloads = FrameDecoder().feed(b"".join(transport.out))
    transport.out.clear()
    return payloads


def _run(phase: str, counted: str | None, feed: Callable[[Any], None], items: Sequence[Any]) -> None:
    if phase == counted:
        functools.reduce(lambda _, item: feed(item), items, None)  # callgrind counts inside reduce only
    else:
        for item in items:
            feed(item)


async def exchange(
    server: KafkaServer | Callable[[], Any], group_id: str, members: int, counted: str | None = None
) -> None:
    """One group of ``members`` members, each on its own connection: join, rejoin, sync, heartbeat. ``server`` is the
    daemon's ``KafkaServer`` or a factory of another server's connection protocols (the lean baseline)."""
    written = asyncio.Event()

    async def until(done: Callable[[], bool]) -> None:
        while not done():
            written.clear()
            await written.wait()

    conns: list[tuple[Connection, _Transport]] = []
    for _ in range(members):
        connection = Connection(server) if isinstance(server, KafkaServer) else server()
        transport = _Transport(written)
        connection.connection_made(transport)  # type: ignore[arg-type]
        conns.append((connection, transport))

    try:
        await _exchange(group_id, conns, until, counted)
    finally:
        for connection, _ in conns:
            connection.connection_lost(None)  # the clients hang up (else the server's stop waits for them)


async def _exchange(
    group_id: str,
    conns: list[tuple[Any, _Transport]],
    until: Callable[[Callable[[], bool]], Any],
    counted: str | None,
) -> None:
    first = join_frame(group_id, "", 45_000, 60_000)
    _run("join1", counted, lambda ct: ct[0].data_received(first), conns)
    ids = [decode(11, JOIN_V, _answers(t)[0]).member_id for _, t in conns]
    rejoins = [(c, join_frame(group_id, mid, 45_000, 60_000)) for (c, _), mid in zip(conns, ids, strict=True)]
    _run("join2", counted, lambda cf: cf[0].data_received(cf[1]), rejoins)
    await until(lambda: all(t.out for _, t in conns))  # the join phase ends when the initial-delay timer fires
    joins = [decode(11, JOIN_V, _answers(t)[0]) for _, t in conns]
    if any(int(j.error_code) for j in joins):
        raise RuntimeError(f"JoinGroup errors: {sorted({int(j.error_code) for j in joins})}")
    leader, generation = joins[0].leader, int(joins[0].generation_id)
    everyone = [j.member_id for j in joins]
    syncs = [
        (c, sync_frame(group_id, generation, j.member_id, everyone if j.member_id == leader else []))
        for (c, _), j in zip(conns, joins, strict=True)
    ]
    syncs.insert(0, syncs.pop(everyone.index(leader)))  # the leader's first, as in a real rebalance
    _run("sync", counted, lambda cf: cf[0].data_received(cf[1]), syncs)
    await until(lambda: all(t.out for _, t in conns))  # parked until the assignment is durable
    sync_errors = {sync_error(p) for _, t in conns for p in _answers(t)}
    if sync_errors != {0}:
        raise RuntimeError(f"SyncGroup errors: {sorted(sync_errors)}")
    beats = [(c, heartbeat_frame(group_id, generation, j.member_id)) for (c, _), j in zip(conns, joins, strict=True)]
    _run("heartbeat", counted, lambda cf: cf[0].data_received(cf[1]), beats)
    errors = {int(decode(12, HEARTBEAT_V, p).error_code) for _, t in conns for p in _answers(t)}
    if errors != {0}:
        raise RuntimeError(f"Heartbeat errors: {sorted(errors)}")
    batches = [(c, b"".join([frame] * BATCH)) for c, frame in beats]
    _run("heartbeat16", counted, lambda cf: cf[0].data_received(cf[1]), batches)
    answers = [p for _, t in conns for p in _answers(t)]
    errors = {int(decode(12, HEARTBEAT_V, p).error_code) for p in answers}
    if errors != {0} or len(answers) != BATCH * len(conns):
        raise RuntimeError(f"Heartbeat errors: {sorted(errors)}, {len(answers)} answers")
    commits = [
        (c, commit_frame(group_id, generation, j.member_id, COMMIT_PARTITIONS))
        for (c, _), j in zip(conns, joins, strict=True)
    ]
    _run("commit", counted, lambda cf: cf[0].data_received(cf[1]), commits)
    await until(lambda: all(t.out for _, t in conns))  # answered once durable
    ok = commit_ok(COMMIT_PARTITIONS)
    bad = [p for _, t in conns for p in _answers(t) if not p.endswith(ok)]
    if bad:
        raise RuntimeError(f"OffsetCommit answers not all NONE: {bad[0]!r}")


async def _inner_lean(members: int, counted: str | None) -> None:
    from benchmarks.lean_server import LeanConnection, LeanState

    state = LeanState()
    await exchange(lambda: LeanConnection(state), "warm-up", members)
    await exchange(lambda: LeanConnection(state), "counted", members, counted)


async def _inner(members: int, storage: str, counted: str | None) -> None:
    from daemon.app import App
    from daemon.settings import load_settings
    from runtime.loop import tune_gc

    with tempfile.TemporaryDirectory(prefix="kgc-instructions-") as data_dir:
        settings = load_settings(
            kafka={"host": "127.0.0.1", "port": 0},
            http={"listen": ""},  # no operator API
            storage={"url": "memory"} if storage == "memory" else {"data_dir": data_dir},
            group={"initial_rebalance_delay_ms": 0},
            topics={"initial": {"bench": COMMIT_PARTITIONS}},
        )
        app = await App.open(settings)
        await app.start()
        tune_gc(settings.runtime.gc_gen0_threshold)  # as ``kgc serve`` does once started
        try:
            await exchange(app.server, "warm-up", members)
            await exchange(app.server, "counted", members, counted)
        finally:
            await app.stop()


def count(phase: str, members: int, storage: str, server: str = "daemon") -> int:
    """Instructions callgrind counted in ``phase`` (all members)."""
    with tempfile.TemporaryDirectory(prefix="kgc-callgrind-") as tmp:
        out = Path(tmp) / "callgrind.out"
        command = ["valgrind", "--tool=callgrind", "--collect-atstart=no", "--toggle-collect=functools_reduce"]
        command += [f"--callgrind-out-file={out}", sys.executable, "-m", "benchmarks.instructions", "--inner", phase]
        command += ["--members", str(members), "--storage", storage, "--server", server]
        env = {**os.environ, "PYTHONHASHSEED": "0"}
        done = subprocess.run(command, capture_output=True, text=True, env=env, check=False)
        if done.returncode != 0:
            raise RuntimeError(f"{phase}: exit {done.returncode}\n{done.stderr[-2000:]}")
        for line in out.read_text().splitlines():
            if line.startswith("totals:"):
                return int(line.split()[1])
    raise RuntimeError(f"{phase}: no totals in the callgrind output")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.instructions", description=__doc__.split("\n")[0])
    parser.add_argument("--members", type=int, default=1000)
    parser.add_argument("--storage", choices=("memory", "sqlite"), default="memory")
    parser.add_argument("--phase", default=",".join(PHASES), help="comma-separated: " + ", ".join(PHASES))
    parser.add_argument("--server", choices=("daemon", "lean"), default="daemon")
    parser.add_argument("--inner", choices=(*PHASES, "none"), help=argparse.SUPPRESS)  # the process valgrind runs
    args = parser.parse_args(argv)
    if args.inner:
        counted = None if args.inner == "none" else args.inner
        from daemon.__main__ import _run as run_like_the_daemon  # uvloop when installed

        if args.server == "lean":
            run_like_the_daemon(_inner_lean(args.members, counted))
        else:
            run_like_the_daemon(_inner(args.members, args.storage, counted))
        return 0
    if shutil.which("valgrind") is None:
        print("valgrind is needed (apt-get install valgrind)", file=sys.stderr)
        return 2
    where = "the lean server" if args.server == "lean" else f"storage {args.storage}"
    print(f"instructions per request, {args.members} members, {where} (callgrind, in process)")
    for phase in args.phase.split(","):
        total = count(phase, args.members, args.storage, args.server)
        requests = args.members * (BATCH if phase == "heartbeat16" else 1)
        print(f"{phase:11s} {total / requests:>10,.0f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
