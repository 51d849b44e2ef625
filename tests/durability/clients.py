"""kafka-python clients for the durability tests (a committer that records what was acknowledged, a group member)
and operator HTTP API reads."""

from __future__ import annotations

import json
import logging
import threading
import time
import urllib.error
import urllib.request
from dataclasses import dataclass, field
from typing import Any

from tests.e2e.helpers import wait_for


def http_get(base: str, path: str, timeout: float = 5) -> Any:
    with urllib.request.urlopen(base + path, timeout=timeout) as resp:
        return json.load(resp)


def http_post(base: str, path: str, body: dict[str, Any], timeout: float = 5) -> Any:
    req = urllib.request.Request(
        base + path, data=json.dumps(body).encode(), headers={"Content-Type": "application/json"}, method="POST"
    )
    with urllib.request.urlopen(req, timeout=timeout) as resp:
        return json.load(resp)


def stored_offsets(http_url: str, group: str) -> dict[tuple[str, int], int]:
    """The daemon's committed offsets of ``group`` (GET /v1/groups/{g}/offsets); {} for an unknown group."""
    try:
        body = http_get(http_url, f"/v1/groups/{group}/offsets")
    except urllib.error.HTTPError as e:
        if e.code == 404:
            return {}
        raise
    return {(o["topic"], o["partition"]): o["offset"] for o in body["offsets"]}


def ready(http_url: str) -> bool:
    try:
        return bool(http_get(http_url, "/readyz", timeout=2)["ready"])
    except (OSError, ValueError):
        return False


@dataclass
class CommitStats:
    acked: dict[tuple[str, int], int] = field(default_factory=dict)  # latest acknowledged offset per partition
    acked_all: dict[tuple[str, int], list[int]] = field(default_factory=dict)  # every acknowledged offset
    # Offsets whose commit() raised, per partition, in attempt order (each may or may not have been stored).
    unacked: dict[tuple[str, int], list[int]] = field(default_factory=dict)
    acks: int = 0
    failures: int = 0
    errors: list[str] = field(default_factory=list)
    # Error codes of OffsetCommit responses, by kafka-python error class name (seen through its debug log).
    response_errors: dict[str, int] = field(default_factory=dict)


class Committer:
    """One kafka-python group member (subscribe) in a thread: ``commit()`` of offset n+1 for every assigned partition,
    then n+2, ... An offset is acknowledged when ``commit()`` returned without raising. ``pause()`` finishes the
    commit in flight and only polls (heartbeats) afterwards; ``resume()`` goes on committing."""

    def __init__(self, bootstrap: str, group: str, topic: str, commit_timeout_ms: int = 1500, **config: Any) -> None:
        self.bootstrap, self.group, self.topic = bootstrap, group, topic
        self.commit_timeout_ms = commit_timeout_ms
        self.config = config
        self.stats = CommitStats()
        self.lock = threading.Lock()
        self.next_offset = 1
        self.consumer: Any = None
        self.fatal: BaseException | None = None
        self._log_handler: logging.Handler | None = None
        self._stop = threading.Event()
        self._run = threading.Event()
        self._idle = threading.Event()
        self._thread = threading.Thread(target=self._main, name="committer", daemon=True)

    def start(self) -> None:
        from kafka import KafkaConsumer

        self._log_handler = _CommitErrorHandler(self)
        logger = logging.getLogger("kafka.coordinator.consumer")
        logger.addHandler(self._log_handler)
        logger.setLevel(logging.DEBUG)

        self.consumer = KafkaConsumer(
            bootstrap_servers=self.bootstrap,
            group_id=self.group,
            client_id="durability-committer",
            enable_auto_commit=False,
            session_timeout_ms=10000,
            heartbeat_interval_ms=300,
            request_timeout_ms=3000,
            retry_backoff_ms=50,
            reconnect_backoff_ms=50,
            reconnect_backoff_max_ms=300,
            **self.config,
        )
        self.consumer.subscribe([self.topic])
        self._run.set()
        self._thread.start()

    def acks(self) -> int:
        with self.lock:
            return self.stats.acks

    def snapshot(self) -> CommitStats:
        with self.lock:
            return CommitStats(
                dict(self.stats.acked),
                {k: list(v) for k, v in self.stats.acked_all.items()},
                {k: list(v) for k, v in self.stats.unacked.items()},
                self.stats.acks,
                self.stats.failures,
                list(self.stats.errors),
                dict(self.stats.response_errors),
            )

    def pause(self, timeout: float = 30) -> None:
        self._idle.clear()
        self._run.clear()
        wait_for(lambda: self._idle.is_set() or self.fatal is not None, timeout, "committer paused")
        if self.fatal is not None:
            raise self.fatal

    def resume(self) -> None:
        self._run.set()

    def close(self) -> None:
        self._stop.set()
        self._run.set()
        self._thread.join(30)
        if self._log_handler is not None:
            logging.getLogger("kafka.coordinator.consumer").removeHandler(self._log_handler)
        assert not self._thread.is_alive(), "committer did not stop"

    def _main(self) -> None:
        from kafka.structs import OffsetAndMetadata

        consumer = self.consumer
        try:
            while not self._stop.is_set():
                if not self._run.is_set():
                    self._idle.set()
                    try:
                        consumer.poll(timeout_ms=50)
                    except Exception:  # the daemon may be down; keep the member alive when it is back
                        time.sleep(0.05)
                    continue
                try:
                    # While (re)joining, wait in poll: kafka-python 3.0.12 throws away a JoinGroup+SyncGroup that
                    # completed between two polls and joins again (join_group_async replaces a done join task
                    # without reading it), so with poll(0) and a coordinator that answers in well under a
                    # millisecond the leader of a one-member group rejoins forever. Joined: poll(0), commit.
                    consumer.poll(timeout_ms=200 if consumer._coordinator.need_rejoin() else 0)
                except Exception:
                    time.sleep(0.05)
                    continue
                partitions = sorted(consumer.assignment(), key=lambda tp: tp.partition)
                if not partitions:
                    time.sleep(0.01)
                    continue
                n = self.next_offset
                self.next_offset += 1
                try:
                    consumer.commit(
                        {tp: OffsetAndMetadata(n, "", -1) for tp in partitions}, timeout_ms=self.commit_timeout_ms
                    )
                except Exception as e:
                    with self.lock:
                        self.stats.failures += 1
                        if len(self.stats.errors) < 50:
                            self.stats.errors.append(f"{type(e).__name__}: {e}")
                        for tp in partitions:
                            self.stats.unacked.setdefault((tp.topic, tp.partition), []).append(n)
                else:
                    with self.lock:
                        self.stats.acks += 1
                        for tp in partitions:
                            self.stats.acked[(tp.topic, tp.partition)] = n
                            self.stats.acked_all.setdefault((tp.topic, tp.partition), []).append(n)
        except BaseException as e:  # a bug in the loop itself: surface it
            self.fatal = e
        finally:
            self._idle.set()
            consumer.close(autocommit=False)


