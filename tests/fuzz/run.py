"""The fuzzer: generated and mutated request frames of every served api/version, sent to the real daemon process over
TCP while a real kafka-python consumer beside it heartbeats and commits.

    python -m tests.fuzz.run --frames 1000000 --seed 1      # the long run; prints its figures, exit 1 on a failure

Frames come from ``tests.fuzz.frames``: a random valid request of a random served api/version (30%), or one mutated
(bit flips, truncation, junk tails, declared lengths replaced by 0, -1, 0x7fffffff, 0xffffffff or huge varints,
header fields garbled, unknown api keys and versions, wrong size prefixes). They go out on ``lanes`` connections, one
outstanding frame per connection: a lane whose frame was answered sends the next one; a lane the daemon closed
reconnects; a lane with no answer after ``patience`` seconds (a parked JoinGroup or Fetch, a frame whose size prefix
promises more bytes) is closed by us and reconnects. Meanwhile the daemon's VmRSS is sampled from /proc.

At the end the run is judged (``Report.failures``): the daemon is alive, its RSS stayed under a bound, the consumer
kept its membership (one generation from start to end, no member of its group removed) and committed throughout, its
last commit is readable over HTTP, and the daemon's log has no ERROR line and no traceback.
"""

from __future__ import annotations

import argparse
import json
import random
import selectors
import socket
import struct
import sys
import tempfile
import threading
import time
import urllib.request
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tests.e2e.daemon import Daemon
from tests.e2e.helpers import KafkaPythonMember, wait_for
from tests.fuzz import frames as F

CONSUMER_GROUP = "fuzz-real-consumer"
CONSUMER_TOPIC = "fuzz-real-topic"
_SIZE = struct.Struct(">i")


def rss_kb(pid: int) -> int:
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    return 0


class RssSampler(threading.Thread):
    def __init__(self, pid: int, interval: float = 0.25) -> None:
        super().__init__(name="rss-sampler", daemon=True)
        self.pid = pid
        self.interval = interval
        self.samples: list[int] = []
        self._halt = threading.Event()

    def run(self) -> None:
        while not self._halt.is_set():
            try:
                self.samples.append(rss_kb(self.pid))
            except OSError:
                return
            self._halt.wait(self.interval)

    def stop(self) -> None:
        self._halt.set()
        self.join(5)


class CommittingConsumer(KafkaPythonMember):
    """A kafka-python consumer in the fuzz group that commits a growing offset for each of its partitions every
    second, and remembers its generation at each commit."""

    name = "fuzz-consumer"
    client_id = "fuzz-consumer"

    def __init__(self, bootstrap: str) -> None:
        super().__init__(bootstrap, CONSUMER_GROUP, CONSUMER_TOPIC)
        self.commits = 0
        self.commit_failures: list[str] = []
        self.generations: set[int] = set()
        self.last_committed: dict[int, int] = {}
        self._next_commit = 0.0

    def _after_poll(self) -> None:
        from kafka.structs import OffsetAndMetadata

        now = time.monotonic()
        assignment = self.consumer.assignment()
        if now < self._next_commit or not assignment:
            return
        self._next_commit = now + 1.0
        offset = self.commits + 1
        try:
            self.consumer.commit({tp: OffsetAndMetadata(offset, "", -1) for tp in assignment})
        except Exception as exc:  # a refused commit is a finding, not a crash of the harness
            self.commit_failures.append(f"{type(exc).__name__}: {exc}")
            return
        self.commits += 1
        self.generations.add(self.generation())
        self.last_committed = {tp.partition: offset for tp in assignment}


class DaemonGone(Exception):
    pass


@dataclass
class Lane:
    sock: socket.socket | None = None
    buf: bytearray = field(default_factory=bytearray)
    sent_at: float = 0.0
    waiting: bool = False
    kind: str = ""


