"""Polling with deadlines, and real-client group members that run their poll loops in background threads."""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

T = TypeVar("T")


def wait_for(condition: Callable[[], T], timeout: float, what: str, interval: float = 0.05) -> T:
    """Poll ``condition`` until it returns something truthy; fail with ``what`` after ``timeout`` seconds."""
    deadline = time.monotonic() + timeout
    last: Any = None
    while True:
        try:
            last = condition()
        except Exception as exc:  # a client may raise while the group settles; keep polling
            last = exc
        else:
            if last:
                return last
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout}s waiting for {what} (last: {last!r})")
        time.sleep(interval)


async def stop_aiokafka(consumer: Any) -> None:
    """``AIOKafkaConsumer.stop``, tolerating aiokafka 0.14.0's re-raised cancellation: ``Fetcher.close`` awaits the
    fetch tasks it cancelled, and one cancelled in its retry back-off raises ``CancelledError`` out of ``stop``. By
    then the consumer has left its group; only the client's connections are left to close."""
    try:
        await consumer.stop()
    except asyncio.CancelledError:
        await consumer._client.close()


class Member:
    """A consumer running in its own thread: ``assignment`` is a snapshot of the partitions it owns."""

    name = "member"

    def __init__(self) -> None:
        self.assignment: frozenset[int] = frozenset()
        self.error: BaseException | None = None
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._main, name=self.name, daemon=True)
        self._ready = threading.Event()

    def start(self) -> None:
        self._thread.start()
        if not self._ready.wait(30):
            raise AssertionError(f"{self.name} did not start")
        if self.error is not None:
            raise self.error

    def close(self, timeout: float = 30) -> None:
        """Stop polling and close the client (it leaves the group)."""
        self._stop.set()
        self._thread.join(timeout)
        assert not self._thread.is_alive(), f"{self.name} did not close"

    def generation(self) -> int:
        raise NotImplementedError

    def _main(self) -> None:
        raise NotImplementedError


class KafkaPythonMember(Member):
    name = "kafka-python"
    client_id = "kp-member"

    def __init__(self, bootstrap: str, group: str, topic: str, **config: Any) -> None:
        super().__init__()
        self.args = (bootstrap, group, topic, config)
        self.consumer: Any = None

    def generation(self) -> int:
        return int(self.consumer._coordinator._generation.generation_id)

    def _main(self) -> None:
        from kafka import KafkaConsumer
        from kafka.coordinator.assignors.roundrobin import RoundRobinPartitionAssignor

        bootstrap, group, topic, config = self.args
        try:
            self.consumer = KafkaConsumer(
                bootstrap_servers=bootstrap,
                group_id=group,
                client_id=self.client_id,
                partition_assignment_strategy=[RoundRobinPartitionAssignor],
                session_timeout_ms=6000,
                heartbeat_interval_ms=300,
                fetch_max_wait_ms=100,
                enable_auto_commit=False,
                **config,
            )
            self.consumer.subscribe([topic])
        except BaseException as exc:
            self.error = exc
            return
        finally:
            self._ready.set()
        try:
            while not self._stop.is_set():
                self.consumer.poll(timeout_ms=100)
                self.assignment = frozenset(tp.partition for tp in self.consumer.assignment())
                self._after_poll()
        finally:
            self.consumer.close()
            self.assignment = frozenset()

    def _after_poll(self) -> None:
        """Runs on the consumer's own thread after every poll (kafka-python is not thread-safe)."""


class ConfluentMember(Member):
    name = "confluent-kafka"

    def __init__(self, bootstrap: str, group: str, topic: str, **config: Any) -> None:
        super().__init__()
        self.args = (bootstrap, group, topic, config)
        self.consumer: Any = None

    def generation(self) -> int:
        raise NotImplementedError("librdkafka does not expose the generation")

    def _main(self) -> None:
        from confluent_kafka import Consumer

        bootstrap, group, topic, config = self.args
        try:
            self.consumer = Consumer(
                {
                    "bootstrap.servers": bootstrap,
                    "group.id": group,
                    "client.id": "cf-member",
                    "partition.assignment.strategy": "roundrobin",
                    "session.timeout.ms": 6000,
                    "heartbeat.interval.ms": 300,
                    "enable.auto.commit": False,
                    **config,
                }
            )
            self.consumer.subscribe([topic])
        except BaseException as exc:
            self.error = exc
            return
        finally:
            self._ready.set()
        try:
            while not self._stop.is_set():
                self.consumer.poll(0.1)
                self.assignment = frozenset(tp.partition for tp in self.consumer.assignment())
        finally:
            self.consumer.close()
            self.assignment = frozenset()


class AiokafkaMember(Member):
    name = "aiokafka"

    def __init__(self, bootstrap: str, group: str, topic: str, **config: Any) -> None:
        super().__init__()
        self.args = (bootstrap, group, topic, config)
        self.consumer: Any = None

    def generation(self) -> int:
        return int(self.consumer._coordinator.generation)

    def _main(self) -> None:
        asyncio.run(self._amain())

    async def _amain(self) -> None:
        from aiokafka import AIOKafkaConsumer

        bootstrap, group, topic, config = self.args
        try:
            self.consumer = AIOKafkaConsumer(
                topic,
                bootstrap_servers=bootstrap,
                group_id=group,
                client_id="aio-member",
                session_timeout_ms=6000,
                heartbeat_interval_ms=300,
                fetch_max_wait_ms=100,
                enable_auto_commit=False,
                **config,
            )
            await self.consumer.start()
        except BaseException as exc:
            self.error = exc
            return
        finally:
            self._ready.set()
        try:
            while not self._stop.is_set():
                await self.consumer.getmany(timeout_ms=100)
                self.assignment = frozenset(tp.partition for tp in self.consumer.assignment())
        finally:
            await stop_aiokafka(self.consumer)
            self.assignment = frozenset()


class ChildMember:
    """A confluent-kafka member in another process (tests/e2e/child_member.py), so it can be SIGKILLed;
    ``assignment`` is the last one it printed (a JSON line per rebalance)."""

    def __init__(self, bootstrap: str, group: str, topic: str, session_timeout_ms: int) -> None:
        script = Path(__file__).with_name("child_member.py")
        self.assignment: frozenset[int] = frozenset()
        self.process = subprocess.Popen(
            [sys.executable, str(script), bootstrap, group, topic, str(session_timeout_ms)],
            stdout=subprocess.PIPE,
            text=True,
        )
        threading.Thread(target=self._follow, name="child-reader", daemon=True).start()

    def _follow(self) -> None:
        assert self.process.stdout is not None
        for line in self.process.stdout:
            self.assignment = frozenset(json.loads(line))

    def kill(self) -> None:
        """SIGKILL: no LeaveGroup, the coordinator only notices when the session expires."""
        if self.process.poll() is None:
            self.process.kill()
        self.process.wait(10)
        self.assignment = frozenset()
