"""runtime.record_stream.RecordStream: appends to the log and tells its listeners (appended; durable when wanted)."""

from __future__ import annotations

from collections.abc import Sequence

from coordinator.record_log import MemoryLog, WriteFailure
from coordinator.records import OffsetCommitRecord, Record
from protocol.errors import ErrorCode
from runtime.record_stream import RecordStream
from tests.storage.records_gen import commit, group_record


class Recorder:
    def __init__(self, events: list[str], name: str, durable_types: frozenset[type]) -> None:
        self.events, self.name, self.durable_types = events, name, durable_types

    def on_append(self, records: Sequence[Record]) -> None:
        self.events.append(f"{self.name} append {len(records)}")

    def on_durable(self, records: Sequence[Record]) -> None:
        self.events.append(f"{self.name} durable {len(records)}")


def test_listeners_see_appends_and_only_wanted_batches_once_durable_before_the_caller() -> None:
    log, events = MemoryLog(auto_commit=False), []
    stream = RecordStream(log, Recorder(events, "m", frozenset({OffsetCommitRecord})))
    stream.listen(Recorder(events, "h", frozenset()))
    done: list[WriteFailure | None] = []

    def on_done(error: WriteFailure | None) -> None:
        events.append("caller")
        done.append(error)

    stream.append([group_record("g", 1, [], 0)], on_done)
    stream.append([commit("g", "t", 0, 5, 0), commit("g", "t", 1, 6, 0)], on_done)
    stream.append([commit("g", "t", 0, 7, 0)], on_done)
    assert events == ["m append 1", "h append 1", "m append 2", "h append 2", "m append 1", "h append 1"]
    events.clear()
    log.commit(2)
    assert events == ["caller", "m durable 2", "h durable 2", "caller"]
    events.clear()
    log.fail(ErrorCode.coordinator_not_available)  # a failed batch is never durable
    assert events == ["caller"] and done[-1] is WriteFailure.UNAVAILABLE
    assert len(log.records) == 3
