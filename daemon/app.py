"""Wiring: settings -> record log -> core coordinator -> API services -> Kafka listener + operator HTTP API.

``App.open(settings)`` opens the durable record log the settings name (SQLite under ``storage.data_dir`` by default,
PostgreSQL with ``storage.url``, nothing durable with ``storage.url = "memory"``); ``App(settings, record_log=...)``
takes a ready one (tests). ``start()`` serves ``/healthz`` first, loads state (replay, then ``on_loaded``), then opens
the Kafka listener, so clients never see a half-loaded coordinator and ``/readyz`` tells when it is ready. ``stop()``
stops accepting, closes connections, cancels timers and flushes the record log.
"""

from __future__ import annotations

import asyncio
import contextlib
import gc
import logging
from collections.abc import Callable, Iterator
from itertools import islice
from typing import TYPE_CHECKING, Any, Protocol

from broker.admin import TopicAdmin
from broker.offsets_topic import OffsetsTopic
from broker.partitions import Broker, DataLog, MemoryDataLog, PartitionSnapshot
from broker.records import TopicCreated
from broker.topics import TopicRegistry
from coordinator.clock import Clock, SystemClock
from coordinator.group_coordinator import GroupCoordinator
from coordinator.offsets import OffsetManager
from coordinator.record_log import MemoryLog
from daemon.listeners import advertise, build_servers, merged_stats
from daemon.log_retention import run_log_retention
from daemon.settings import HttpSettings, Settings
from protocol.apis import SUPPORTED_VERSIONS, ApiKey
from runtime.activity import GroupActivity
from runtime.audit_trail import AuditTrail
from runtime.lag import group_lags
from runtime.lag_evaluation import LagEvaluator, LagRules
from runtime.lag_metrics import LagStatusCollector
from runtime.loop import AsyncioTimer
from runtime.metrics import Metrics
from runtime.offsets_topic import OffsetsTopicRenderer, render_state
from runtime.record_stream import RecordStream
from security.acls import Authorizer
from security.credentials import CredentialLookup
from security.scram_keys import new_credential
from security.users import UserStore
from servers.http import HistorySource, HttpServer, MemoryHistory, start_http
from servers.http.access import Access, Role, TokenEntry
from servers.http.acls import AclAccess
from servers.http.basic_auth import BasicAuth
from servers.http.readiness import readiness_probe, sql_ping
from servers.http.storage_history import StorageHistory
from servers.http.wiring import Operator
from servers.kafka import Node, Services
from servers.kafka.context import BatchSource
from servers.kafka.tls import TlsConfig, TlsContext

if TYPE_CHECKING:  # storage is imported only when a database is configured (App.open)
    from storage.durable_log import DurableLog

log = logging.getLogger("daemon.app")

MEMORY_STORAGE = "memory"


class StoredData(DataLog, BatchSource, Protocol):
    """The data path's storage (``SqlRecordLog``): appends, batch reads for Fetch, and the start-up load."""

    async def load_data(self, *, producers_since_ms: int = 0) -> tuple[list[TopicCreated], list[PartitionSnapshot]]: ...

    async def load_producer_ids(self) -> int: ...

    async def prune_producers(self, older_than_ms: int) -> int: ...


def http_tls(http: HttpSettings) -> TlsContext | None:
    """The operator API's TLS context (``[http] ssl_*``), or None for plain HTTP. Raises ``ValueError``."""
    if not http.tls:
        return None
    config = TlsConfig(
        keystore_location=http.ssl_keystore_location,
        keystore_certificate_chain=http.ssl_keystore_certificate_chain,
        keystore_key=http.ssl_keystore_key,
        key_password=http.ssl_key_password.get_secret_value() if http.ssl_key_password is not None else None,
    )
    try:
        return TlsContext(config, ())
    except ValueError as exc:
        raise type(exc)(f"http: {exc}") from None


def http_access(http: HttpSettings) -> Access:
    """The operator API's principals from ``[http]`` (servers.http.access)."""
    token = http.token.get_secret_value() if http.token is not None else None
    return Access(
        [TokenEntry(p.name, Role.parse(p.role), p.token_sha256) for p in http.principals],
        legacy_token=token or None,
        anonymous_role=Role.parse(http.anonymous_role),
        allowed_origins=http.allowed_origins,
        basic=http.basic_auth,
    )


LagSeedEntry = tuple[str, str, int, int, int]  # group, topic, partition, offset, commit time (LagEvaluator.seed)


