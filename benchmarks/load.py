"""The load generator: Kafka-protocol scenarios against a running daemon (or the bare server), several processes.

    python -m benchmarks.load heartbeat --target 127.0.0.1:9092 --groups 100 --members 10 [--rate 20000]
    python -m benchmarks.load commit    --target 127.0.0.1:9092 --groups 64 --partitions 4 [--rate 5000]
    python -m benchmarks.load rebalance --target 127.0.0.1:9092 --members 1000 --delay-ms 1000
    python -m benchmarks.load scale     --target 127.0.0.1:9092 --groups 10000 --members 10 --pid DAEMON_PID

Run it pinned to the other core than the daemon: ``taskset -c 1 python -m benchmarks.load ...`` with the daemon
under ``taskset -c 0`` (``benchmarks.run`` does both). Every worker process forms its own groups with real
JoinGroup/SyncGroup exchanges (MEMBER_ID_REQUIRED round trip included), checks each member with one Heartbeat,
then all workers start the measured phase together:

* heartbeat / commit: every connection keeps ``--window`` requests in flight (closed loop, the maximum), or, with
  ``--rate R``, the workers send R requests/s between them whatever the answers (open loop: a slow server shows
  as latency, not as a lower offered load). Latency is from writing a request to reading its response.
* rebalance: one group of ``--members`` members, one connection each, all joining at once; reports the time from
  the last member-adding JoinGroup to the last SyncGroup response, and that minus the initial-delay windows the
  coordinator must wait by Kafka's rules (see docs/performance.md).
* scale: forms ``--groups`` x ``--members`` (long sessions, no heartbeats after the check) and reports the
  daemon's VmRSS / VmHWM from /proc/PID/status.

Prints one JSON object (also written to ``--json FILE``). Exit status 1 if any request failed.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import multiprocessing as mp
import os
import sys
import time
from array import array
from collections.abc import Callable
from dataclasses import asdict, dataclass
from typing import Any

from benchmarks import client as c


@dataclass
class Options:
    scenario: str
    host: str = "127.0.0.1"
    port: int = 9092
    workers: int = 2
    groups: int = 100
    members: int = 10
    connections: int = 8  # per worker (rebalance: one per member)
    window: int = 32  # requests in flight per connection (closed loop)
    rate: float = 0.0  # requests/s over all workers (open loop); 0 = closed loop
    duration: float = 10.0
    warmup: float = 2.0
    partitions: int = 4  # per OffsetCommit
    session_ms: int = 300_000
    rebalance_ms: int = 30_000
    delay_ms: int = 0  # the daemon's group.initial.rebalance.delay.ms (rebalance scenario: subtracted)
    form_concurrency: int = 100  # groups formed at once per worker
    pid: int = 0  # the server's pid (scale: RSS)
    tag: str = ""  # group-id prefix, so runs against one daemon do not collide


# ------------------------------------------------------------------------------------------------ worker side


def _worker(index: int, opts: Options, barrier: Any, results: Any) -> None:
    try:
        import uvloop

        run: Callable[[Any], Any] = uvloop.run
    except ImportError:
        run = asyncio.run
    try:
        results.put((index, run(_work(index, opts, barrier))))
    except BaseException as exc:  # report instead of hanging the parent at the barrier
        barrier.abort()
        results.put((index, {"error": f"{type(exc).__name__}: {exc}"}))


async def _wait(barrier: Any) -> None:
    await asyncio.get_running_loop().run_in_executor(None, barrier.wait)


async def _work(index: int, opts: Options, barrier: Any) -> dict[str, Any]:
    if opts.scenario == "rebalance":
        return await _rebalance_worker(index, opts, barrier)
    conns = [await c.connect(opts.host, opts.port) for _ in range(opts.connections)]
    started = time.monotonic()
    members = await _form_groups(index, opts, conns)
    formed_s = time.monotonic() - started
    out: dict[str, Any] = {"members": len(members), "form_seconds": formed_s}
    await _wait(barrier)  # every worker formed
    if opts.scenario == "scale":
        await _wait(barrier)  # the parent reads the daemon's memory
    else:
        out.update(await _drive(opts, conns, members))
    for conn in conns:
        conn.close()
    return out


async def _form_groups(index: int, opts: Options, conns: list[c.Conn]) -> list[c.Member]:
    """Form this worker's groups: each group on one connection, one group at a time per connection.

    Responses on a connection come in request order, so a parked JoinGroup of one group would hold back the quick
    MEMBER_ID_REQUIRED answers of another group's members sharing the connection, splitting that group's joins
    over several rebalances; forming one group at a time per connection (``--form-concurrency`` connections at
    once at most) avoids that, and all members of a group arrive together as with real consumers starting.
    """
    members: list[c.Member] = []
    locks = [asyncio.Lock() for _ in conns]
    limit = asyncio.Semaphore(max(1, opts.form_concurrency))

    async def form_group(g: int, ci: int) -> None:
        group_id = f"{opts.tag}{opts.scenario}-{g}"
        conn = conns[ci]
        checks: list[int] = []
        async with limit, locks[ci]:
            for _attempt in range(5):
                formed = await asyncio.gather(
                    *(c.form_member(conn, group_id, opts.session_ms, opts.rebalance_ms) for _ in range(opts.members))
                )
                # Every member joined the same generation and that generation is Stable: a heartbeat says NONE.
                group = [c.Member(group_id, mid, gen, ci) for mid, gen in formed]
                checks = await asyncio.gather(*(c.heartbeat_once(conn, m) for m in group))
                if all(e == 0 for e in checks):
                    members.extend(group)
                    return
            raise c.FormError(f"{group_id}: not stable after 5 attempts (heartbeat errors {checks})")

    my_groups = range(index, opts.groups, opts.workers)
    await asyncio.gather(*(form_group(g, k % len(conns)) for k, g in enumerate(my_groups)))
    return members


async def _drive(opts: Options, conns: list[c.Conn], members: list[c.Member]) -> dict[str, Any]:
    """The measured phase of heartbeat/commit: closed loop (window) or open loop (rate)."""
    loop = asyncio.get_running_loop()
    partitions = opts.partitions

    def build(m: c.Member) -> bytes:
        if opts.scenario == "heartbeat":
            return c.heartbeat_frame(m.group_id, m.generation, m.member_id)
        return c.commit_frame(m.group_id, m.generation, m.member_id, partitions)

    ok = c.HEARTBEAT_OK if opts.scenario == "heartbeat" else c.commit_ok(partitions)
    frames: list[list[bytes]] = [[] for _ in conns]
    for m in members:
        frames[m.conn].append(build(m))
    live = [i for i, f in enumerate(frames) if f]
    cursor = [0] * len(conns)
    latencies = array("i")
    state: dict[str, Any] = {"measuring": False, "running": True, "count": 0, "errors": 0, "sent": 0, "skipped": 0}
    closed_loop = opts.rate <= 0
    first_error: list[bytes] = []

    def take(i: int, n: int) -> bytes:
        fs = frames[i]
        k = cursor[i]
        out = []
        for _ in range(n):
            out.append(fs[k])
            k += 1
            if k == len(fs):
                k = 0
        cursor[i] = k
        return b"".join(out)

    def on_frames(conn: c.Conn, payloads: list[bytes], now: int) -> None:
        sent = conn.sent
        measuring = state["measuring"]
        errors = 0
        for payload in payloads:
            t0 = sent.popleft()
            if payload[4:] != ok:
                errors += 1
                if not first_error:
                    first_error.append(payload)
            if measuring:
                latencies.append((now - t0) // 1000)
        if measuring:
            state["count"] += len(payloads)
            state["errors"] += errors
        if closed_loop and state["running"]:
            n = len(payloads)
            i = conn_index[id(conn)]
            conn.write(take(i, n))
            sent.extend([time.perf_counter_ns()] * n)

    conn_index = {id(conn): i for i, conn in enumerate(conns)}
    for conn in conns:
        conn.on_frames = on_frames

    def start_measuring() -> None:
        state["measuring"] = True
        state["t0"] = time.perf_counter()

    def stop_measuring() -> None:
        state["measuring"] = False
        state["elapsed"] = time.perf_counter() - state["t0"]
        state["running"] = False

    loop.call_later(opts.warmup, start_measuring)
    loop.call_later(opts.warmup + opts.duration, stop_measuring)
    if closed_loop:
        for i in live:
            conns[i].write(take(i, opts.window))
            conns[i].sent.extend([time.perf_counter_ns()] * opts.window)
        while state["running"]:  # noqa: ASYNC110  (the stop is a timer; polling keeps this loop simple)
            await asyncio.sleep(0.05)
    else:
        per_worker = opts.rate / opts.workers
        began = time.perf_counter()
        rr = 0
        backlog_limit = 256
        while state["running"]:
            now = time.perf_counter()
            due = int((now - began) * per_worker) - state["sent"] - state["skipped"]
            if due > 0:
                batches: dict[int, int] = {}
                for _ in range(due):
                    i = live[rr]
                    rr = rr + 1 if rr + 1 < len(live) else 0
                    batches[i] = batches.get(i, 0) + 1
                t_send = time.perf_counter_ns()
                for i, n in batches.items():
                    if len(conns[i].sent) + n > backlog_limit:  # the server is hopelessly behind: do not queue more
                        state["skipped"] += n
                        continue
                    conns[i].write(take(i, n))
                    conns[i].sent.extend([t_send] * n)
                    state["sent"] += n
            await asyncio.sleep(0.0005)
    # Let the requests in flight come back (they are not counted), so connections close cleanly.
    deadline = time.monotonic() + 5
    while any(conn.sent for conn in conns) and time.monotonic() < deadline:  # noqa: ASYNC110
        await asyncio.sleep(0.01)
    result = {
        "count": state["count"],
        "errors": state["errors"],
        "elapsed": state["elapsed"],
        "skipped": state["skipped"],
        "latencies_us": latencies.tobytes(),
    }
    if first_error:
        result["first_error"] = first_error[0].hex()
    return result


async def _rebalance_worker(index: int, opts: Options, barrier: Any) -> dict[str, Any]:
    mine = range(index, opts.members, opts.workers)
    conns = [await c.connect(opts.host, opts.port) for _ in mine]
    group_id = f"{opts.tag}rebalance-{opts.members}"
    finished: asyncio.Future[None] = asyncio.get_running_loop().create_future()
    left = len(conns)

    def done(error: Exception | None) -> None:
        nonlocal left
        if finished.done():
            return
        if error is not None:
            finished.set_exception(error)
            return
        left -= 1
        if left == 0:
            finished.set_result(None)

    members = [c.RebalancingMember(conn, group_id, opts.session_ms, opts.rebalance_ms, done) for conn in conns]
    await _wait(barrier)
    cpu = time.process_time()
    for m in members:
        m.start()
    await finished
    cpu = time.process_time() - cpu
    for conn in conns:
        conn.close()
    return {
        "members": len(conns),
        "joins_ns": [t for m in members for t in m.join_sent],
        "synced_ns": [m.synced for m in members],
        "joined_ns": [m.joined for m in members],
        "sync_sent_ns": [m.sync_sent for m in members],
        "leader": [(m.joined, m.sync_sent) for m in members if m.leader],
        "cpu_s": cpu,
    }


# ------------------------------------------------------------------------------------------------ parent side


def percentiles(samples: array[int]) -> dict[str, float]:
    if not samples:
        return {}
    ordered = sorted(samples)
    n = len(ordered)

    def at(q: float) -> float:
        return ordered[min(n - 1, int(q * n))] / 1000.0  # ms

    return {
        "p50_ms": at(0.50),
        "p99_ms": at(0.99),
        "p999_ms": at(0.999),
        "max_ms": ordered[-1] / 1000.0,
        "mean_ms": sum(ordered) / n / 1000.0,
    }


def vm_status(pid: int) -> dict[str, int]:
    out: dict[str, int] = {}
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            key, _, value = line.partition(":")
            if key in ("VmRSS", "VmHWM"):
                out[key] = int(value.split()[0]) * 1024
    return out


def cpu_seconds(pid: int) -> float:
    """User + system CPU time of a process so far (/proc/PID/stat)."""
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def run(opts: Options, on_formed: Callable[[], None] | None = None) -> dict[str, Any]:
    """Run one scenario with ``opts.workers`` processes; returns the merged result."""
    ctx = mp.get_context("fork")
    barrier = ctx.Barrier(opts.workers + 1)
    results = ctx.Queue()
    procs = [ctx.Process(target=_worker, args=(i, opts, barrier, results), daemon=True) for i in range(opts.workers)]
    began = time.monotonic()
    for p in procs:
        p.start()
    out: dict[str, Any] = {"scenario": opts.scenario, "options": asdict(opts)}
    rss: dict[str, int] = {}
    cpu_before = 0.0
    try:
        barrier.wait(timeout=900)  # all formed (rebalance: all connected; the joins start now)
        formed_at = time.monotonic()
        if opts.scenario == "rebalance" and opts.pid:
            cpu_before = cpu_seconds(opts.pid)
        if opts.scenario == "scale":
            time.sleep(1.0)
            rss = vm_status(opts.pid) if opts.pid else {}
            if on_formed is not None:
                on_formed()
            barrier.wait(timeout=60)
    except Exception as exc:  # a worker aborted the barrier: its message is in the queue
        out["barrier_error"] = repr(exc)
    parts = [results.get(timeout=900) for _ in procs]
    for p in procs:
        p.join(10)
    errors = [r["error"] for _, r in parts if "error" in r]
    if errors:
        out["errors"] = 1
        out["error"] = errors[0]
        return out
    rs = [r for _, r in sorted(parts, key=lambda x: x[0])]
    if opts.scenario == "rebalance":
        joins = [t for r in rs for t in r["joins_ns"]]
        synced = [t for r in rs for t in r["synced_ns"]]
        first, last_join, last_sync = min(joins), max(joins), max(synced)
        delay = opts.delay_ms * 1e6
        # Kafka's initial delay (§5.2): the first member added starts a delay; when it ends and members were added
        # meanwhile, another delay starts. The join phase ends at first + k * delay, k = the window of the last
        # member-adding join (0-based) + 2 (k = 1 for a group of one).
        windows = (int((last_join - first) // delay) + (2 if len(joins) > 1 else 1)) if delay > 0 else 0
        expected_end = first + windows * delay if delay > 0 else last_join
        out.update(
            members=sum(r["members"] for r in rs),
            join_requests=len(joins),
            join_spread_ms=(last_join - first) / 1e6,
            last_join_to_last_sync_ms=(last_sync - last_join) / 1e6,
            delay_windows=windows,
            configured_delay_ms=windows * opts.delay_ms,
            overhead_ms=(last_sync - expected_end) / 1e6,
            first_join_epoch_ms=(first + time.time_ns() - time.monotonic_ns()) / 1e6,  # vs the daemon's history
            errors=0,
        )
        # Where the overhead goes, in ms after the expected end of the join phase: the join answers arriving
        # (first, last), the leader's join answer and its SyncGroup sent, the last SyncGroup sent.
        joined = [t for r in rs for t in r["joined_ns"]]
        sync_sent = [t for r in rs for t in r["sync_sent_ns"]]
        leader = [pair for r in rs for pair in r["leader"]]
        out["phases_ms"] = {
            "first_join_answer": (min(joined) - expected_end) / 1e6,
            "last_join_answer": (max(joined) - expected_end) / 1e6,
            "leader_join_answer": (leader[0][0] - expected_end) / 1e6 if leader else None,
            "leader_sync_sent": (leader[0][1] - expected_end) / 1e6 if leader else None,
            "last_sync_sent": (max(sync_sent) - expected_end) / 1e6,
            "first_sync_answer": (min(synced) - expected_end) / 1e6,
        }
        out["load_cpu_ms"] = sum(r["cpu_s"] for r in rs) * 1000
        if opts.pid:
            out["server_cpu_ms"] = (cpu_seconds(opts.pid) - cpu_before) * 1000
        return out
    out["members"] = sum(r["members"] for r in rs)
    out["form_seconds"] = max(r["form_seconds"] for r in rs)
    out["form_wall_seconds"] = formed_at - began if "barrier_error" not in out else None
    if opts.scenario == "scale":
        out.update(rss)
        out["errors"] = 0
        return out
    latencies = array("i")
    for r in rs:
        part = array("i")
        part.frombytes(r["latencies_us"])
        latencies.extend(part)
    count = sum(r["count"] for r in rs)
    elapsed = max(r["elapsed"] for r in rs)
    out.update(
        count=count,
        elapsed=elapsed,
        rate=count / elapsed,
        errors=sum(r["errors"] for r in rs),
        skipped=sum(r["skipped"] for r in rs),
        **percentiles(latencies),
    )
    if opts.scenario == "commit":
        out["partition_commits_rate"] = out["rate"] * opts.partitions
    first_error = next((r["first_error"] for r in rs if "first_error" in r), None)
    if first_error:
        out["first_error"] = first_error
    return out


def parse_args(argv: list[str] | None = None) -> Options:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("scenario", choices=("heartbeat", "commit", "rebalance", "scale"))
    parser.add_argument("--target", default="127.0.0.1:9092", metavar="HOST:PORT")
    parser.add_argument("--json", metavar="FILE", help="also write the result here")
    d = Options("heartbeat")
    for name in (
        "workers",
        "groups",
        "members",
        "connections",
        "window",
        "partitions",
        "session_ms",
        "rebalance_ms",
        "delay_ms",
        "form_concurrency",
        "pid",
    ):
        parser.add_argument("--" + name.replace("_", "-"), type=int, default=getattr(d, name))
    for name in ("rate", "duration", "warmup"):
        parser.add_argument("--" + name, type=float, default=getattr(d, name))
    parser.add_argument("--tag", default=f"r{os.getpid()}-")
    args = parser.parse_args(argv)
    host, _, port = args.target.rpartition(":")
    opts = Options(args.scenario, host=host, port=int(port))
    for name in vars(d):
        if name not in ("scenario", "host", "port") and hasattr(args, name):
            setattr(opts, name, getattr(args, name))
    opts._json = args.json  # type: ignore[attr-defined]
    return opts


def main(argv: list[str] | None = None) -> int:
    opts = parse_args(argv)
    result = run(opts)
    text = json.dumps(result, indent=2)
    print(text)
    target = getattr(opts, "_json", None)
    if target:
        with open(target, "w") as f:
            f.write(text)
    return 1 if result.get("errors") else 0


if __name__ == "__main__":
    sys.exit(main())
