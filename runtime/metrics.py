"""Prometheus metrics: hot-path hooks for the server and storage, and metrics derived from the record log.

Rules of this module:

* Everything lives in one ``CollectorRegistry`` per ``Metrics`` instance (not the process-global default), so tests
  and several daemons in one process never collide.
* Hooks called on the hot path: ``observe_request`` (every Kafka request) updates plain counters read at scrape
  time (``_RequestCollector``); ``observe_storage_write`` (per transaction) costs one dict lookup plus one
  prometheus observation: label children are cached per key, nothing is proportional to the number of groups.
* Rebalance, member-removal and offset-commit metrics are derived from the records the core appends (the records are
  the source of truth): ``Metrics`` listens to the ``runtime.record_stream.RecordStream`` the core appends to. The
  per-group ones are plain numbers rendered at scrape time with prometheus_client's exposition of a Counter or
  Histogram (prometheus_client children cost ~5 KB a group: a value and a lock per bucket).
* Group gauges (groups by state, members) are computed at scrape time from the live core, so joins and heartbeats
  pay nothing for them.
* Per-partition offsets (``kafka_consumergroup_group_offset``, kafka-lag-exporter's name and labels, and
  ``kgc_consumergroup_last_commit_age_seconds``) are read at scrape time from the live offsets store: commits pay
  nothing for them.
* Lag (kafka-lag-exporter's ``kafka_consumergroup_group_lag``, ``..._lag_seconds``, ``..._max_lag``,
  ``..._sum_lag``, ``kafka_partition_latest_offset``, ...) is computed at scrape time by ``runtime.lag``, the module
  the HTTP API and the CLI read too.
* Per-group labels (``group``) can be switched off for cardinality; the totals stay, and the per-partition series
  are then not reported at all.
* No ``*_created`` series (a process-wide prometheus_client switch): they double the series count for nothing here.
"""

from __future__ import annotations

from bisect import bisect_left
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any

from prometheus_client import CollectorRegistry, Counter, Histogram, disable_created_metrics, generate_latest
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, HistogramMetricFamily, Metric
from prometheus_client.exposition import CONTENT_TYPE_LATEST
from prometheus_client.registry import Collector
from prometheus_client.utils import floatToGoString

from coordinator.records import (
    GroupStabilized,
    GroupTombstone,
    JoinPhaseCompleted,
    MemberRemoved,
    OffsetCommitRecord,
    RebalanceStarted,
    Record,
)
from protocol.errors import ErrorCode

from .lag import GroupLag, partition_owners

__all__ = ["API_NAMES", "CONTENT_TYPE_LATEST", "ConnectionStats", "Metrics", "api_name"]

# Kafka api keys -> names (the ones a group coordinator sees; anything else is labelled with its number).
API_NAMES: dict[int, str] = {
    0: "Produce",
    1: "Fetch",
    2: "ListOffsets",
    3: "Metadata",
    8: "OffsetCommit",
    9: "OffsetFetch",
    10: "FindCoordinator",
    11: "JoinGroup",
    12: "Heartbeat",
    13: "LeaveGroup",
    14: "SyncGroup",
    15: "DescribeGroups",
    16: "ListGroups",
    17: "SaslHandshake",
    18: "ApiVersions",
    19: "CreateTopics",
    22: "InitProducerId",
    28: "TxnOffsetCommit",
    32: "DescribeConfigs",
    36: "SaslAuthenticate",
    42: "DeleteGroups",
    47: "OffsetDelete",
    60: "DescribeCluster",
    68: "ConsumerGroupHeartbeat",
    69: "ConsumerGroupDescribe",
}

_JOIN_GROUP = 11
# JoinGroup answers that turn a client away for its configuration (coordinator.groups logs each one).
_JOIN_REFUSALS = (
    int(ErrorCode.inconsistent_group_protocol),
    int(ErrorCode.invalid_session_timeout),
    int(ErrorCode.group_max_size_reached),
)

_STATES = ("Empty", "PreparingRebalance", "CompletingRebalance", "Stable", "Dead")

