"""What rendering ``__consumer_offsets`` costs: time per durable commit (holding it back, encoding, the batch,
compaction amortised), the longest single compaction, and what stays in memory, in process (no daemon, no database).

    python -m benchmarks.offsets_topic [--commits 300000] [--groups 100] [--partitions 20] [--read-every N]

``--read-every N``: a reader looks at every partition every N calls (1: a Fetch is always parked on every partition,
so each commit is rendered at once, alone in its batch - the worst case; 0: nobody reads, commits are only held
back). The garbage collector is tuned as the daemon tunes it. ``--batch N``
gives N partitions of a group per call, as one OffsetCommit of N partitions does. ``--memory`` traces allocations
(tracemalloc: several times slower, so times are measured without it).
"""

from __future__ import annotations

import argparse
import gc
import time
import tracemalloc
from typing import Any

from broker.offsets_topic import OffsetsTopic
from broker.partitions import Broker, MemoryDataLog
from broker.topics import OFFSETS_TOPIC, TopicRegistry
from coordinator.records import new_offset_commit_record
from runtime.offsets_topic import OffsetsTopicRenderer, render_state


def _commit(group: str, partition: int, now: int) -> Any:
    return new_offset_commit_record(
        group, "orders", partition, offset=partition, leader_epoch=3, metadata="", commit_timestamp_ms=now,
        expire_timestamp_ms=None, member_id="", generation_id=-1,
    )  # fmt: skip


def _park(broker: Broker, index: int) -> None:
    broker.watch(OFFSETS_TOPIC, index, lambda: _park(broker, index))


def run(
    commits: int, groups: int, partitions: int, batch: int, read_every: int = 0, memory: bool = False
) -> dict[str, float]:
    now = [1_700_000_000_000]
    broker = Broker(TopicRegistry(), MemoryDataLog(), lambda: now[0])
    topic = OffsetsTopic(broker, 50, lambda: now[0], render_state)
    renderer = OffsetsTopicRenderer(topic, 50)
    longest = 0.0
    compact = topic.compact

    def timed_compact(index: int) -> None:
        nonlocal longest
        t = time.perf_counter()
        compact(index)
        longest = max(longest, time.perf_counter() - t)

    topic.compact = timed_compact  # type: ignore[method-assign]
    records = [[_commit(f"group-{g}", p, now[0]) for p in range(partitions)] for g in range(groups)]
    calls = commits // batch
    if read_every == 1:  # a Fetch parked on every partition, parked again as soon as it is answered
        for index in range(50):
            _park(broker, index)
    gc.collect()
    gc.freeze()  # as the daemon does once loaded (runtime.loop.tune_gc), with its gen0 threshold
    gc.set_threshold(50_000)
    if memory:
        tracemalloc.start()
    start = time.perf_counter()
    for i in range(calls):
        g = i % groups
        p = (i // groups * batch) % partitions
        renderer.on_durable(records[g][p : p + batch])
        now[0] += 1
        if read_every > 1 and not i % read_every:
            for index in range(50):  # a reader fetching every partition
                broker.partition(OFFSETS_TOPIC, index)
    elapsed = time.perf_counter() - start
    current, peak = tracemalloc.get_traced_memory() if memory else (0, 0)
    tracemalloc.stop()
    held = sum(topic.records_held(i) for i in range(50))
    return {
        "commits": calls * batch,
        "us_per_commit": elapsed / (calls * batch) * 1e6,
        "longest_compaction_ms": longest * 1000,
        "compactions": topic.compactions,
        "live_keys": sum(topic.live_keys(i) for i in range(50)),
        "records_held": held,
        "pending": sum(topic.pending(i) for i in range(50)),
        "bytes_held": topic.bytes_held(),
        **({"traced_mb": current / 1e6, "traced_peak_mb": peak / 1e6} if memory else {}),
    }


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--commits", type=int, default=300_000)
    parser.add_argument("--groups", type=int, default=100)
    parser.add_argument("--partitions", type=int, default=20)
    parser.add_argument("--batch", type=int, default=1)
    parser.add_argument("--read-every", type=int, default=0, help="every N calls, a reader looks at every partition")
    parser.add_argument("--memory", action="store_true", help="trace allocations (slows everything down)")
    a = parser.parse_args()
    for key, value in run(a.commits, a.groups, a.partitions, a.batch, a.read_every, a.memory).items():
        print(f"{key:>22} {value:,.2f}" if isinstance(value, float) else f"{key:>22} {value:,}")


if __name__ == "__main__":
    main()
