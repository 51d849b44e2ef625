"""Prometheus series of the Burrow-style evaluation (``runtime.lag_evaluation``), computed at scrape time.

* ``kgc_groups_by_status{status}`` - groups with commit windows, by status (OK, WARN, ERR). Always reported.
* ``kgc_group_status{group,status}`` - 1 for the group's status and 0 for the other three (NOTFOUND never
  appears: a group without windows is not reported): alert on ``kgc_group_status{status="ERR"} == 1``.
* ``kgc_group_partitions_by_status{group,status}`` - the group's partitions by partition status (OK, WARN, STOP,
  STALL, REWIND).

The two per-group families follow ``[http] per_group_metrics`` like the other per-group series. A scrape evaluates
every group once: partitions x ``intervals`` steps, none of it on a request path. (Burrow's own exporter reports
the status as a number, ``burrow_kafka_consumer_status`` 0-3; a state set with the name in a label reads without
the table.)
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator

from prometheus_client.core import GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

from .lag_evaluation import GroupStatus, LagEvaluator, PartitionStatus

_GROUP_STATUSES = (GroupStatus.OK, GroupStatus.WARN, GroupStatus.ERR)


class LagStatusCollector(Collector):
    def __init__(self, evaluator: LagEvaluator, *, per_group: bool) -> None:
        self._evaluator = evaluator
        self._per_group = per_group

    def describe(self) -> Iterable[Metric]:
        return []  # computed at scrape time

    def collect(self) -> Iterator[Metric]:
        by_status = dict.fromkeys(_GROUP_STATUSES, 0)
        group_status = GaugeMetricFamily(
            "kgc_group_status",
            "Burrow-style status of each group: 1 for its status (OK, WARN, ERR), 0 for the others.",
            labels=["group", "status"],
        )
        partitions = GaugeMetricFamily(
            "kgc_group_partitions_by_status",
            "Partitions of each group by Burrow-style partition status (OK, WARN, STOP, STALL, REWIND).",
            labels=["group", "status"],
        )
        for group_id in self._evaluator.group_ids():
            ev = self._evaluator.evaluate(group_id)
            if ev.status is GroupStatus.NOTFOUND:
                continue
            by_status[ev.status] += 1
            if not self._per_group:
                continue
            for status in _GROUP_STATUSES:
                group_status.add_metric([group_id, status.value], 1.0 if status is ev.status else 0.0)
            counts = dict.fromkeys(PartitionStatus, 0)
            for p in ev.partitions:
                counts[p.status] += 1
            for pstatus, n in counts.items():
                partitions.add_metric([group_id, pstatus.value], n)
        total = GaugeMetricFamily(
            "kgc_groups_by_status", "Groups with commit windows, by Burrow-style status.", labels=["status"]
        )
        for status, n in by_status.items():
            total.add_metric([status.value], n)
        yield total
        if self._per_group:
            yield group_status
            yield partitions
