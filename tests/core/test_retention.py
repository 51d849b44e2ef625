"""Offset retention and group expiry (KIP-211) on a manual clock, through the facade and the real GroupManager."""

from __future__ import annotations

from coordinator.group import GroupState
from coordinator.group_coordinator import GroupCoordinator
from coordinator.messages import FetchedOffset
from coordinator.records import (
    GroupRemovalCause,
    GroupTombstone,
    OffsetCommitRecord,
    OffsetRemovalCause,
    OffsetTombstone,
    Record,
)
from coordinator.retention import CLEANUP_TIMER_KEY
from protocol.errors import ErrorCode
from tests.core.conftest import Env, form_stable_group, join_new, leave
from tests.core.test_coordinator import commit, commit_request, fetch, make_coordinator, subscription

RETENTION = 100_000
INTERVAL = 10_000
EXPIRED = OffsetRemovalCause.EXPIRED


def setup(*, auto_commit: bool = True) -> tuple[Env, GroupCoordinator]:
    return make_coordinator(
        auto_commit=auto_commit, offsets_retention_ms=RETENTION, offsets_retention_check_interval_ms=INTERVAL
    )


def cleanup(env: Env, coord: GroupCoordinator) -> list[Record]:
    """One cleanup pass; what it returns must be exactly what it wrote to the log (auto-commit log)."""
    records = coord.retention.run_once()
    assert env.take() == records
    return records


def at(env: Env, ms: int) -> None:
    """Move the clock without firing timers (the tests run the cleanup pass themselves)."""
    env.clock.set(ms)


# ------------------------------------------------------------------------------------------------ Empty groups


def test_offsets_of_empty_group_expire_after_retention_since_it_became_empty() -> None:
    env, coord = setup()
    g = form_stable_group(env, "g", 1)
    committed_at = env.now()
    commit(coord, "g", ("t", 0, 1), ("t", 1, 2), generation=g.generation, member_id=g.leader)
    env.advance(5_000)
    leave(env.gm, "g", g.leader)
    empty_since = env.now()
    assert env.group("g").state is GroupState.EMPTY
    env.take()

    at(env, committed_at + RETENTION)  # retention passed since the commit, not since the group became Empty
    assert cleanup(env, coord) == []
    at(env, empty_since + RETENTION - 1)
    assert cleanup(env, coord) == []
    at(env, empty_since + RETENTION)
    now = env.now()
    assert cleanup(env, coord) == [
        OffsetTombstone("g", "t", 0, EXPIRED, now),
        OffsetTombstone("g", "t", 1, EXPIRED, now),
        GroupTombstone("g", GroupRemovalCause.EXPIRED, now),
    ]
    assert coord.groups.group("g") is None
    assert fetch(coord, "g", None) == []


def test_empty_group_without_offsets_is_deleted_at_next_cleanup() -> None:
    env, coord = setup()
    coord.on_loaded()
    loaded = env.now()
    g = form_stable_group(env, "g", 1)
    leave(env.gm, "g", g.leader)
    assert env.group("g").state is GroupState.EMPTY
    env.take()
    env.advance(INTERVAL)  # whatever the retention: nothing to keep the group for
    assert env.take() == [GroupTombstone("g", GroupRemovalCause.EXPIRED, loaded + INTERVAL)]  # the first pass
    assert coord.groups.group("g") is None


def test_stable_group_without_offsets_is_not_deleted() -> None:
    env, coord = setup()
    form_stable_group(env, "g", 1, session_timeout_ms=1_800_000)
    env.take()
    at(env, env.now() + 10 * RETENTION)
    assert cleanup(env, coord) == []
    assert coord.groups.group("g") is not None


# ---------------------------------------------------------------------------------------------- simple groups


def test_simple_group_offsets_expire_by_commit_time_one_by_one() -> None:
    env, coord = setup()
    t0 = env.now()
    commit(coord, "s", ("t", 0, 1))
    at(env, t0 + 30_000)
    commit(coord, "s", ("t", 1, 2))
    env.take()
    at(env, t0 + RETENTION)
    assert cleanup(env, coord) == [OffsetTombstone("s", "t", 0, EXPIRED, t0 + RETENTION)]
    assert fetch(coord, "s", None) == [FetchedOffset("t", 1, 2)]
    assert coord.groups.group("s") is not None  # an offset survived
    at(env, t0 + 30_000 + RETENTION)
    assert cleanup(env, coord) == [
        OffsetTombstone("s", "t", 1, EXPIRED, env.now()),
        GroupTombstone("s", GroupRemovalCause.EXPIRED, env.now()),
    ]
    assert coord.groups.group("s") is None


def test_explicit_expire_timestamp_from_v2_retention_time() -> None:
    env, coord = setup()
    t0 = env.now()
    commit(coord, "s", ("t", 0, 1), version=2, retention_ms=1_000)
    commit(coord, "s", ("t", 1, 1), version=2)  # no retention time: the broker retention applies
    env.take()
    at(env, t0 + 999)
    assert cleanup(env, coord) == []
    at(env, t0 + 1_000)
    assert cleanup(env, coord) == [OffsetTombstone("s", "t", 0, EXPIRED, t0 + 1_000)]


# --------------------------------------------------------------------------------------------- non-empty groups


