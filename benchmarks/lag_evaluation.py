"""Cost of the Burrow-style evaluator (runtime/lag_evaluation.py): per durable commit record, per evaluation, and a
/metrics scrape of its series. CPU time (``time.process_time``), best of 5, so the load of a shared machine counts
less than in wall time. Run: ``python -m benchmarks.lag_evaluation [GROUPS] [PARTITIONS]``."""

from __future__ import annotations

import sys
import time
from collections.abc import Callable

from prometheus_client import CollectorRegistry, generate_latest

from coordinator.records import OffsetCommitRecord, new_offset_commit_record
from runtime.lag_evaluation import LagEvaluator, LagRules
from runtime.lag_metrics import LagStatusCollector
from runtime.metrics import Metrics

ROUNDS = 12  # commits per partition: more than the window (10)
T0 = 1_000_000


def best(fn: Callable[[], object], runs: int = 5) -> float:
    times = []
    for _ in range(runs):
        t = time.process_time()
        fn()
        times.append(time.process_time() - t)
    return min(times)


def main(groups: int = 1000, partitions: int = 10) -> None:
    ends = {("t", p): 5000 for p in range(partitions)}
    now = [T0]
    batches: list[list[OffsetCommitRecord]] = [
        [new_offset_commit_record(f"g{g}", "t", p, offset=r * 100, leader_epoch=-1, metadata=None,
                                  commit_timestamp_ms=T0 + r * 1000, expire_timestamp_ms=None, member_id="m",
                                  generation_id=1)
         for g in range(groups) for p in range(partitions)]
        for r in range(ROUNDS)
    ]  # fmt: skip
    n = groups * partitions * ROUNDS
    evaluator = LagEvaluator(lambda: now[0], lambda t, p: ends.get((t, p)), LagRules())

    def feed() -> None:
        nonlocal evaluator
        evaluator = LagEvaluator(lambda: now[0], lambda t, p: ends.get((t, p)), LagRules())
        for b in batches:
            evaluator.on_durable(b)

    metrics = Metrics()

    def feed_metrics() -> None:
        for b in batches:
            metrics.on_durable(b)

    print(f"on_durable: {best(feed) / n * 1e6:.2f} us CPU per commit record "
          f"(Metrics.on_durable on the same records: {best(feed_metrics) / n * 1e6:.2f} us)")  # fmt: skip
    feed()
    now[0] = T0 + (ROUNDS - 1) * 1000 + 9_000  # as long after the last commit as the window spans: every rule runs
    d = best(lambda: [evaluator.evaluate(f"g{g}") for g in range(groups)])
    print(f"evaluate, every partition lagging: {d / groups * 1e3:.3f} ms per group of {partitions} partitions, "
          f"{d * 1e6 / (groups * partitions):.1f} us per partition")  # fmt: skip
    registry = CollectorRegistry(auto_describe=False)
    registry.register(LagStatusCollector(evaluator, per_group=True))
    print(f"scrape of {groups} groups x {partitions} partitions: {best(lambda: generate_latest(registry)) * 1e3:.0f} "
          "ms CPU")  # fmt: skip


if __name__ == "__main__":
    main(*(int(a) for a in sys.argv[1:3]))
