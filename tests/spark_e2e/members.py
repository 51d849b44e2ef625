"""Group members for the report end-to-end test: kafka-python and aiokafka consumers whose poll loop runs in a thread
and that commit on request (the clients are not thread-safe, so commits run in the poll thread), and a confluent-kafka
member in a child process (tests/e2e/child_member.py) that can be SIGKILLed.

The group's leader is an aiokafka consumer: kafka-python 3.0.12 as a rejoining leader intermittently never completes
the rejoin (see tests/durability/test_history.py), which this test reproduced (generation 2 never became Stable)."""

from __future__ import annotations

import asyncio
import queue
import threading
from concurrent.futures import Future
from typing import Any

from tests.e2e.helpers import stop_aiokafka


class Consumer:
    """``assignment`` (partition numbers), ``generation`` and ``member_id`` are what the client itself reports,
    refreshed after every poll. ``commit({partition: offset})`` returns once the coordinator acknowledged it."""

    def __init__(self, bootstrap: str, group: str, topic: str, instance_id: str | None = None) -> None:
        self.bootstrap, self.group, self.topic, self.instance_id = bootstrap, group, topic, instance_id
        self.assignment: frozenset[int] = frozenset()
        self.generation = -1
        self.member_id = ""
        self.error: BaseException | None = None
        self._requests: queue.Queue[tuple[dict[int, int], Future[None]]] = queue.Queue()
        self._leave_reason: str | None = None
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._main, name=f"consumer-{instance_id or 'dynamic'}", daemon=True)
        self._consumer: Any = None

    def start(self) -> Consumer:
        from kafka import KafkaConsumer
        from kafka.coordinator.assignors.roundrobin import RoundRobinPartitionAssignor

        extra = {"group_instance_id": self.instance_id} if self.instance_id else {}
        self._consumer = KafkaConsumer(
            bootstrap_servers=self.bootstrap,
            group_id=self.group,
            client_id="spark-e2e",
            partition_assignment_strategy=[RoundRobinPartitionAssignor],
            session_timeout_ms=6000,
            heartbeat_interval_ms=300,
            fetch_max_wait_ms=100,
            enable_auto_commit=False,
            **extra,
        )
        self._consumer.subscribe([self.topic])
        self._thread.start()
        return self

    def commit(self, offsets: dict[int, int], timeout: float = 20) -> None:
        done: Future[None] = Future()
        self._requests.put((offsets, done))
        done.result(timeout)

    def close(self, leave_reason: str | None = None, timeout: float = 30) -> None:
        """Stop polling and close (a dynamic member leaves; with ``leave_reason`` through LeaveGroup v5 carrying it;
        a static member does not leave, as kafka-python does)."""
        self._leave_reason = leave_reason
        self._stop.set()
        self._thread.join(timeout)
        assert not self._thread.is_alive(), "consumer did not close"

    def _main(self) -> None:
        from kafka import TopicPartition
        from kafka.structs import OffsetAndMetadata

        consumer = self._consumer
        try:
            while not self._stop.is_set():
                consumer.poll(timeout_ms=100)
                generation = consumer._coordinator._generation
                self.generation, self.member_id = int(generation.generation_id), str(generation.member_id)
                self.assignment = frozenset(tp.partition for tp in consumer.assignment())
                while not self._requests.empty():
                    offsets, done = self._requests.get()
                    try:
                        consumer.commit(
                            {TopicPartition(self.topic, p): OffsetAndMetadata(o, "", -1) for p, o in offsets.items()}
                        )
                    except BaseException as e:
                        done.set_exception(e)
                    else:
                        done.set_result(None)
            if self._leave_reason is not None:
                consumer._coordinator.maybe_leave_group(reason=self._leave_reason, timeout_ms=5000)
        except BaseException as e:
            self.error = e
        finally:
            try:
                consumer.close(autocommit=False)
            finally:
                self.assignment = frozenset()


class AioConsumer(Consumer):
    """The same interface with aiokafka (its own event loop in the thread)."""

    def __init__(self, bootstrap: str, group: str, topic: str) -> None:
        super().__init__(bootstrap, group, topic)
        self._ready = threading.Event()

    def start(self) -> AioConsumer:
        self._thread.start()
        if not self._ready.wait(30):
            raise AssertionError("aiokafka consumer did not start")
        if self.error is not None:
            raise self.error
        return self

    def _main(self) -> None:
        asyncio.run(self._amain())

    async def _amain(self) -> None:
        from aiokafka import AIOKafkaConsumer, TopicPartition
        from aiokafka.structs import OffsetAndMetadata

        consumer = AIOKafkaConsumer(
            self.topic,
            bootstrap_servers=self.bootstrap,
            group_id=self.group,
            client_id="spark-e2e-aio",
            session_timeout_ms=6000,
            heartbeat_interval_ms=300,
            fetch_max_wait_ms=100,
            enable_auto_commit=False,
        )
        try:
            await consumer.start()
        except BaseException as e:
            self.error = e
            return
        finally:
            self._ready.set()
        try:
            while not self._stop.is_set():
                await consumer.getmany(timeout_ms=100)
                coordinator = consumer._coordinator
                self.generation, self.member_id = int(coordinator.generation), str(coordinator.member_id)
                self.assignment = frozenset(tp.partition for tp in consumer.assignment())
                while not self._requests.empty():
                    offsets, done = self._requests.get()
                    try:
                        await consumer.commit(
                            {TopicPartition(self.topic, p): OffsetAndMetadata(o, "") for p, o in offsets.items()}
                        )
                    except BaseException as e:
                        done.set_exception(e)
                    else:
                        done.set_result(None)
        except BaseException as e:
            self.error = e
        finally:
            await stop_aiokafka(consumer)
            self.assignment = frozenset()
