"""Burrow's rules on the commit windows of ``runtime.lag_evaluation``, fed through a real ``RecordStream`` over a
``MemoryLog``, with a manual clock and a log end the test moves by hand (what the broker's high watermark does)."""

from __future__ import annotations

import pytest

from coordinator.clock import ManualClock
from coordinator.record_log import MemoryLog
from coordinator.records import (
    GroupRemovalCause,
    OffsetRemovalCause,
    new_group_tombstone,
    new_offset_commit_record,
    new_offset_tombstone,
)
from runtime.lag_evaluation import (
    CommitSample,
    GroupStatus,
    LagEvaluator,
    LagRules,
    PartitionStatus,
    partition_status,
)
from runtime.record_stream import RecordStream

T0 = 1_767_225_600_000
STEP = 1_000  # one commit a second
GROUP = "g"


class World:
    def __init__(self, rules: LagRules | None = None) -> None:
        self.clock = ManualClock(T0)
        self.ends: dict[tuple[str, int], int] = {}
        self.evaluator = LagEvaluator(self.clock.now_ms, lambda t, p: self.ends.get((t, p)), rules)
        self.stream = RecordStream(MemoryLog(auto_commit=True, keep=False), self.evaluator)

    def produce(self, n: int, topic: str = "t", partition: int = 0) -> None:
        self.ends[(topic, partition)] = self.ends.get((topic, partition), 0) + n

    def commit(self, offset: int, topic: str = "t", partition: int = 0, group: str = GROUP) -> None:
        rec = new_offset_commit_record(
            group, topic, partition, offset=offset, leader_epoch=-1, metadata=None,
            commit_timestamp_ms=self.clock.now_ms(), expire_timestamp_ms=None, member_id="m", generation_id=1,
        )  # fmt: skip
        self.stream.append([rec])

    def tick(self, ms: int = STEP) -> None:
        self.clock.set(self.clock.now_ms() + ms)

    def status(self, topic: str = "t", partition: int = 0) -> PartitionStatus:
        ev = self.evaluator.evaluate(GROUP)
        return next(p.status for p in ev.partitions if (p.topic, p.partition) == (topic, partition))


def consume(w: World, rounds: int, produced: int, consumed: int, start: int = 0) -> int:
    """``rounds`` seconds of a consumer committing ``consumed`` more each second while ``produced`` arrive."""
    offset = start
    for _ in range(rounds):
        w.produce(produced)
        offset += consumed
        w.commit(offset)
        w.tick()
    return offset


def test_a_consumer_keeping_up_is_ok_and_its_window_fills() -> None:
    w = World()
    consume(w, 12, produced=10, consumed=10)
    ev = w.evaluator.evaluate(GROUP)
    assert (ev.status, ev.complete, ev.totallag) == (GroupStatus.OK, 1.0, 0)
    [p] = ev.partitions
    assert p.status is PartitionStatus.OK
    assert (p.start, p.end) == (CommitSample(30, T0 + 2 * STEP, 0), CommitSample(120, T0 + 11 * STEP, 0))


def test_lag_that_never_goes_down_is_warn() -> None:
    w = World()
    consume(w, 10, produced=12, consumed=10)  # falls 2 further behind each second
    ev = w.evaluator.evaluate(GROUP)
    assert ev.status is GroupStatus.WARN
    assert ev.partitions[0].status is PartitionStatus.WARN
    assert ev.totallag == 20 and ev.maxlag is not None and ev.maxlag.current_lag == 20


def test_lag_that_goes_down_once_in_the_window_is_ok() -> None:
    w = World()
    offset = consume(w, 9, produced=12, consumed=10)
    w.produce(1)
    w.commit(offset + 10)  # this commit's lag is lower than the one before
    assert w.status() is PartitionStatus.OK


def test_a_window_with_one_caught_up_commit_is_ok_even_if_lag_grows_after() -> None:
    w = World()
    offset = consume(w, 1, produced=10, consumed=10)  # lag 0 at this commit
    consume(w, 9, produced=12, consumed=10, start=offset)
    assert w.status() is PartitionStatus.OK


def test_offsets_not_moving_with_lag_is_stall() -> None:
    w = World()
    consume(w, 3, produced=10, consumed=5)
    for _ in range(7):
        w.produce(10)
        w.commit(15)  # the same offset, again and again, while lag grows
        w.tick()
    assert w.status() is PartitionStatus.WARN  # the 3 moving commits are still in the window
    for _ in range(3):
        w.produce(10)
        w.commit(15)
        w.tick()
    ev = w.evaluator.evaluate(GROUP)
    assert ev.partitions[0].status is PartitionStatus.STALL
    assert ev.status is GroupStatus.ERR