def lag_seed_entries(offsets: OffsetManager) -> Iterator[LagSeedEntry]:
    """Every durable offset as the lag seed takes it (``App._seed_lag``), read lazily: what changes between two reads
    is seen. A group not used since the load is read from its loaded rows (``OffsetManager.loaded_rows``), without
    building its ``OffsetAndMetadata`` (1,000,000 offsets: 0.5 s more of the seed); if it is used meanwhile, the
    rest of it is read as it is then. An offset deleted meanwhile is skipped."""

    def built(gid: str, keys: list[tuple[str, int]] | None) -> Iterator[LagSeedEntry]:
        committed = offsets.committed(gid)
        items = list(committed.items()) if keys is None else [(key, committed.get(key)) for key in keys]
        for (topic, partition), o in items:
            if o is not None and committed.get((topic, partition)) is o:
                yield gid, topic, partition, o.offset, o.commit_timestamp_ms

    for gid in list(offsets.group_ids()):
        rows = offsets.loaded_rows(gid)
        if rows is None:
            yield from built(gid, None)
            continue
        for i, (topic, partition, offset, _epoch, _metadata, commit_ms, _expire) in enumerate(rows):
            if offsets.loaded_rows(gid) is not rows:  # used meanwhile: its offsets are built now
                yield from built(gid, [(t, p) for t, p, *_ in rows[i:]])
                break
            yield gid, topic, partition, offset, commit_ms