# Rebalances take from milliseconds (a static member rejoining) to minutes (rebalance timeouts).
_REBALANCE_BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300, 600)
_REQUEST_BUCKETS = (0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 1, 5, 30, 300)
_BATCH_BUCKETS = (1, 2, 5, 10, 20, 50, 100, 200, 500, 1000, 5000)
_WRITE_BUCKETS = (0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 10)


def api_name(api_key: int | str) -> str:
    if isinstance(api_key, str):
        return api_key
    return API_NAMES.get(api_key, str(api_key))


_HISTORY_TYPES = frozenset({RebalanceStarted, GroupStabilized, JoinPhaseCompleted, MemberRemoved, GroupTombstone})


class _GroupsCollector(Collector):
    """Groups by state and member counts, read from the live core at scrape time."""

    def __init__(self, source: Callable[[], Iterable[Any]], per_group: bool) -> None:
        self._source = source
        self._per_group = per_group

    def describe(self) -> Iterable[Metric]:
        return []  # computed at scrape time; describing would call the source at registration

    def collect(self) -> Iterator[Metric]:
        by_state = dict.fromkeys(_STATES, 0)
        members_total = 0
        per_group = GaugeMetricFamily(
            "kgc_group_members", "Members of each group (per-group label; can be switched off).", labels=["group"]
        )
        for group in self._source():
            state = getattr(group.state, "value", str(group.state))
            by_state[state] = by_state.get(state, 0) + 1
            n = len(group.members)
            members_total += n
            if self._per_group:
                per_group.add_metric([group.group_id], n)
        groups = GaugeMetricFamily("kgc_groups", "Groups by state.", labels=["state"])
        for state, count in by_state.items():
            groups.add_metric([state], count)
        yield groups
        yield GaugeMetricFamily("kgc_members", "Members of all groups.", value=members_total)
        if self._per_group:
            yield per_group


class _RequestCollector(Collector):
    """``kgc_requests_total`` (by api, error) and ``kgc_request_seconds`` (by api) from plain Python counters.

    The per-request hook (``Metrics.observe_request``) is on the hot path of every request: a bisect and a few list
    and dict increments here, instead of prometheus_client's locked Counter/Histogram children. Everything runs on
    the event loop thread, as the scrape does.
    """

    def __init__(self) -> None:
        # api -> [non-cumulative count per bucket (the last one is +Inf)..., sum of seconds]
        self.seconds: dict[int | str, list[float]] = {}
        self.counts: dict[tuple[int | str, int], int] = {}
        self.untimed: dict[int, Callable[[], int]] = {}  # api -> answered requests not yet in ``counts``

    def describe(self) -> Iterable[Metric]:
        return []

    def collect(self) -> Iterator[Metric]:
        requests = CounterMetricFamily("kgc_requests", "Kafka requests handled, by API and error code.",
                                       labels=["api", "error"])  # fmt: skip
        counts = dict(self.counts)
        for untimed_api, source in self.untimed.items():
            pending = source()
            if pending:
                counts[(untimed_api, 0)] = counts.get((untimed_api, 0), 0) + pending
        for (api, code), n in sorted(counts.items(), key=lambda kv: (str(kv[0][0]), kv[0][1])):
            requests.add_metric([api_name(api), _err(code)], n)
        yield requests
        refused = CounterMetricFamily(
            "kgc_join_refused",
            "JoinGroup requests refused for the client's configuration, by error (the same answers as "
            "kgc_requests_total{api=\"JoinGroup\"} with these errors; each logged, throttled, as 'JoinGroup refused').",
            labels=["error"],
        )
        for code in _JOIN_REFUSALS:
            refused.add_metric([_err(code)], counts.get((_JOIN_GROUP, code), 0))
        yield refused
        seconds = HistogramMetricFamily(
            "kgc_request_seconds",
            "Time from a request's arrival to its response (parked Join/Sync included), by API. Heartbeat answers "
            "are timed 1 in 64 (all are counted in kgc_requests_total).",
            labels=["api"],
        )
        bounds = [floatToGoString(b) for b in _REQUEST_BUCKETS] + ["+Inf"]  # type: ignore[no-untyped-call]
        for api, stats in sorted(self.seconds.items(), key=lambda kv: str(kv[0])):
            cumulative: list[tuple[str, float]] = []
            running = 0.0
            for bound, in_bucket in zip(bounds, stats[:-1], strict=True):
                running += in_bucket
                cumulative.append((bound, running))
            seconds.add_metric([api_name(api)], cumulative, sum_value=stats[-1])
        yield seconds