def test_no_commit_for_longer_than_the_window_spans_with_lag_is_stop() -> None:
    w = World(LagRules(recent_zero_lag_ms=0))
    consume(w, 10, produced=10, consumed=10)  # caught up at every commit; the window spans 9 s
    w.produce(50)  # the consumer is gone; producers go on
    w.tick(8 * STEP)  # 9 s after the last commit: not longer than the span yet
    assert w.status() is PartitionStatus.OK  # caught up at a commit of the window
    w.tick(2 * STEP)  # 11 s > 9 s
    ev = w.evaluator.evaluate(GROUP)
    assert ev.partitions[0].status is PartitionStatus.STOP
    assert ev.status is GroupStatus.ERR and ev.totallag == 50


def test_a_consumer_caught_up_recently_is_spared_stop() -> None:
    w = World(LagRules(recent_zero_lag_ms=30_000))
    consume(w, 10, produced=10, consumed=10)  # last commit caught up at T0 + 9 s
    w.produce(50)
    w.tick(20 * STEP)
    assert w.status() is PartitionStatus.OK
    w.tick(20 * STEP)  # the last time it was seen caught up is now 30+ s ago
    assert w.status() is PartitionStatus.STOP


def test_stop_without_lag_is_ok() -> None:
    w = World(LagRules(recent_zero_lag_ms=0))
    consume(w, 10, produced=10, consumed=10)
    w.tick(60 * STEP)  # nobody produces: an idle consumer of an idle topic is fine
    assert w.status() is PartitionStatus.OK


def test_an_offset_going_back_is_rewind_until_it_gets_back() -> None:
    w = World()
    offset = consume(w, 5, produced=10, consumed=8)  # lag 2, 4, 6, 8, 10
    w.produce(10)
    w.commit(offset - 30)  # a rewind
    w.tick()
    assert w.status() is PartitionStatus.REWIND
    assert w.evaluator.evaluate(GROUP).status is GroupStatus.ERR
    w.produce(10)
    w.commit(offset)  # back where it was before the rewind: recovered (and the lag went down: OK)
    w.tick()
    assert w.status() is PartitionStatus.OK


def test_recovery_to_ok_after_stop_when_the_consumer_catches_up() -> None:
    w = World(LagRules(recent_zero_lag_ms=0))
    offset = consume(w, 10, produced=10, consumed=10)
    w.produce(40)
    w.tick(20 * STEP)
    assert w.status() is PartitionStatus.STOP
    w.commit(offset + 40)  # it comes back and commits the log end
    assert w.status() is PartitionStatus.OK
    assert w.evaluator.evaluate(GROUP).status is GroupStatus.OK


def test_recovery_to_ok_after_stall_when_the_consumer_catches_up() -> None:
    w = World()
    for _ in range(10):
        w.produce(5)
        w.commit(0)
        w.tick()
    assert w.status() is PartitionStatus.STALL
    w.commit(50)
    assert w.status() is PartitionStatus.OK


def test_group_is_the_worst_partition_and_reports_totals_and_completeness() -> None:
    w = World()
    for second in range(10):
        w.produce(10, "t", 0)
        w.produce(10, "t", 1)
        w.commit((second + 1) * 10, "t", 0)  # keeps up
        w.commit(5, "t", 1)  # stuck at 5
        if second >= 5:
            w.produce(3, "u", 0)
            w.commit(second, "u", 0)  # joins late: half a window
        w.tick()
    ev = w.evaluator.evaluate(GROUP)
    by = {(p.topic, p.partition): p for p in ev.partitions}
    assert by[("t", 0)].status is PartitionStatus.OK
    assert by[("t", 1)].status is PartitionStatus.STALL
    assert by[("u", 0)].complete == 0.5
    assert ev.status is GroupStatus.ERR
    assert ev.complete == pytest.approx(2 / 3)
    assert ev.totallag == 0 + 95 + (15 - 9)
    assert ev.maxlag is not None and (ev.maxlag.topic, ev.maxlag.partition) == ("t", 1)
    assert [(p.topic, p.partition) for p in ev.problems()] == [("t", 1)]


def test_minimum_complete_keeps_a_young_window_ok() -> None:
    w = World(LagRules(minimum_complete=1.0))
    for _ in range(5):
        w.produce(5)
        w.commit(0)
        w.tick()
    assert w.status() is PartitionStatus.OK  # would be STALL: only half the window is there
    for _ in range(5):
        w.produce(5)
        w.commit(0)
        w.tick()
    assert w.status() is PartitionStatus.STALL