class _CommitErrorHandler(logging.Handler):
    """kafka-python retries retriable OffsetCommit errors inside ``commit()``; its log says which code came back."""

    def __init__(self, committer: Committer) -> None:
        super().__init__(logging.DEBUG)
        self.committer = committer

    def emit(self, record: logging.LogRecord) -> None:
        if not str(record.msg).startswith("OffsetCommit for group") or not isinstance(record.args, tuple):
            return
        last = record.args[-1] if record.args else None
        if isinstance(last, str):  # kafka-python passes error_type.__name__
            name = last
        elif isinstance(last, type):
            name = last.__name__
        elif isinstance(last, BaseException):
            name = type(last).__name__
        else:
            return
        with self.committer.lock:
            errors = self.committer.stats.response_errors
            errors[name] = errors.get(name, 0) + 1


def check_read_back(stats: CommitStats, stored: dict[tuple[str, int], int]) -> list[str]:
    """Problems with ``stored`` given what was acknowledged: each partition's latest acknowledged offset must be read
    back, or a later offset whose commit was NOT acknowledged (it may have been stored before the crash)."""
    problems = []
    for tp, acked in sorted(stats.acked.items()):
        got = stored.get(tp)
        later_unacked = {o for o in stats.unacked.get(tp, []) if o > acked}
        if got is None:
            problems.append(f"{tp}: acknowledged {acked}, nothing stored")
        elif got < acked:
            problems.append(f"{tp}: acknowledged {acked}, stored {got} (an acknowledged commit was lost)")
        elif got != acked and got not in later_unacked:
            problems.append(f"{tp}: acknowledged {acked}, stored {got}, which no commit attempt after it sent")
    return problems


class KpMember:
    """A kafka-python group member polling in its own thread. ``close(leave_reason=...)`` leaves with a KIP-800
    reason (LeaveGroup v5); a static member (``group_instance_id``) closes without leaving, as kafka-python does."""

    def __init__(self, bootstrap: str, group: str, *, topics: list[str] | None = None, pattern: str | None = None,
                 **config: Any) -> None:  # fmt: skip
        self.bootstrap, self.group, self.topics, self.pattern = bootstrap, group, topics, pattern
        self.config = {
            "client_id": "durability-member",
            "session_timeout_ms": 6000,
            "heartbeat_interval_ms": 300,
            "fetch_max_wait_ms": 100,
            "enable_auto_commit": False,
            **config,
        }
        self.consumer: Any = None
        self.assignment: frozenset[tuple[str, int]] = frozenset()
        self.error: BaseException | None = None
        self.leave_reason: str | None = None
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._main, name="kp-member", daemon=True)

    def start(self) -> KpMember:
        from kafka import KafkaConsumer
        from kafka.coordinator.assignors.roundrobin import RoundRobinPartitionAssignor

        self.consumer = KafkaConsumer(
            bootstrap_servers=self.bootstrap,
            group_id=self.group,
            partition_assignment_strategy=[RoundRobinPartitionAssignor],
            **self.config,
        )
        if self.pattern is not None:
            self.consumer.subscribe(pattern=self.pattern)
        else:
            self.consumer.subscribe(self.topics)
        self._thread.start()
        return self

    @property
    def member_id(self) -> str:
        return str(self.consumer._coordinator._generation.member_id)

    @property
    def generation(self) -> int:
        return int(self.consumer._coordinator._generation.generation_id)

    def close(self, leave_reason: str | None = None) -> None:
        self.leave_reason = leave_reason
        self._stop.set()
        self._thread.join(30)
        assert not self._thread.is_alive(), "member did not close"
        if self.error is not None:
            raise self.error

    def _main(self) -> None:
        try:
            while not self._stop.is_set():
                self.consumer.poll(timeout_ms=100)
                self.assignment = frozenset((tp.topic, tp.partition) for tp in self.consumer.assignment())
            if self.leave_reason is not None:
                self.consumer._coordinator.maybe_leave_group(reason=self.leave_reason, timeout_ms=5000)
        except BaseException as e:
            self.error = e
        finally:
            self.consumer.close(autocommit=False)
            self.assignment = frozenset()