@dataclass
class ConnectionStats:
    """The Kafka listener's connections and limits at scrape time (``servers.kafka.listener.KafkaServer.stats``)."""

    open: int = 0
    inflight: int = 0  # requests queued on all connections (answers not written yet, parked ones included)
    queued_bytes: int = 0  # counted against queued.max.request.bytes
    muted: int = 0  # connections not read until queued.max.request.bytes has room
    muted_total: int = 0
    refused: dict[str, int] = field(default_factory=dict)  # limit -> connections closed as soon as accepted
    accept_waits: int = 0  # times a listener stopped accepting at max.connections or its own limit
    closed: dict[str, int] = field(default_factory=dict)  # cause -> connections closed
    limits: dict[str, int] = field(default_factory=dict)  # Kafka setting name -> configured value
    per_ip_overrides: dict[str, int] = field(default_factory=dict)


class _ConnectionCollector(Collector):
    """``kgc_connections`` and the listener's limits, use and refusals, read from the server at scrape time."""

    def __init__(self, source: Callable[[], ConnectionStats]) -> None:
        self._source = source

    def describe(self) -> Iterable[Metric]:
        return []

    def collect(self) -> Iterator[Metric]:
        stats = self._source()
        yield GaugeMetricFamily("kgc_connections", "Open Kafka client connections.", value=stats.open)
        yield GaugeMetricFamily(
            "kgc_inflight_requests", "Requests queued on all connections, not answered yet.", value=stats.inflight
        )
        yield GaugeMetricFamily(
            "kgc_queued_request_bytes",
            "Bytes of requests read but not dispatched (counted against queued.max.request.bytes).",
            value=stats.queued_bytes,
        )
        yield GaugeMetricFamily(
            "kgc_connections_muted", "Connections not read until queued.max.request.bytes has room.", value=stats.muted
        )
        yield CounterMetricFamily(
            "kgc_connection_mutes", "Times a connection was muted for queued.max.request.bytes.",
            value=stats.muted_total,
        )  # fmt: skip
        limits = GaugeMetricFamily("kgc_connection_limit", "Configured listener limits, by name.", labels=["name"])
        for name, value in sorted(stats.limits.items()):
            limits.add_metric([name], value)
        yield limits
        overrides = GaugeMetricFamily(
            "kgc_connection_limit_per_ip_override", "max.connections.per.ip.overrides, by address.", labels=["ip"]
        )
        for ip, value in sorted(stats.per_ip_overrides.items()):
            overrides.add_metric([ip], value)
        yield overrides
        refused = CounterMetricFamily(
            "kgc_connections_refused", "Connections closed as soon as accepted, by the limit reached.", labels=["limit"]
        )
        for limit in ("max.connections", "max.connections.per.ip"):  # max.connections: 0 since it waits instead
            refused.add_metric([limit], stats.refused.get(limit, 0))
        yield refused
        yield CounterMetricFamily(
            "kgc_connection_accept_waits",
            "Times a listener stopped accepting at max.connections or listener.name.<name>.max.connections "
            "(new clients wait in the listen backlog until a connection closes).",
            value=stats.accept_waits,
        )
        closed = CounterMetricFamily(
            "kgc_connections_closed",
            "Connections closed, by cause: idle, eof (client half-close), malformed, protocol (undecodable or "
            "unsupported request), error (no encodable answer), shutdown, client (closed by the client), sasl "
            "(failed or out-of-sequence SASL), reauth (SASL session expired), authentication (no principal mapping).",
            labels=["cause"],
        )
        for cause, n in sorted(stats.closed.items()):
            closed.add_metric([cause], n)
        yield closed


class _CommitCollector(Collector):
    """``kgc_offset_commits_total`` (by kind, and group unless per-group labels are off) from plain counters."""

    def __init__(self, per_group: bool) -> None:
        self.per_group = per_group
        self.counts: dict[tuple[str, str], int] = {}  # (kind, group or "") -> partition offsets committed

    def describe(self) -> Iterable[Metric]:
        return []

    def collect(self) -> Iterator[Metric]:
        labels = ["kind", "group"] if self.per_group else ["kind"]
        commits = CounterMetricFamily(
            "kgc_offset_commits",
            "Partition offsets committed (durably), by kind: member or admin (generation -1).",
            labels=labels,
        )
        for (kind, group), n in sorted(self.counts.items()):
            commits.add_metric([kind, group] if self.per_group else [kind], n)
        yield commits