@dataclass
class Report:
    frames: int = 0
    seconds: float = 0.0
    connections: int = 0
    outcomes: Counter[str] = field(default_factory=Counter)  # "<kind> <answered|closed|no-answer>"
    rss_kb: list[int] = field(default_factory=list)
    consumer_commits: int = 0
    consumer_generations: list[int] = field(default_factory=list)
    commit_failures: list[str] = field(default_factory=list)
    members_removed: int = 0
    rebalances: int = 0
    offsets_ok: bool = False
    log_levels: Counter[str] = field(default_factory=Counter)
    tracebacks: int = 0
    alive: bool = False
    rss_limit_kb: int = 0

    def failures(self) -> list[str]:
        out = []
        if not self.alive:
            out.append("the daemon is not alive")
        if self.rss_kb and max(self.rss_kb) > self.rss_limit_kb:
            out.append(f"RSS reached {max(self.rss_kb)} kB (limit {self.rss_limit_kb} kB)")
        if len(self.consumer_generations) != 1:
            out.append(f"the consumer's generation changed: {self.consumer_generations}")
        if self.members_removed:
            out.append(f"{self.members_removed} member(s) removed from the consumer's group")
        if self.commit_failures:
            out.append(f"{len(self.commit_failures)} commit(s) failed: {self.commit_failures[:3]}")
        if self.consumer_commits < max(1, int(self.seconds) // 2):
            out.append(f"only {self.consumer_commits} commits in {self.seconds:.0f} s")
        if not self.offsets_ok:
            out.append("the consumer's last commit is not readable over HTTP")
        if self.log_levels["error"] or self.log_levels["critical"] or self.tracebacks:
            out.append(f"daemon log: {dict(self.log_levels)}, {self.tracebacks} traceback(s)")
        return out

    def rate(self) -> float:
        return self.frames / max(self.seconds, 1e-9)

    def summary(self) -> str:
        rss = self.rss_kb or [0]
        answered = sum(n for k, n in self.outcomes.items() if k.endswith(" answered"))
        closed = sum(n for k, n in self.outcomes.items() if k.endswith(" closed"))
        silent = sum(n for k, n in self.outcomes.items() if k.endswith(" no-answer"))
        lines = [
            f"frames sent          {self.frames:,} in {self.seconds:.1f} s ({self.rate():,.0f}/s)",
            f"  answered / closed by the daemon / no answer in time: {answered:,} / {closed:,} / {silent:,}",
            f"connections opened   {self.connections:,}",
            f"daemon RSS (MB)      start {rss[0] / 1024:.0f}, max {max(rss) / 1024:.0f}, end {rss[-1] / 1024:.0f}"
            f" ({len(rss)} samples; at 1/4, 1/2, 3/4 of the run:"
            f" {', '.join(f'{rss[len(rss) * q // 4] / 1024:.0f}' for q in (1, 2, 3))})",
            f"consumer             {self.consumer_commits} commits, generations {self.consumer_generations},"
            f" {len(self.commit_failures)} failed, {self.members_removed} members removed,"
            f" {self.rebalances} rebalances, last commit readable: {self.offsets_ok}",
            f"daemon log lines     {dict(sorted(self.log_levels.items()))}, tracebacks {self.tracebacks}",
            f"daemon alive         {self.alive}",
        ]
        return "\n".join(lines)


def _http_json(daemon: Daemon, path: str) -> Any:
    with urllib.request.urlopen(daemon.http_url + path, timeout=10) as response:
        return json.loads(response.read())


class Fuzzer:
    def __init__(self, daemon: Daemon, seed: int, lanes: int = 8, patience: float = 0.05) -> None:
        self.daemon = daemon
        self.rng = random.Random(seed)
        self.lanes = [Lane() for _ in range(lanes)]
        self.patience = patience
        self.selector = selectors.DefaultSelector()
        self.report = Report()
        self.correlation_id = 0

    def _open(self, lane: Lane) -> None:
        try:
            sock = socket.create_connection(("127.0.0.1", self.daemon.port), timeout=5)
        except OSError:
            assert self.daemon.process is not None
            if self.daemon.process.poll() is not None:
                raise DaemonGone(f"the daemon exited with {self.daemon.process.returncode}") from None
            raise
        sock.setblocking(False)
        lane.sock = sock
        lane.buf.clear()
        lane.waiting = False
        self.selector.register(sock, selectors.EVENT_READ, lane)
        self.report.connections += 1

    def _close(self, lane: Lane) -> None:
        if lane.sock is not None:
            self.selector.unregister(lane.sock)
            lane.sock.close()
            lane.sock = None
        lane.waiting = False

    def _next_frame(self) -> tuple[str, bytes]:
        self.correlation_id = (self.correlation_id + 1) & 0x7FFFFFFF
        _, _, frame = F.random_frame(self.rng, self.correlation_id)
        if self.rng.random() < 0.3:
            return "valid", frame
        return F.mutate(frame, self.rng)

    def _send(self, lane: Lane) -> None:
        if lane.sock is None:
            self._open(lane)
        assert lane.sock is not None
        kind, frame = self._next_frame()
        try:
            lane.sock.setblocking(True)
            lane.sock.settimeout(1.0)
            lane.sock.sendall(frame)
            lane.sock.setblocking(False)
        except OSError:  # the daemon closed it (or stopped reading): count it and start afresh
            self._finish(lane, kind, "closed")
            return
        lane.kind = kind
        lane.waiting = True
        lane.sent_at = time.monotonic()
        self.report.frames += 1

    def _finish(self, lane: Lane, kind: str, outcome: str) -> None:
        self.report.outcomes[f"{kind} {outcome}"] += 1
        if outcome != "answered":
            self._close(lane)
        else:
            lane.waiting = False

    def _on_readable(self, lane: Lane) -> None:
        assert lane.sock is not None
        try:
            data = lane.sock.recv(1 << 20)
        except (BlockingIOError, InterruptedError):
            return
        except OSError:
            data = b""
        if not data:
            self._finish(lane, lane.kind, "closed")
            return
        lane.buf += data
        # whole response frames: one answers the outstanding request (an unsupported ApiVersions answer and the
        # like count the same); bytes of a later frame stay buffered
        while len(lane.buf) >= 4:
            size = _SIZE.unpack_from(lane.buf, 0)[0]
            if len(lane.buf) < 4 + size:
                break
            del lane.buf[: 4 + size]
            if lane.waiting:
                self._finish(lane, lane.kind, "answered")

    def run(self, frames: int, max_seconds: float) -> Report:
        start = time.monotonic()
        deadline = start + max_seconds
        while self.report.frames < frames and time.monotonic() < deadline:
            try:
                for lane in self.lanes:
                    if not lane.waiting and self.report.frames < frames:
                        self._send(lane)
            except DaemonGone as exc:
                self.report.outcomes[f"{exc}"] += 1
                break
            for key, _ in self.selector.select(timeout=self.patience / 4):
                self._on_readable(key.data)
            now = time.monotonic()
            for lane in self.lanes:
                if lane.waiting and now - lane.sent_at > self.patience:
                    self._finish(lane, lane.kind, "no-answer")
        for lane in self.lanes:
            self._close(lane)
        self.report.seconds = time.monotonic() - start
        return self.report


def _judge(report: Report, daemon: Daemon, consumer: CommittingConsumer) -> None:
    assert daemon.process is not None
    report.alive = daemon.process.poll() is None
    report.consumer_commits = consumer.commits
    report.consumer_generations = sorted(consumer.generations)
    report.commit_failures = list(consumer.commit_failures)
    if report.alive:
        offsets = _http_json(daemon, f"/v1/groups/{CONSUMER_GROUP}/offsets")
        report.offsets_ok = bool(consumer.last_committed) and _offsets_match(offsets, consumer.last_committed)
        history = _http_json(daemon, f"/v1/groups/{CONSUMER_GROUP}/rebalances")
        rebalances = history.get("rebalances", history) if isinstance(history, dict) else history
        report.rebalances = len(rebalances)
        report.members_removed = sum(len(r.get("members_out", ())) for r in rebalances)
    log = daemon.log_text()
    for line in log.splitlines():
        if line.startswith("ts=") or line.startswith("{"):
            level = line.split("level=", 1)[1].split(" ", 1)[0] if "level=" in line else "json"
            report.log_levels[level] += 1
    report.tracebacks = log.count("Traceback")


def _offsets_match(offsets: Any, expected: dict[int, int]) -> bool:
    found: dict[int, int] = {}
    entries = offsets.get("offsets", offsets.get("topics", [])) if isinstance(offsets, dict) else offsets
    for entry in entries:
        if entry.get("topic") == CONSUMER_TOPIC:
            found[int(entry["partition"])] = int(entry["offset"])
        for p in entry.get("partitions", ()):
            if entry.get("topic", entry.get("name")) == CONSUMER_TOPIC:
                found[int(p["partition"])] = int(p["offset"])
    return all(found.get(p) == o for p, o in expected.items())


def run(workdir: Path, frames: int, seed: int, max_seconds: float, rss_limit_mb: int = 400, lanes: int = 8) -> Report:
    daemon = Daemon(workdir, topics=(f"{CONSUMER_TOPIC}:3", "fuzz-t0:2", "fuzz-t1:1")).start()
    consumer = CommittingConsumer(daemon.bootstrap)
    sampler: RssSampler | None = None
    try:
        assert daemon.process is not None
        consumer.start()
        wait_for(lambda: consumer.commits >= 1, 30, "the consumer's first commit")
        sampler = RssSampler(daemon.process.pid)
        sampler.start()
        report = Fuzzer(daemon, seed, lanes=lanes).run(frames, max_seconds)
        commits = consumer.commits
        if daemon.process.poll() is None:
            wait_for(lambda: consumer.commits > commits, 10, "a commit after the fuzzing")  # still in service
        sampler.stop()
        report.rss_kb = sampler.samples
        report.rss_limit_kb = rss_limit_mb * 1024
        _judge(report, daemon, consumer)  # before the consumer leaves its group
        consumer.close()
        return report
    finally:
        try:
            if sampler is not None:
                sampler.stop()
            if consumer._thread.is_alive():
                consumer.close()
        finally:
            daemon.stop()  # whatever failed above: never leave the daemon process behind


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--frames", type=int, default=100_000)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--max-seconds", type=float, default=6 * 3600)
    parser.add_argument("--rss-limit-mb", type=int, default=400)
    parser.add_argument("--lanes", type=int, default=8)
    parser.add_argument("--workdir", type=Path, default=None, help="keep the daemon's data and log here")
    args = parser.parse_args(argv)
    workdir = args.workdir or Path(tempfile.mkdtemp(prefix="kgc-fuzz-"))
    report = run(workdir, args.frames, args.seed, args.max_seconds, args.rss_limit_mb, args.lanes)
    print(report.summary())
    print("outcomes by mutation:", dict(sorted(report.outcomes.items())))
    print(f"daemon log: {workdir / 'kgc.log'}")
    failures = report.failures()
    for failure in failures:
        print("FAIL:", failure)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