def test_stable_consumer_group_subscribed_topics_never_expire() -> None:
    env, coord = setup()
    g = form_stable_group(env, "g", 2, protocols=[("range", subscription("t"))], session_timeout_ms=1_800_000)
    t0 = env.now()
    commit(coord, "g", ("t", 0, 1), ("t", 1, 1), ("old", 0, 9), generation=g.generation, member_id=g.leader)
    env.take()
    at(env, t0 + 50 * RETENTION)
    assert cleanup(env, coord) == [OffsetTombstone("g", "old", 0, EXPIRED, env.now())]
    at(env, t0 + 100 * RETENTION)
    assert cleanup(env, coord) == []
    assert fetch(coord, "g", None) == [FetchedOffset("t", 0, 1), FetchedOffset("t", 1, 1)]
    assert env.group("g").state is GroupState.STABLE


def test_consumer_group_with_unparsable_subscriptions_keeps_everything() -> None:
    env, coord = setup()
    g = form_stable_group(env, "g", 1, session_timeout_ms=1_800_000)  # default metadata is not a subscription
    commit(coord, "g", ("t", 0, 1), generation=g.generation, member_id=g.leader)
    env.take()
    at(env, env.now() + 10 * RETENTION)
    assert cleanup(env, coord) == []


def test_rebalancing_group_offsets_do_not_expire() -> None:
    env, coord = setup()
    g = form_stable_group(env, "g", 1, protocols=[("range", subscription("t"))])
    commit(coord, "g", ("other", 0, 1), generation=g.generation, member_id=g.leader)
    join_new(env.gm, "g", client_id="newcomer", protocols=[("range", subscription("t"))])
    assert env.group("g").state is GroupState.PREPARING_REBALANCE
    env.take()
    at(env, env.now() + 10 * RETENTION)
    assert cleanup(env, coord) == []


# ------------------------------------------------------------------------------------ scheduling and durability


def test_cleanup_runs_every_interval_after_load() -> None:
    env, coord = setup()
    coord.on_loaded()
    t0 = env.now()
    commit(coord, "s", ("t", 0, 1))
    env.take()
    env.advance(RETENTION - 1)
    assert env.take() == []
    assert env.timer.is_scheduled(CLEANUP_TIMER_KEY)
    env.advance(INTERVAL)  # the first pass at or after t0 + RETENTION expires it
    expired_at = t0 + RETENTION  # passes run at t0 + k * INTERVAL and RETENTION is a multiple of it
    assert env.take() == [
        OffsetTombstone("s", "t", 0, EXPIRED, expired_at),
        GroupTombstone("s", GroupRemovalCause.EXPIRED, expired_at),
    ]
    assert env.timer.deadline(CLEANUP_TIMER_KEY) == expired_at + INTERVAL


def test_in_flight_commit_is_not_expired_and_keeps_group() -> None:
    env, coord = setup(auto_commit=False)
    t0 = env.now()
    coord.commit_offsets(commit_request("s", ("t", 0, 1), ("t", 1, 1)))
    env.log.commit()
    env.take()
    at(env, t0 + RETENTION)
    coord.commit_offsets(commit_request("s", ("t", 0, 2)))  # not yet durable
    records = coord.retention.run_once()
    assert records == [OffsetTombstone("s", "t", 1, EXPIRED, env.now())]
    env.log.commit()
    assert env.take() == [OffsetCommitRecord("s", "t", 0, 2, -1, "", env.now(), None, "", -1), *records]
    assert fetch(coord, "s", None) == [FetchedOffset("t", 0, 2)]
    assert coord.groups.group("s") is not None


def test_cleanup_applies_only_when_durable_and_retries_after_failure() -> None:
    env, coord = setup(auto_commit=False)
    t0 = env.now()
    coord.commit_offsets(commit_request("s", ("t", 0, 1)))
    env.log.commit()
    env.take()
    at(env, t0 + RETENTION)
    first = coord.retention.run_once()
    assert len(first) == 2
    assert coord.groups.group("s") is None  # the group goes at once (group changes apply at once)
    assert coord.offsets.committed("s")  # its offsets only once the tombstones are durable
    env.log.fail(ErrorCode.coordinator_not_available)
    assert fetch(coord, "s", None) == [FetchedOffset("t", 0, 1)]
    assert coord.groups.group("s") is not None
    assert env.take() == []
    second = coord.retention.run_once()
    assert second == first
    env.log.commit()
    assert env.take() == second
    assert coord.groups.group("s") is None
    assert not coord.offsets.committed("s")


def test_group_with_in_flight_commit_on_new_partition_is_not_deleted() -> None:
    env, coord = setup(auto_commit=False)
    t0 = env.now()
    coord.commit_offsets(commit_request("s", ("t", 0, 1)))
    env.log.commit()
    at(env, t0 + RETENTION)
    coord.commit_offsets(commit_request("s", ("t", 5, 1)))  # not yet durable, a partition the group never had
    env.take()
    assert coord.retention.run_once() == [OffsetTombstone("s", "t", 0, EXPIRED, env.now())]
    env.log.commit()
    assert fetch(coord, "s", None) == [FetchedOffset("t", 5, 1)]
    assert env.take() == [
        OffsetCommitRecord("s", "t", 5, 1, -1, "", env.now(), None, "", -1),
        OffsetTombstone("s", "t", 0, EXPIRED, env.now()),
    ]
    assert coord.groups.group("s") is not None