class _LabelledCounter(Collector):
    """A counter family from a plain dict: label values -> count, exposed as prometheus_client's ``Counter`` of the
    same name, help and labels exposes it (children in the order their labels were first seen, values as floats).

    The per-group series (``kgc_rebalances_total``, ``kgc_member_removals_total``) were prometheus_client children:
    a ``MutexValue`` and its lock per series, kept for every group ever seen."""

    def __init__(self, name: str, documentation: str, labels: list[str]) -> None:
        self.name, self.documentation, self.labels = name, documentation, labels
        self.counts: dict[tuple[str, ...], int] = {}

    def inc(self, labels: tuple[str, ...]) -> None:
        counts = self.counts
        counts[labels] = counts.get(labels, 0) + 1

    def describe(self) -> Iterable[Metric]:
        return []

    def collect(self) -> Iterator[Metric]:
        family = CounterMetricFamily(self.name, self.documentation, labels=self.labels)
        for labels, n in list(self.counts.items()):
            family.add_metric(labels, float(n))
        yield family


class _LabelledHistogram(Collector):
    """A histogram family from plain lists: label values -> [count per bucket (non-cumulative; the last is +Inf)...,
    sum], exposed as prometheus_client's ``Histogram`` of the same name, help, labels and buckets exposes it (children
    in the order their labels were first seen; an unlabelled one exposes its zeros before any observation).

    ``kgc_rebalance_duration_seconds{group}`` was a prometheus_client histogram child per group: a ``MutexValue`` and
    a lock per bucket; with the group's counter child ~5.4 KB a group (540 bytes a member at 10 a group, measured by
    ``benchmarks.member_memory``). Here: a list of 18 numbers."""

    def __init__(self, name: str, documentation: str, labels: list[str], buckets: Sequence[float]) -> None:
        self.name, self.documentation, self.labels = name, documentation, labels
        self.buckets = tuple(buckets)
        self._bounds = [floatToGoString(b) for b in self.buckets] + ["+Inf"]  # type: ignore[no-untyped-call]
        self.series: dict[tuple[str, ...], list[float]] = {}
        if not labels:
            self.series[()] = self._new()

    def _new(self) -> list[float]:
        return [0] * (len(self.buckets) + 1) + [0.0]

    def observe(self, labels: tuple[str, ...], value: float) -> None:
        stats = self.series.get(labels)
        if stats is None:
            stats = self.series[labels] = self._new()
        stats[bisect_left(self.buckets, value)] += 1  # bucket i: bounds[i-1] < value <= bounds[i], as Histogram
        stats[-1] += value

    def describe(self) -> Iterable[Metric]:
        return []

    def collect(self) -> Iterator[Metric]:
        family = HistogramMetricFamily(self.name, self.documentation, labels=self.labels)
        bounds = self._bounds
        for labels, stats in list(self.series.items()):
            cumulative: list[tuple[str, float]] = []
            running = 0.0
            for bound, in_bucket in zip(bounds, stats[:-1], strict=True):
                running += in_bucket
                cumulative.append((bound, float(running)))
            family.add_metric(labels, cumulative, sum_value=stats[-1])
        yield family


# kafka-lag-exporter's labels for its per-partition consumer group series; ours use the same ones.
_PARTITION_LABELS = ["cluster_name", "group", "topic", "partition", "member_host", "consumer_id", "client_id"]


