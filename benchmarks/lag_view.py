"""The cost of a lag view (``runtime.lag.group_lag``): what one ``GET /v1/lag`` or one ``/metrics`` scrape spends on
the event loop per group partition, against a broker whose partitions hold many batches (the time lag is a bisection
over the batch index).

    python -m benchmarks.lag_view [--groups 100] [--partitions 50] [--batches 10000]
"""

from __future__ import annotations

import argparse
import time

from broker.partitions import Broker, MemoryDataLog, PartitionSnapshot
from broker.records import TopicCreated
from broker.topics import TopicRegistry
from coordinator.offsets import OffsetAndMetadata
from runtime.lag import group_lag


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--groups", type=int, default=100)
    parser.add_argument("--partitions", type=int, default=50)
    parser.add_argument("--batches", type=int, default=10_000, help="batches of 10 records per partition")
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args()
    partitions, batches = args.partitions, args.batches
    broker = Broker(TopicRegistry(auto_create=False), MemoryDataLog(), lambda: 0)
    index = [(i * 10, i * 10 + 9, i, 100, i) for i in range(batches)]
    broker.load(
        [TopicCreated("t", partitions, (), 0)],
        [PartitionSnapshot("t", p, 0, 0, batches * 10, index) for p in range(partitions)],
    )
    end = batches * 10
    groups = {
        f"g{g}": {("t", p): OffsetAndMetadata((g * 997 + p * 131) % end, -1, "", 0, None) for p in range(partitions)}
        for g in range(args.groups)
    }
    best = float("inf")
    rows = 0
    for _ in range(args.rounds):
        start = time.perf_counter()
        rows = sum(len(group_lag(gid, committed, None, broker, 10**12).partitions) for gid, committed in groups.items())
        best = min(best, time.perf_counter() - start)
    print(f"{args.groups} groups x {partitions} partitions = {rows} rows, {batches} batches a partition: "
          f"best of {args.rounds} {best * 1000:.1f} ms, {best / rows * 1e6:.2f} us a row")  # fmt: skip


if __name__ == "__main__":
    main()