def test_allowed_lag_counts_as_caught_up() -> None:
    w = World(LagRules(allowed_lag=5))
    for _ in range(10):
        w.produce(10)
        w.commit(w.ends[("t", 0)] - 4)  # always 4 behind
        w.tick()
    assert w.status() is PartitionStatus.OK


def test_min_distance_merges_frequent_commits_keeping_the_earlier_time() -> None:
    w = World(LagRules(min_distance_ms=5_000))
    for i in range(10):
        w.produce(10)
        w.commit((i + 1) * 10)
        w.tick()
    ev = w.evaluator.evaluate(GROUP)
    [p] = ev.partitions
    # commits at 0..4 s merged into the one of 0 s, 5..9 s into the one of 5 s
    assert p.complete == 0.2
    assert p.start == CommitSample(50, T0, 0) and p.end == CommitSample(100, T0 + 5 * STEP, 0)


def test_the_window_keeps_the_last_intervals_commits() -> None:
    w = World(LagRules(intervals=3))
    consume(w, 7, produced=10, consumed=10)
    [p] = w.evaluator.evaluate(GROUP).partitions
    assert p.start is not None and p.start.offset == 50 and p.complete == 1.0


def test_tombstones_forget_partitions_and_groups() -> None:
    w = World()
    consume(w, 2, produced=10, consumed=10)
    w.commit(20, "t", 1)
    w.stream.append([new_offset_tombstone(GROUP, "t", 0, cause=OffsetRemovalCause.DELETED, now_ms=T0)])
    assert [(p.topic, p.partition) for p in w.evaluator.evaluate(GROUP).partitions] == [("t", 1)]
    w.stream.append([new_group_tombstone(GROUP, cause=GroupRemovalCause.DELETED, now_ms=T0)])
    assert w.evaluator.evaluate(GROUP).status is GroupStatus.NOTFOUND
    assert not w.evaluator.knows(GROUP) and w.evaluator.partitions() == 0


def test_a_failed_write_adds_nothing() -> None:
    w = World()
    log = MemoryLog(auto_commit=False, keep=False)
    stream = RecordStream(log, w.evaluator)
    rec = new_offset_commit_record(
        GROUP, "t", 0, offset=5, leader_epoch=-1, metadata=None, commit_timestamp_ms=T0, expire_timestamp_ms=None,
        member_id="m", generation_id=1,
    )  # fmt: skip
    stream.append([rec])
    assert not w.evaluator.knows(GROUP)  # not durable yet
    log.fail()
    assert not w.evaluator.knows(GROUP)
    stream.append([rec])
    log.commit()
    assert w.evaluator.knows(GROUP)


def test_seeded_offsets_start_a_window_with_unknown_lag() -> None:
    w = World(LagRules(recent_zero_lag_ms=0))
    w.ends[("t", 0)] = 100
    w.evaluator.seed([(GROUP, "t", 0, 60, T0 - 60_000)])
    ev = w.evaluator.evaluate(GROUP)
    [p] = ev.partitions
    assert p.start == CommitSample(60, T0 - 60_000, None) and p.current_lag == 40
    assert p.status is PartitionStatus.STOP  # lag, and silent since before the restart
    assert p.complete == 0.1


def test_unknown_group_is_notfound() -> None:
    assert World().evaluator.evaluate("nobody").status is GroupStatus.NOTFOUND


def test_rules_on_bare_windows() -> None:
    rules = LagRules()
    s = [CommitSample(10, 0, 5), CommitSample(20, 1_000, 5), CommitSample(30, 2_000, 5)]
    # equal lags: "never goes down" -> WARN (Burrow compares with <)
    assert partition_status(s, 5, 2_000, rules, False) is PartitionStatus.WARN
    # entries without a lag are skipped by the lag rules
    s2 = [CommitSample(10, 0, None), CommitSample(20, 1_000, 9), CommitSample(30, 2_000, 4)]
    assert partition_status(s2, 4, 2_000, rules, False) is PartitionStatus.OK
    # stop is checked before rewind
    s3 = [CommitSample(30, 0, 5), CommitSample(10, 1_000, 25)]
    assert partition_status(s3, 25, 5_000, rules, False) is PartitionStatus.STOP
    assert partition_status(s3, 25, 1_500, rules, False) is PartitionStatus.REWIND