class _ConsumerGroupOffsetCollector(Collector):
    """Per partition: the committed offset (``kafka_consumergroup_group_offset``, kafka-lag-exporter's name and
    labels) and the age of the last commit (``kgc_consumergroup_last_commit_age_seconds``), read at scrape time from
    the live offsets store; the member labels name the member the partition is assigned to now (empty when none)."""

    def __init__(
        self, offsets: Any, group_of: Callable[[str], Any], cluster_name: str, now_ms: Callable[[], int]
    ) -> None:
        self._offsets = offsets  # coordinator.offsets.OffsetManager: group_ids(), committed(group_id)
        self._group_of = group_of
        self._cluster = cluster_name
        self._now_ms = now_ms

    def describe(self) -> Iterable[Metric]:
        return []

    def collect(self) -> Iterator[Metric]:
        offset = GaugeMetricFamily(
            "kafka_consumergroup_group_offset",
            "Last committed offset of each partition of each group (kafka-lag-exporter's metric).",
            labels=_PARTITION_LABELS,
        )
        age = GaugeMetricFamily(
            "kgc_consumergroup_last_commit_age_seconds",
            "Seconds since the last commit of each partition of each group (its commit timestamp).",
            labels=_PARTITION_LABELS,
        )
        now_ms = self._now_ms()
        cluster = self._cluster
        for group_id in list(self._offsets.group_ids()):
            committed = self._offsets.committed(group_id)
            if not committed:
                continue
            owners = partition_owners(self._group_of(group_id))
            for (topic, partition), stored in committed.items():
                member = owners.get((topic, partition))
                who = (member.client_host, member.member_id, member.client_id) if member is not None else ("", "", "")
                labels = [cluster, group_id, topic, str(partition), *who]
                offset.add_metric(labels, stored.offset)
                age.add_metric(labels, max(0, now_ms - stored.commit_timestamp_ms) / 1000)
        yield offset
        yield age


class _LagCollector(Collector):
    """kafka-lag-exporter's lag series, computed at scrape time by ``runtime.lag`` (the same numbers as the HTTP API
    and the CLI): per partition ``kafka_consumergroup_group_lag`` and ``_lag_seconds`` (NaN without a commit, as
    kafka-lag-exporter reports them), per group ``_max_lag``, ``_max_lag_seconds``, ``_sum_lag``, per group and
    topic ``_topic_sum_lag``, and per partition of those groups ``kafka_partition_latest_offset`` (the high
    watermark) and ``kafka_partition_earliest_offset`` (the log start). Labels as kafka-lag-exporter's code reports
    them (``Metrics.scala``)."""

    def __init__(self, source: Callable[[], Iterable[GroupLag]], cluster_name: str) -> None:
        self._source = source
        self._cluster = cluster_name

    def describe(self) -> Iterable[Metric]:
        return []

    def collect(self) -> Iterator[Metric]:
        cluster = self._cluster
        lag = GaugeMetricFamily("kafka_consumergroup_group_lag", "Group offset lag of a partition.",
                                labels=_PARTITION_LABELS)  # fmt: skip
        lag_s = GaugeMetricFamily(
            "kafka_consumergroup_group_lag_seconds",
            "Group time lag of a partition: now minus the broker append time of the first unconsumed message.",
            labels=_PARTITION_LABELS,
        )
        group_labels = ["cluster_name", "group"]
        max_lag = GaugeMetricFamily("kafka_consumergroup_group_max_lag", "Max group offset lag.", labels=group_labels)
        max_lag_s = GaugeMetricFamily(
            "kafka_consumergroup_group_max_lag_seconds", "Max group time lag.", labels=group_labels
        )
        sum_lag = GaugeMetricFamily("kafka_consumergroup_group_sum_lag", "Sum of group offset lag.",
                                    labels=group_labels)  # fmt: skip
        topic_sum = GaugeMetricFamily(
            "kafka_consumergroup_group_topic_sum_lag",
            "Sum of group offset lag across topic partitions.",
            labels=["cluster_name", "group", "topic"],
        )
        latest = GaugeMetricFamily("kafka_partition_latest_offset", "Latest offset of a partition.",
                                   labels=["cluster_name", "topic", "partition"])  # fmt: skip
        earliest = GaugeMetricFamily("kafka_partition_earliest_offset", "Earliest offset of a partition.",
                                     labels=["cluster_name", "topic", "partition"])  # fmt: skip
        seen: set[tuple[str, int]] = set()
        nan = float("nan")
        for view in self._source():
            if not view.partitions:
                continue
            g = view.group_id
            for p in view.partitions:
                labels = [cluster, g, p.topic, str(p.partition), p.host or "", p.member_id or "", p.client_id or ""]
                lag.add_metric(labels, nan if p.lag is None else p.lag)
                lag_s.add_metric(labels, nan if p.lag_ms is None else p.lag_ms / 1000)
                if p.log_end_offset is not None and (p.topic, p.partition) not in seen:
                    seen.add((p.topic, p.partition))
                    latest.add_metric([cluster, p.topic, str(p.partition)], p.log_end_offset)
                    earliest.add_metric([cluster, p.topic, str(p.partition)], p.log_start_offset or 0)
            most, most_ms = view.max_lag, view.max_lag_ms
            max_lag.add_metric([cluster, g], nan if most is None else most)
            max_lag_s.add_metric([cluster, g], nan if most_ms is None else most_ms / 1000)
            sum_lag.add_metric([cluster, g], view.total_lag)
            for topic, total in sorted(view.topic_lags().items()):
                topic_sum.add_metric([cluster, g, topic], total)
        yield from (lag, lag_s, max_lag, max_lag_s, sum_lag, topic_sum, latest, earliest)