class App:
    def __init__(
        self,
        settings: Settings,
        *,
        record_log: DurableLog | None = None,
        clock: Clock | None = None,
        metrics: Metrics | None = None,
        data: StoredData | None = None,
        credentials: CredentialLookup | None = None,
    ) -> None:
        self.settings = settings
        self.clock = clock or SystemClock()
        self.timer = AsyncioTimer()
        self.metrics = metrics if metrics is not None else Metrics(per_group_labels=settings.http.per_group_metrics)
        # The core appends to the record stream, which appends to the log and tells the metrics (and the in-memory
        # history, when the log keeps none); the daemon loads, checks and closes the log itself.
        self.record_log: DurableLog = record_log if record_log is not None else MemoryLog(auto_commit=True, keep=False)
        self.records = RecordStream(self.record_log, self.metrics)
        # Recent activity for the dashboard's "needs attention" list and timeline markers (in memory, since start):
        # fed by the record stream and by the Kafka listener's refused JoinGroups.
        self.activity = GroupActivity(self.clock.now_ms)
        self.records.listen(self.activity)
        # Burrow-style status of each group: its last commits per partition, measured against the broker's log end.
        self.lag = LagEvaluator(self.clock.now_ms, self._log_end, LagRules(**settings.lag.model_dump()))
        self.records.listen(self.lag)
        self.metrics.registry.register(LagStatusCollector(self.lag, per_group=self.metrics.per_group_labels))
        # Admin actions with their actor, over HTTP and the Kafka admin APIs: appended to the durable log (the same
        # write path), read back from it when it has queries (runtime.audit_trail).
        queries = self.record_log.queries
        self.audit = AuditTrail(
            self.record_log.append, self.clock.now_ms, reader=queries.admin_actions if queries is not None else None
        )
        self.operator = Operator(self.metrics, self._history(), self.activity, self.lag, self.audit)
        self.coordinator = GroupCoordinator(settings.group_config(), self.clock, self.timer, self.records)
        self.operator.watch(self.coordinator)
        self.metrics.watch_offsets(
            self.coordinator.offsets,
            self.coordinator.groups.group,
            cluster_name=settings.kafka.cluster_id,
            now_ms=self.clock.now_ms,
        )
        self.topics = TopicRegistry.from_settings(settings.topics)
        self.metrics.watch_topics(self.topics)
        # The data path: batches and topics go to the same durable log as the coordinator's records (one writer,
        # shared transactions); with in-memory storage the broker keeps the batch bytes itself.
        if data is None and hasattr(self.record_log, "load_data"):
            data = self.record_log  # type: ignore[assignment]
        self.data = data
        self.broker = Broker(
            self.topics,
            data if data is not None else MemoryDataLog(),
            self.clock.now_ms,
            keep_bytes=data is None,
            defaults=settings.topics.topic_defaults(),
            producer_id_expiration_ms=settings.producers.id_expiration_ms,
            max_producers_per_partition=settings.producers.max_per_partition,
        )
        self.metrics.watch_lag(
            lambda: group_lags(
                self.coordinator.groups.all_groups(), self.coordinator.offsets.committed, self.broker,
                self.clock.now_ms(),
            ),
            cluster_name=settings.kafka.cluster_id,
        )  # fmt: skip
        self.metrics.watch_log(self.broker)
        # __consumer_offsets: rendered from the coordinator's durable state records (runtime.offsets_topic).
        shards = self.coordinator.config.offsets_topic_num_partitions
        self.offsets_topic = OffsetsTopic(self.broker, shards, self.clock.now_ms, render_state)
        self.offsets_renderer = OffsetsTopicRenderer(self.offsets_topic, shards)
        self.records.listen(self.offsets_renderer)
        k = settings.kafka
        t = settings.topics
        self.admin = TopicAdmin(
            self.broker,
            node_id=k.node_id,
            max_partitions=t.max_partitions_per_topic,
            max_total_partitions=t.max_partitions,
        )
        # SCRAM users: durable in the same log (salted credentials only); the SASL exchanges look them up here.
        self.users = UserStore(data if data is not None else MemoryDataLog(), self.clock.now_ms)
        self.services = Services(
            coordinator=self.coordinator,
            topics=self.topics,
            node=Node(k.node_id, k.advertised_host or k.host, k.advertised_port or k.port, k.cluster_id),
            supported_versions=dict(SUPPORTED_VERSIONS),
            max_fetch_wait_ms=k.max_fetch_wait_ms,
            observe_request=self.metrics.observe_request,
            on_join_refused=self.activity.join_refused,
            broker=self.broker,
            batches=data,
            admin=self.admin,
            authorizer=Authorizer(
                enabled=settings.authorizer.enabled,
                super_users=settings.authorizer.super_users,
                allow_everyone_if_no_acl_found=settings.authorizer.allow_everyone_if_no_acl_found,
            ),
            audit=self.audit,
            users=self.users,
        )
        # One KafkaServer per listener (daemon/listeners.py), each with its own copy of the services (its node);
        # ``server`` is the first (``port``, the connection metrics). SASL looks users up in ``credentials``.
        self.credentials: CredentialLookup = credentials if credentials is not None else self.users
        self.listeners, self.tls_contexts = build_servers(settings, self.services, self.credentials)
        self.server = self.listeners[0][1]
        # The operator API over TLS ([http] ssl_*), and HTTP Basic with the same SCRAM users ([http] basic_auth).
        self.http_tls = http_tls(settings.http)
        self.basic_auth = (
            BasicAuth(
                self.credentials,
                {p: Role.parse(r) for p, r in settings.http.user_roles.items()},
            )
            if settings.http.basic_auth
            else None
        )
        server = self.server
        servers = [s for _, s in self.listeners]
        self.metrics.count_untimed_requests(int(ApiKey.HEARTBEAT), lambda: sum(s.untimed_heartbeats for s in servers))
        self.metrics.watch_connections(merged_stats(servers) if len(servers) > 1 else server.stats)
        self.loaded = False
        self.http: HttpServer | None = None
        self._background: list[asyncio.Task[Any]] = []

    @classmethod
    async def open(cls, settings: Settings, *, clock: Clock | None = None) -> App:
        """An App on the record log the settings name. Raises ``storage.StorageError`` if the database is unusable."""
        metrics = Metrics(per_group_labels=settings.http.per_group_metrics)
        s = settings.storage
        if s.url == MEMORY_STORAGE:
            return cls(settings, clock=clock, metrics=metrics)
        from storage.record_log import SqlRecordLog  # storage is optional for in-memory runs

        # exclusive: one daemon per SQLite database, which must be writable (storage.lock), checked before the
        # Kafka listener opens; a refusal is a StorageError naming the other daemon or the unwritable file.
        record_log = await SqlRecordLog.open(
            s.url,
            data_dir=s.data_dir,
            on_batch=metrics.observe_storage_write,
            exclusive=True,
            max_batch_data_bytes=s.transaction_data_bytes,
            max_batch_data_bytes_alone=s.transaction_data_bytes_max,
            sqlite_page_size=s.sqlite_page_size,
        )
        return cls(settings, record_log=record_log, clock=clock, metrics=metrics)

    def _history(self) -> HistorySource:
        """The stored history when the log has one; else one kept in memory from the record stream."""
        queries = self.record_log.queries
        if queries is not None:
            return StorageHistory(queries)
        memory = MemoryHistory()
        self.records.listen(memory)
        return memory

    def _log_end(self, topic: str, partition: int) -> int | None:
        p = self.broker.partition(topic, partition)
        return None if p is None else p.high_watermark

    async def _seed_lag(self, chunk: int = 10_000) -> None:
        """Seed the lag evaluator with the loaded offsets, ``chunk`` at a time between other work. What is committed
        meanwhile has its window already (``LagEvaluator.seed`` skips it); an offset deleted meanwhile is skipped
        (``lag_seed_entries``)."""
        entries = lag_seed_entries(self.coordinator.offsets)
        while True:
            part = list(islice(entries, chunk))
            if not part:
                return
            self.lag.seed(part)
            await asyncio.sleep(0)

    @property
    def port(self) -> int:
        return self.server.bound_port

    @property
    def http_port(self) -> int | None:
        return self.http.port if self.http is not None else None

    async def start(self) -> None:
        if self.settings.http.listen:
            engine = self.record_log.engine
            probe = readiness_probe(
                lambda: self.loaded,
                sql_ping(engine) if engine is not None else None,
                writes=self.record_log.check_writes,  # SqlRecordLog: failing writes
            )
            token = self.settings.http.token
            http_app = self.operator.http_app(
                self.coordinator,
                clock=self.clock,
                topics=self.topics,
                readiness=probe,
                token=token.get_secret_value() if token is not None else None,
                access=http_access(self.settings.http),
                broker=self.broker,
                admin=self.admin,
                users=self.users,
                acls=AclAccess(self.services.authorizer, lambda: self.services.acl_store),
                basic=self.basic_auth,
            )
            self.http = await start_http(
                http_app,
                self.settings.http.listen,
                max_line_size=self.settings.http.max_request_line_bytes,
                ssl_context=self.http_tls.context if self.http_tls is not None else None,
            )
        # Durable logs (SqlRecordLog) return the stored state records; replay them before anything runs. The
        # committed offsets come as rows per group (``load_state``: no record object per offset, 1,000,000 at a time).
        # The load allocates millions of objects that live as long as the daemon: with the collector on, each young
        # collection promotes them and the older ones scan them again and again (1,000,000 offsets: replaying them
        # 4.1 -> 0.65 s CPU without it). ``tune_gc`` freezes them once serving.
        gc_was_enabled = gc.isenabled()
        gc.disable()
        try:
            replayed = await self._load_state()
        finally:
            if gc_was_enabled:
                gc.enable()
        self.coordinator.on_loaded()
        await self._load_acls()
        if self.data is not None:
            since = self.clock.now_ms() - self.settings.producers.id_expiration_ms  # older producers have expired
            self.broker.load(*await self.data.load_data(producers_since_ms=since))
            self.broker.producer_ids.load(await self.data.load_producer_ids())
        self.broker.start()  # records the topics not stored yet (configured ones), then every new one
        await self._load_users()
        self._background.append(asyncio.get_running_loop().create_task(self._expire_producers()))
        # The loaded offsets start the lag status windows (their lag then unknown), in the background: 1,000,000
        # windows are seconds of work that serving does not wait for (a partition's status is unknown until then).
        self.lag_seeded = asyncio.get_running_loop().create_task(self._seed_lag())  # done: every window seeded
        self._background.append(self.lag_seeded)
        self.loaded = True
        self._start_history_pruning()
        interval_ms = self.settings.topics.log_retention_check_interval_ms
        self._background.append(asyncio.get_running_loop().create_task(run_log_retention(self.broker, interval_ms)))
        k = self.settings.kafka
        for spec, listener in self.listeners:
            await listener.start()
            advertise(spec, listener, self.settings)
        assert self.server.node is not None
        self.services.node = self.server.node  # the first listener's, for what has no request (HTTP, logs)
        host, port = self.server.node.host, self.server.node.port
        log.info(
            "coordinator ready node_id=%d advertised=%s:%d http=%s topics=%d replayed=%d storage=%s",
            k.node_id, host, port, self.settings.http.listen or "off", len(self.topics), replayed,
            type(self.record_log).__name__,
        )  # fmt: skip

    async def _load_state(self) -> int:
        """Replay the stored state (``start``); returns the number of state records and offsets replayed."""
        load_state = getattr(self.record_log, "load_state", None)
        loaded, offsets = await load_state() if load_state is not None else (await self.record_log.load(), ())
        # __consumer_offsets is given the loaded state (rendered per partition when first read), its offsets ending
        # at the stored log's position (so that they only grow across restarts), before on_loaded, whose records
        # come after the loaded state
        last_position = getattr(self.record_log, "last_position", None)
        end_offset = await last_position() if last_position is not None else 0
        for record in loaded:
            self.coordinator.replay(record)
        self.coordinator.load_offsets(offsets)
        replayed = len(loaded) + sum(len(rows) for _, rows in offsets)
        self.offsets_renderer.load(loaded, end_offset, offsets)
        del loaded, offsets
        return replayed

    async def _load_acls(self) -> None:
        """The stored ACLs into the authorizer's index; CreateAcls / DeleteAcls write through the store from now on."""
        engine = getattr(self.record_log, "engine", None)
        if engine is None:
            return  # in-memory storage: ACLs live as long as the process
        from storage.acls import SqlAclStore

        store = SqlAclStore(engine, self.clock.now_ms)
        for binding in await store.load():
            self.services.authorizer.index.add(binding)
        self.services.acl_store = store

    async def _load_users(self) -> None:
        """The stored SCRAM credentials, then the configured first ones that are missing (``[users] bootstrap``),
        durable before the Kafka listener opens."""
        load = getattr(self.data, "load_credentials", None)
        if load is not None:
            self.users.load(await load())
        wanted = [
            (user, new_credential(mechanism, password, iterations))
            for mechanism, user, password, iterations in self.settings.users.credentials()
            if self.users.scram(user, mechanism) is None
        ]
        if not wanted:
            return
        done: asyncio.Future[Any] = asyncio.get_running_loop().create_future()
        created = self.users.bootstrap(wanted, done.set_result)
        failure = await done
        if failure is not None:
            raise RuntimeError(f"cannot store the bootstrap SCRAM credentials: {failure}")
        log.info("bootstrap SCRAM credentials stored for %s", ", ".join(created))

    async def _expire_producers(self) -> None:
        """Every ``producer.id.expiration.check.interval.ms``: forget idle producers (``Broker.expire_producers``)
        and delete their stored rows (``prune_producers``); a failed delete is retried at the next pass."""
        p = self.settings.producers
        while True:
            await asyncio.sleep(p.id_expiration_check_interval_ms / 1000)
            removed = self.broker.expire_producers()
            if removed:
                log.info("expired %d idle producer states", removed)
            if self.data is not None:
                try:
                    await self.data.prune_producers(self.clock.now_ms() - p.id_expiration_ms)
                except Exception as e:  # storage.StorageError (storage is not imported here)
                    log.warning("producer expiry: %s", e, extra={"throttle": ("producer-prune",)})

    def _start_history_pruning(self) -> None:
        s = self.settings.storage
        retention_ms = int(s.history_retention_days * 86_400_000)
        prune = self.record_log.run_history_pruning(retention_ms, s.history_prune_interval_s)
        self._background.append(asyncio.get_running_loop().create_task(prune))

    @property
    def tls(self) -> TlsContext | None:
        """The first TLS context (the only one unless listeners override ``ssl.*``)."""
        return self.tls_contexts[0] if self.tls_contexts else None

    def reload_tls(self) -> None:
        """SIGHUP: re-read the TLS key, certificate chain and CA files of every TLS configuration (the broker-wide
        one and each listener's ``listener.name.<name>.ssl.*``; ``servers.kafka.tls``); a configuration whose files
        do not load is logged and keeps the certificates in use, the others are reloaded."""
        contexts = [*self.tls_contexts, *([self.http_tls] if self.http_tls is not None else [])]
        if not contexts:
            log.info("SIGHUP: no SSL listener, nothing to reload")
            return
        for tls in contexts:
            names = ", ".join(spec.name for spec, server in self.listeners if server.tls is tls) or "the HTTP API"
            try:
                tls.reload()
            except ValueError as exc:
                log.error("SIGHUP: TLS reload failed for %s, the certificates in use stay: %s", names, exc)
                continue
            log.info("SIGHUP: TLS key and certificates reloaded for %s", names)

    async def stop(self) -> None:
        for _, listener in self.listeners:
            await listener.stop()
        self.timer.cancel_all()
        for task in self._background:
            task.cancel()
        for task in self._background:
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await task
        self._background.clear()
        if self.http is not None:
            await self.http.stop()
            self.http = None
        await self.record_log.close()
        log.info("coordinator stopped")

    async def run_until(self, stop: asyncio.Event, on_ready: Callable[[], None] | None = None) -> None:
        await self.start()
        if on_ready is not None:
            on_ready()
        try:
            await stop.wait()
        finally:
            await self.stop()