class Metrics:
    """The daemon's metrics. Create one per process (or per test) and pass it to the server, storage and HTTP app;
    it is a ``RecordListener`` of the record stream (``on_append``, ``on_durable``)."""

    durable_types: frozenset[type] = frozenset({OffsetCommitRecord})  # commits count once durable

    def __init__(self, *, per_group_labels: bool = True, registry: CollectorRegistry | None = None) -> None:
        disable_created_metrics()  # type: ignore[no-untyped-call]
        self.per_group_labels = per_group_labels
        self.registry = registry if registry is not None else CollectorRegistry(auto_describe=False)
        g: list[str] = ["group"] if per_group_labels else []
        r = self.registry
        # Per-request metrics are plain counters read at scrape time (see _RequestCollector): no lock, no label lookup.
        self._requests = _RequestCollector()
        r.register(self._requests)
        self._connections: _ConnectionCollector | None = None
        # Per-group series (rebalances, their durations, member removals): plain numbers read at scrape time, the
        # exposition of the prometheus_client Counter/Histogram they were (their children cost ~5 KB a group).
        self.rebalances = _LabelledCounter("kgc_rebalances", "Rebalances started, by cause.", ["cause", *g])
        r.register(self.rebalances)
        self.rebalance_seconds = _LabelledHistogram(
            "kgc_rebalance_duration_seconds",
            "Rebalance duration from PreparingRebalance to Stable.",
            g,
            _REBALANCE_BUCKETS,
        )
        r.register(self.rebalance_seconds)
        self.rebalance_phase_seconds = Histogram(
            "kgc_rebalance_phase_duration_seconds",
            "Duration of each rebalance phase: join (until the new generation) and sync (until Stable).",
            ["phase"],
            buckets=_REBALANCE_BUCKETS,
            registry=r,
        )
        self.member_removals = _LabelledCounter(
            "kgc_member_removals", "Members removed from groups, by cause.", ["cause", *g]
        )
        r.register(self.member_removals)
        self.groups_deleted = Counter("kgc_groups_removed", "Groups removed, by cause.", ["cause"], registry=r)
        # Offset commits are counted per request once durable (hot path): plain counters, read at scrape time.
        self._commits = _CommitCollector(per_group_labels)
        r.register(self._commits)
        self.storage_batch_records = Histogram(
            "kgc_storage_write_batch_records",
            "Records per storage write batch (one transaction).",
            buckets=_BATCH_BUCKETS,
            registry=r,
        )
        self.storage_write_seconds = Histogram(
            "kgc_storage_write_seconds", "Storage write batch latency.", buckets=_WRITE_BUCKETS, registry=r
        )
        self.storage_write_failures = Counter(
            "kgc_storage_write_failures", "Storage write batches that failed.", registry=r
        )
        self.http_requests = Counter(
            "kgc_http_requests", "Operator HTTP API requests, by route and status.", ["route", "status"], registry=r
        )
        self._groups_collector: _GroupsCollector | None = None
        self._offsets_collector: _ConsumerGroupOffsetCollector | None = None
        self._lag_collector: _LagCollector | None = None

    # ---------------------------------------------------------------------------------------------- hot path
    def observe_request(
        self, api_key: int | str, seconds: float | None, error: ErrorCode | int = 0, requests: int = 1
    ) -> None:
        """One Kafka request answered after ``seconds``; ``error`` is its answer's error code (0 when none: see
        README's metrics table for answers with per-entry errors). ``requests`` > 1: that many requests were
        answered and this one of them was timed (a sampled API). ``seconds`` None: counted, not timed."""
        if seconds is not None:
            stats = self._requests.seconds.get(api_key)
            if stats is None:
                stats = self._requests.seconds[api_key] = [0.0] * (len(_REQUEST_BUCKETS) + 2)
            stats[bisect_left(_REQUEST_BUCKETS, seconds)] += 1  # bucket i counts bounds[i-1] < seconds <= bounds[i]
            stats[-1] += seconds
        key = (api_key, error if error.__class__ is int else int(error))
        counts = self._requests.counts
        counts[key] = counts.get(key, 0) + requests

    def count_untimed_requests(self, api_key: int, source: Callable[[], int]) -> None:
        """Requests of ``api_key`` answered since that API's last ``observe_request`` and not reported yet: read at
        scrape time (the server's sampled Heartbeat timing), so ``kgc_requests_total`` stays exact."""
        self._requests.untimed[api_key] = source

    def watch_connections(self, source: Callable[[], ConnectionStats]) -> None:
        """Report the Kafka listener's connections and limits from ``source()`` (``KafkaServer.stats``)."""
        if self._connections is not None:
            self.registry.unregister(self._connections)
        self._connections = _ConnectionCollector(source)
        self.registry.register(self._connections)

    def observe_storage_write(self, records: int, seconds: float, ok: bool = True) -> None:
        """One storage batch (transaction) of ``records`` records finished after ``seconds``."""
        self.storage_batch_records.observe(records)
        self.storage_write_seconds.observe(seconds)
        if not ok:
            self.storage_write_failures.inc()

    def observe_http(self, route: str, status: int) -> None:
        self.http_requests.labels(route, str(status)).inc()

    # ---------------------------------------------------------------------------------------- from the records
    def on_append(self, records: Sequence[Record]) -> None:
        """History records (rebalances, removals, deletions), as they are appended."""
        per_group = self.per_group_labels
        for rec in records:
            if rec.__class__ not in _HISTORY_TYPES:
                continue  # state records (offset commits above all): nothing to count at append
            if isinstance(rec, RebalanceStarted):
                self.rebalances.inc((rec.cause.value, rec.group_id) if per_group else (rec.cause.value,))
            elif isinstance(rec, GroupStabilized):
                self.rebalance_seconds.observe((rec.group_id,) if per_group else (), rec.rebalance_duration_ms / 1000)
                self.rebalance_phase_seconds.labels("sync").observe(rec.sync_duration_ms / 1000)
            elif isinstance(rec, JoinPhaseCompleted):
                self.rebalance_phase_seconds.labels("join").observe(rec.join_duration_ms / 1000)
            elif isinstance(rec, MemberRemoved):
                self.member_removals.inc((rec.cause.value, rec.group_id) if per_group else (rec.cause.value,))
            elif isinstance(rec, GroupTombstone):
                self.groups_deleted.labels(rec.cause.value).inc()

    def on_durable(self, records: Sequence[Record]) -> None:
        """State records that became durable: offset commits are counted once written, not when attempted."""
        per_group = self.per_group_labels
        counts = self._commits.counts
        for rec in records:
            if rec.__class__ is OffsetCommitRecord:
                kind = "admin" if rec.generation_id < 0 and not rec.member_id else "member"  # type: ignore[attr-defined]
                key = (kind, rec.group_id) if per_group else (kind, "")  # type: ignore[attr-defined]
                counts[key] = counts.get(key, 0) + 1

    # ------------------------------------------------------------------------------------------------ scraping
    def watch_groups(self, source: Callable[[], Iterable[Any]]) -> None:
        """Report groups by state and member counts from ``source()`` (e.g. ``coordinator.groups.all_groups``: the
        classic groups, whose ``state`` and ``members`` are read; a second group type adds its groups with the same
        two attributes, or its own source)."""
        if self._groups_collector is not None:
            self.registry.unregister(self._groups_collector)
        self._groups_collector = _GroupsCollector(source, self.per_group_labels)
        self.registry.register(self._groups_collector)

    def watch_offsets(
        self, offsets: Any, group_of: Callable[[str], Any], *, cluster_name: str, now_ms: Callable[[], int]
    ) -> None:
        """Report each partition's committed offset and the age of its last commit, read at scrape time from
        ``offsets`` (``coordinator.offsets.OffsetManager``; ``group_of`` looks a group up for the member labels).
        Per-partition series: not reported at all when per-group labels are off (cardinality)."""
        if not self.per_group_labels:
            return
        if self._offsets_collector is not None:
            self.registry.unregister(self._offsets_collector)
        self._offsets_collector = _ConsumerGroupOffsetCollector(offsets, group_of, cluster_name, now_ms)
        self.registry.register(self._offsets_collector)

    def watch_lag(self, source: Callable[[], Iterable[GroupLag]], *, cluster_name: str) -> None:
        """Report kafka-lag-exporter's lag series from ``source()`` (``runtime.lag.group_lags`` over the live groups,
        computed at scrape time). Per-group series: not reported when per-group labels are off (cardinality)."""
        if not self.per_group_labels:
            return
        if self._lag_collector is not None:
            self.registry.unregister(self._lag_collector)
        self._lag_collector = _LagCollector(source, cluster_name)
        self.registry.register(self._lag_collector)

    def watch_topics(self, topics: Any) -> None:
        """Topics and auto-creation (its counters and limits), read at scrape time from ``topics`` (the server's
        ``broker.topics.TopicRegistry``)."""

        class _TopicsCollector(Collector):
            def describe(self) -> Iterable[Metric]:
                return []

            def collect(self) -> Iterator[Metric]:
                yield GaugeMetricFamily("kgc_topics", "Topics in the registry.", value=len(topics))
                yield CounterMetricFamily(
                    "kgc_topics_auto_created", "Topics created by Metadata requests.", value=topics.auto_created
                )
                refused = CounterMetricFamily(
                    "kgc_topics_auto_create_refused",
                    "Topics a Metadata request asked to create that were not created, by reason (invalid_name: "
                    "INVALID_TOPIC_EXCEPTION; max_topics, per_request, rate: UNKNOWN_TOPIC_OR_PARTITION).",
                    labels=["reason"],
                )
                for reason, n in topics.refused.items():
                    refused.add_metric([reason], n)
                yield refused
                limits = topics.limits
                limit = GaugeMetricFamily(
                    "kgc_topics_auto_create_limit",
                    "Auto-creation limits ([topics] auto_create_*; 0 = none); enabled is auto.create.topics.enable.",
                    labels=["limit"],
                )
                for name, value in (
                    ("enabled", float(topics.auto_create)),
                    ("max_per_request", limits.max_per_request),
                    ("per_second", limits.per_second),
                    ("burst", limits.burst),
                    ("max_topics", limits.max_topics),
                ):
                    limit.add_metric([name], value)
                yield limit

        self.registry.register(_TopicsCollector())

    def watch_log(self, broker: Any) -> None:
        """The data path's stored log, read at scrape time from ``broker`` (``broker.partitions.Broker``): bytes
        kept (a running total per partition, summed), and what retention and DeleteRecords deleted."""

        class _LogCollector(Collector):
            def describe(self) -> Iterable[Metric]:
                return []

            def collect(self) -> Iterator[Metric]:
                kept = sum(p.size_bytes for p in broker.partitions())
                yield GaugeMetricFamily("kgc_log_size_bytes", "Bytes of the record batches kept.", value=kept)
                yield CounterMetricFamily(
                    "kgc_log_deleted_batches",
                    "Record batches deleted below a moved log start (retention, DeleteRecords).",
                    value=broker.deleted_batches,
                )
                yield CounterMetricFamily(
                    "kgc_log_deleted_bytes", "Bytes of those batches.", value=broker.deleted_bytes
                )

        self.registry.register(_LogCollector())

    def render(self) -> bytes:
        """The text exposition format (``CONTENT_TYPE_LATEST``)."""
        return generate_latest(self.registry)


def _err(code: int) -> str:
    if code == 0:
        return "none"
    try:
        return str(ErrorCode(code).name)
    except ValueError:
        return str(code)
