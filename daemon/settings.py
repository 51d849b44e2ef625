"""Typed settings: one pydantic-settings class with a section per concern.

Precedence (highest first): init kwargs (what the command line passes: ``--kafka-listen``, ``--topic``,
``--set NAME=VALUE``) > environment variables (prefix ``KGC_``, nested delimiter ``__``, e.g.
``KGC_KAFKA__PORT=9093``, ``KGC_GROUP__MAX_SIZE=100``) > the TOML file given with ``--config`` > defaults.

Kafka's broker settings keep their Kafka names wherever an operator would type them: in the TOML file (top-level
``"group.max.size" = 100`` or the bare dotted form ``group.max.size = 100``) and in ``--set group.max.size=100``.
``KAFKA_NAMES`` maps each to its field; an unknown dotted name is rejected with the list of known ones. The TOML
sections use the field names (``[kafka] port = 9093``, ``[group] max_size = 100``, ``[topics.initial] orders = 6``).
"""

from __future__ import annotations

import socket
import tomllib
from contextvars import ContextVar
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, SecretStr, field_validator, model_validator
from pydantic.fields import FieldInfo
from pydantic_settings import BaseSettings, PydanticBaseSettingsSource, SettingsConfigDict

from broker.topics import is_internal_topic
from coordinator.config import GroupConfig
from daemon.listener_settings import LISTENER_KAFKA_NAMES, ListenersSettings, parse_override_name
from security.users import parse_scram_spec

# Kafka setting name -> (section, field). Values are converted by the field's type (minutes stay minutes).
KAFKA_NAMES: dict[str, tuple[str, str]] = {
    "group.initial.rebalance.delay.ms": ("group", "initial_rebalance_delay_ms"),
    "group.min.session.timeout.ms": ("group", "min_session_timeout_ms"),
    "group.max.session.timeout.ms": ("group", "max_session_timeout_ms"),
    "group.max.size": ("group", "max_size"),
    "offsets.retention.minutes": ("group", "offsets_retention_minutes"),
    "offsets.retention.check.interval.ms": ("group", "offsets_retention_check_interval_ms"),
    "offset.metadata.max.bytes": ("group", "offset_metadata_max_bytes"),
    "offsets.topic.num.partitions": ("group", "offsets_topic_num_partitions"),
    "auto.create.topics.enable": ("topics", "auto_create"),
    "num.partitions": ("topics", "num_partitions"),
    "log.retention.ms": ("topics", "log_retention_ms"),
    "log.retention.minutes": ("topics", "log_retention_minutes"),
    "log.retention.hours": ("topics", "log_retention_hours"),
    "log.retention.bytes": ("topics", "log_retention_bytes"),
    "log.retention.check.interval.ms": ("topics", "log_retention_check_interval_ms"),
    "message.max.bytes": ("topics", "message_max_bytes"),
    "socket.request.max.bytes": ("kafka", "max_frame_size"),
    "queued.max.request.bytes": ("kafka", "queued_max_request_bytes"),
    "connections.max.idle.ms": ("kafka", "connections_max_idle_ms"),
    "max.connections": ("kafka", "max_connections"),
    "max.connections.per.ip": ("kafka", "max_connections_per_ip"),
    "max.connections.per.ip.overrides": ("kafka", "max_connections_per_ip_overrides"),
    "producer.id.expiration.ms": ("producers", "id_expiration_ms"),
    "producer.id.expiration.check.interval.ms": ("producers", "id_expiration_check_interval_ms"),
    "broker.id": ("kafka", "node_id"),
    "node.id": ("kafka", "node_id"),
    "authorizer.enabled": ("authorizer", "enabled"),
    "super.users": ("authorizer", "super_users"),
    "allow.everyone.if.no.acl.found": ("authorizer", "allow_everyone_if_no_acl_found"),
    **LISTENER_KAFKA_NAMES,  # listeners, advertised.listeners, ssl.*, sasl.enabled.mechanisms, ...
}


class SettingsError(ValueError):
    """A configuration mistake, with a message meant for the operator."""


def _host_port(value: str, what: str) -> tuple[str, int]:
    host, sep, port = value.rpartition(":")
    if not sep:
        raise SettingsError(f"{what}: expected HOST:PORT, got {value!r}")
    try:
        number = int(port)
    except ValueError:
        raise SettingsError(f"{what}: bad port in {value!r}") from None
    if not 0 <= number <= 65535:
        raise SettingsError(f"{what}: port out of range in {value!r}")
    return host.strip("[]"), number


class _Section(BaseModel):
    model_config = ConfigDict(extra="forbid", validate_assignment=True)


class KafkaListenerSettings(_Section):
    host: str = "127.0.0.1"
    port: int = Field(default=9092, ge=0, le=65535)
    advertised_host: str | None = None  # default: the listen host, or this machine's name for a wildcard listener
    advertised_port: int | None = Field(default=None, ge=1, le=65535)  # default: the bound port
    node_id: int = Field(default=0, ge=0)
    cluster_id: str = "kgc-cluster"
    max_frame_size: int = Field(default=104_857_600, ge=1024)  # socket.request.max.bytes
    max_inflight: int = Field(default=100, ge=1)  # requests queued per connection (answers not written yet)
    max_fetch_wait_ms: int = Field(default=30_000, ge=0)
    # Connection limits (docs/robustness.md, "Connections"). Kafka's defaults are unlimited, except idle (10 min);
    # queued.max.request.bytes is bounded here (one maximal frame's worth: a coordinator's requests are small).
    queued_max_request_bytes: int = Field(default=104_857_600, ge=1024)  # queued.max.request.bytes
    connections_max_idle_ms: int = Field(default=600_000, ge=1)  # connections.max.idle.ms
    max_connections: int = Field(default=2_147_483_647, ge=1)  # max.connections (capped to the fd limit at start)
    max_connections_per_ip: int = Field(default=2_147_483_647, ge=0)  # max.connections.per.ip
    max_connections_per_ip_overrides: dict[str, int] = Field(default_factory=dict)  # "host:count,host:count"

    @field_validator("max_connections_per_ip_overrides", mode="before")
    @classmethod
    def _parse_overrides(cls, value: Any) -> Any:
        """Kafka's form, "host:count,host:count" (IPv6 in brackets or bare: the count is after the last colon)."""
        if not isinstance(value, str):
            return value
        parsed: dict[str, int] = {}
        for item in filter(None, (part.strip() for part in value.split(","))):
            host, sep, count = item.rpartition(":")
            if not sep or not host.strip("[] ") or not count.strip().isdigit():
                raise ValueError(f"expected host:count, got {item!r}")
            parsed[host.strip("[] ")] = int(count)
        return parsed

    @field_validator("max_connections_per_ip_overrides")
    @classmethod
    def _non_negative(cls, value: dict[str, int]) -> dict[str, int]:
        for host, count in value.items():
            if count < 0:
                raise ValueError(f"{host!r}: count must be >= 0")
        return value

    def advertised(self, bound_port: int) -> tuple[str, int]:
        host = self.advertised_host
        if not host:
            host = self.host if self.host not in ("", "0.0.0.0", "::") else socket.getfqdn()
        return host, self.advertised_port or bound_port


class HttpPrincipalSettings(_Section):
    """One principal of the operator API (servers.http.access): ``kgc http-token NAME ROLE`` prints one."""

    name: str = Field(min_length=1, pattern=r"^[^\s:]+$")  # audited as User:<name>
    role: Literal["viewer", "operator", "admin"]
    token_sha256: str = Field(pattern=r"^[0-9a-fA-F]{64}$")  # the SHA-256 of the token, never the token


class HttpSettings(_Section):
    listen: str = "127.0.0.1:8080"  # the operator HTTP API
    token: SecretStr | None = None  # a single admin bearer token (prefer KGC_HTTP__TOKEN, or principals)
    # Principals with roles viewer/operator/admin and hashed tokens (docs/security.md); [[http.principals]] in TOML.
    principals: list[HttpPrincipalSettings] = Field(default_factory=list)
    # What a request without a token may do once any token or principal is configured ("none": nothing but the
    # probes and the dashboard's files; "viewer": read). Without any, the API is open.
    anonymous_role: Literal["none", "viewer"] = "viewer"
    # Origins besides the API's own allowed to change state from a browser (e.g. "https://ops.example.com").
    allowed_origins: list[str] = Field(default_factory=list)
    per_group_metrics: bool = True  # label Prometheus series by group
    # Longest HTTP request line. A Kafka group id may be 32,767 bytes, percent-encoded up to 3 characters a byte,
    # and /v1/groups/{group}/members/{instance} carries two such ids: 256 KiB holds them; longer lines get 400.
    max_request_line_bytes: int = Field(default=262_144, ge=8190)
    # HTTPS (docs/security.md): the PEM key and certificate chain, with the Kafka listeners' names and meanings. Set,
    # the API is served over TLS only; SIGHUP re-reads the files.
    ssl_keystore_location: str | None = None
    ssl_keystore_certificate_chain: str | None = None
    ssl_keystore_key: str | None = None
    ssl_key_password: SecretStr | None = None
    # Authorization: Basic with the SCRAM users of the Kafka listeners (servers.http.basic_auth); needs TLS. Each
    # user's role comes from user_roles ("User:alice" = "operator"); a user not listed has none.
    basic_auth: bool = False
    user_roles: dict[str, Literal["viewer", "operator", "admin"]] = Field(default_factory=dict)

    @property
    def tls(self) -> bool:
        return bool(self.ssl_keystore_location or (self.ssl_keystore_certificate_chain and self.ssl_keystore_key))

    @field_validator("user_roles")
    @classmethod
    def _user_principals(cls, value: dict[str, str]) -> dict[str, str]:
        for principal in value:
            if not principal.startswith("User:") or len(principal) == 5:
                raise ValueError(f"user_roles: {principal!r} is not a principal such as User:alice")
        return value

    @model_validator(mode="after")
    def _basic_needs_tls(self) -> HttpSettings:
        if self.basic_auth and not self.tls:
            raise ValueError(
                "http.basic_auth sends the SCRAM users' passwords: it needs TLS (http.ssl_keystore_location, or "
                "ssl_keystore_certificate_chain and ssl_keystore_key)"
            )
        return self


class StorageSettings(_Section):
    # SQLAlchemy URL (postgresql://..., sqlite:///...); None = the embedded SQLite file under data_dir;
    # "memory" = nothing durable (state is lost on restart; for experiments and some tests)
    url: str | None = None
    data_dir: Path = Path("./data")
    history_retention_days: float = Field(default=30.0, gt=0)  # rebalance history and commit log kept this long
    history_prune_interval_s: float = Field(default=600.0, gt=0)
    # Produced batch bytes one write transaction takes at most (at least one produce call; storage.record_log):
    # when offset commits or group records are queued (they go ahead of the produce calls left over), and in any
    # case (0: no cap). 0 and 0: everything queued in one transaction.
    transaction_data_bytes: int = Field(default=262_144, ge=0)
    transaction_data_bytes_max: int = Field(default=0, ge=0)
    # Page size of a NEW embedded SQLite database; an existing one keeps its own (docs/performance.md).
    sqlite_page_size: int = Field(default=4096, ge=512, le=65536)

    @field_validator("sqlite_page_size")
    @classmethod
    def _power_of_two(cls, value: int) -> int:
        if value & (value - 1):
            raise ValueError("sqlite_page_size must be a power of two from 512 to 65536")
        return value


class GroupSettings(_Section):
    initial_rebalance_delay_ms: int = Field(default=3_000, ge=0)
    min_session_timeout_ms: int = Field(default=6_000, ge=0)
    max_session_timeout_ms: int = Field(default=1_800_000, ge=0)
    max_size: int = Field(default=2_147_483_647, ge=1)
    offsets_retention_minutes: int = Field(default=10_080, ge=1)
    offsets_retention_check_interval_ms: int = Field(default=600_000, ge=1)
    offset_metadata_max_bytes: int = Field(default=4_096, ge=0)
    offsets_topic_num_partitions: int = Field(default=50, ge=1)


class TopicSettings(_Section):
    auto_create: bool = True  # auto.create.topics.enable
    num_partitions: int = Field(default=1, ge=1)  # num.partitions
    # Limits on auto-creation (Kafka has none by these names; broker.topics.AutoCreateLimits). 0 = no limit.
    auto_create_max_per_request: int = Field(default=100, ge=0)  # topics one Metadata request may create
    auto_create_per_second: float = Field(default=10.0, ge=0)  # per client host, on average ...
    auto_create_burst: int = Field(default=1_000, ge=1)  # ... after a burst of this many
    auto_create_max_topics: int = Field(default=10_000, ge=0)  # none auto-created once this many topics exist
    initial: dict[str, int] = Field(default_factory=dict)  # topic name -> partitions, created at start
    # Broker-level defaults of the topic configs (broker/configs.py); None: Kafka's default (retention 7 days, no
    # size limit, 1048588-byte batches). A topic's own configs (CreateTopics, IncrementalAlterConfigs) win.
    log_retention_ms: int | None = Field(default=None, ge=-1)  # log.retention.ms (-1: keep for ever) ...
    log_retention_minutes: int | None = Field(default=None, ge=-1)  # ... else log.retention.minutes ...
    log_retention_hours: int | None = Field(default=None, ge=-1)  # ... else log.retention.hours (Kafka's precedence)
    log_retention_bytes: int | None = None  # log.retention.bytes per partition (negative: no limit)
    message_max_bytes: int | None = Field(default=None, ge=0)  # message.max.bytes
    log_retention_check_interval_ms: int = Field(default=300_000, ge=1)  # log.retention.check.interval.ms
    max_partitions_per_topic: int = Field(default=10_000, ge=1)  # CreateTopics / CreatePartitions beyond: refused
    max_partitions: int = Field(default=200_000, ge=0)  # all topics together, through the admin APIs (0: no limit)

    def topic_defaults(self) -> dict[str, str]:
        """The broker-level defaults set here, by their topic-level names (``broker.configs``)."""
        retention = self.log_retention_ms
        for value, unit_ms in ((self.log_retention_minutes, 60_000), (self.log_retention_hours, 3_600_000)):
            if retention is None and value is not None:
                retention = value * unit_ms if value >= 0 else -1
        names = {
            "retention.ms": retention,
            "retention.bytes": self.log_retention_bytes,
            "max.message.bytes": self.message_max_bytes,
        }
        return {name: str(value) for name, value in names.items() if value is not None}

    @field_validator("initial")
    @classmethod
    def _positive(cls, value: dict[str, int]) -> dict[str, int]:
        for name, count in value.items():
            if is_internal_topic(name):
                raise ValueError(f"topic {name!r} is internal: offsets.topic.num.partitions sizes it")
            if count < 1:
                raise ValueError(f"topic {name!r}: partitions must be >= 1")
        return value


class ProducerSettings(_Section):
    # Idempotent producers (broker.producers): a producer's state on a partition is forgotten once its last batch
    # there is this old (Kafka's default: one day), checked every check interval (Kafka's default: 10 minutes).
    id_expiration_ms: int = Field(default=86_400_000, ge=1)  # producer.id.expiration.ms
    id_expiration_check_interval_ms: int = Field(default=600_000, ge=1)  # producer.id.expiration.check.interval.ms
    # Not Kafka's: past this many producers on one partition the least recently active is forgotten early (a client
    # can name any producer id in a batch; broker.producers).
    max_per_partition: int = Field(default=10_000, ge=1)


class RuntimeSettings(_Section):
    # Python's cyclic GC, tuned for a long-running server (applied by ``kgc serve`` once the state is loaded, see
    # runtime.loop.tune_gc): what exists then is frozen out of every collection, and the youngest
    # generation is collected every ``gc_gen0_threshold`` allocations instead of 700. With the default, collections
    # took ~45% of the daemon's CPU on the commit benchmark (docs/performance.md). 0 leaves Python's defaults.
    gc_gen0_threshold: int = Field(default=50_000, ge=0)


class LagSettings(_Section):
    """Burrow's evaluation of consumer groups (runtime.lag_evaluation, docs/consumer-status.md); Burrow's names in
    brackets."""

    intervals: int = Field(default=10, ge=1, le=1_000)  # commits kept per partition [storage intervals]
    min_distance_ms: int = Field(default=0, ge=0)  # closer commits replace the previous one [min-distance]
    allowed_lag: int = Field(default=0, ge=0)  # a lag at or below this counts as none [allowed-lag]
    minimum_complete: float = Field(default=0.0, ge=0, le=1)  # less full windows are OK [minimum-complete]
    recent_zero_lag_ms: int = Field(default=100_000, ge=0)  # caught up this recently: no STOP [intervals x 10 s]


LOG_LEVELS = ("DEBUG", "INFO", "WARNING", "ERROR", "CRITICAL")


class AuthorizerSettings(_Section):
    """ACLs (``security.acls``): off unless ``authorizer.enabled`` (then every request is checked, as with Kafka's
    ``authorizer.class.name`` set); ``super.users`` (``User:a;User:b``) may do everything; a resource without any
    ACL is allowed to everyone only with ``allow.everyone.if.no.acl.found`` (Kafka's default: false)."""

    enabled: bool = False  # authorizer.enabled
    super_users: list[str] = Field(default_factory=list)  # super.users
    allow_everyone_if_no_acl_found: bool = False  # allow.everyone.if.no.acl.found

    @field_validator("super_users", mode="before")
    @classmethod
    def _split_super_users(cls, value: Any) -> Any:
        if isinstance(value, str):
            return [p.strip() for p in value.split(";") if p.strip()]
        return value

    @field_validator("super_users")
    @classmethod
    def _principals(cls, value: list[str]) -> list[str]:
        for principal in value:
            if ":" not in principal:
                raise ValueError(f"super.users entry {principal!r} is not a principal such as User:alice")
        return value


class UserSettings(_Section):
    """SCRAM users (``security.users``). ``bootstrap``: first credentials in Kafka's ``--add-scram`` form,
    ``SCRAM-SHA-512=[name=admin,password=...]`` (optional ``iterations``, default 8192), stored at start when the
    user has no credential for that mechanism yet (a stored one, perhaps rotated since, is never overwritten).
    Prefer the environment for passwords: ``KGC_USERS__BOOTSTRAP='["SCRAM-SHA-512=[name=admin,password=..]"]'``."""

    model_config = ConfigDict(extra="forbid", validate_assignment=True, hide_input_in_errors=True)  # passwords
    bootstrap: list[SecretStr] = Field(default_factory=list)

    @field_validator("bootstrap")
    @classmethod
    def _valid_specs(cls, specs: list[SecretStr]) -> list[SecretStr]:
        for n, spec in enumerate(specs):
            try:
                parse_scram_spec(spec.get_secret_value())
            except ValueError as e:
                raise ValueError(f"users.bootstrap[{n}]: {e}") from None
        return specs

    def credentials(self) -> list[tuple[str, str, str, int]]:
        """(mechanism, user, password, iterations) of each bootstrap entry."""
        return [parse_scram_spec(s.get_secret_value()) for s in self.bootstrap]


class LogSettings(_Section):
    level: str = "INFO"
    format: Literal["logfmt", "json"] = "logfmt"

    @field_validator("level")
    @classmethod
    def _known_level(cls, value: str) -> str:
        if value.upper() not in LOG_LEVELS:
            raise ValueError(f"unknown log level {value!r} (one of {', '.join(LOG_LEVELS)})")
        return value.upper()


# The TOML file of the settings being built (a context variable, so concurrent tests can load different files).
_config_file: ContextVar[Path | None] = ContextVar("kgc_config_file", default=None)


def _is_kafka_name(name: str) -> bool:
    """A name of ``KAFKA_NAMES``, or a per-listener override ``listener.name.<listener>.<setting>``."""
    if name in KAFKA_NAMES:
        return True
    try:
        return parse_override_name(name) is not None
    except ValueError:
        return False


def _extract_kafka_names(data: dict[str, Any], prefix: str = "") -> dict[str, Any]:
    """Remove every Kafka-named key from ``data`` (quoted ``"a.b.c"`` keys or bare dotted ``a.b.c`` trees)."""
    found: dict[str, Any] = {}
    for key in list(data):
        name = f"{prefix}{key}"
        value = data[key]
        if _is_kafka_name(name) and not isinstance(value, dict):  # a table is a section ([listeners]), not a value
            found[name] = data.pop(key)
        elif isinstance(value, dict):
            found.update(_extract_kafka_names(value, f"{name}."))
            if not value:
                del data[key]
    return found


def _leaf_names(data: dict[str, Any], prefix: str = "") -> list[str]:
    names: list[str] = []
    for key, value in data.items():
        if isinstance(value, dict) and value:
            names.extend(_leaf_names(value, f"{prefix}{key}."))
        else:
            names.append(f"{prefix}{key}")
    return names


def _reject_unknown_top_level(data: dict[str, Any]) -> None:
    sections = set(Settings.model_fields)
    unknown = [name for key, value in data.items() if key not in sections for name in _leaf_names({key: value})]
    if unknown:
        known = ", ".join(sorted(KAFKA_NAMES))
        raise SettingsError(
            f"unknown setting(s) {', '.join(map(repr, unknown))}: expected a section "
            f"({', '.join(sorted(sections))}) or a Kafka name ({known})"
        )


def kafka_overrides(names: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """Kafka-named values as nested section dicts. Unknown names raise ``SettingsError``."""
    out: dict[str, dict[str, Any]] = {}
    for name, value in names.items():
        try:
            override = parse_override_name(name)
        except ValueError as exc:
            raise SettingsError(str(exc)) from None
        if override is not None:  # listener.name.<listener>.<setting>
            listener, setting = override
            out.setdefault("listeners", {}).setdefault("overrides", {}).setdefault(listener, {})[setting] = value
            continue
        target = KAFKA_NAMES.get(name)
        if target is None:
            known = ", ".join(sorted(KAFKA_NAMES))
            raise SettingsError(f"unknown setting {name!r} (known Kafka names: {known})")
        out.setdefault(target[0], {})[target[1]] = value
    return out


def parse_set_options(items: list[str]) -> dict[str, dict[str, Any]]:
    """``--set NAME=VALUE`` options (Kafka names) as nested section dicts."""
    names: dict[str, Any] = {}
    for item in items:
        name, sep, value = item.partition("=")
        if not sep or not name.strip():
            raise SettingsError(f"--set expects NAME=VALUE, got {item!r}")
        names[name.strip()] = value.strip()
    return kafka_overrides(names)


def _deep_merge(base: dict[str, Any], extra: dict[str, Any]) -> dict[str, Any]:
    for key, value in extra.items():
        if isinstance(value, dict) and isinstance(base.get(key), dict):
            _deep_merge(base[key], value)
        else:
            base[key] = value
    return base


class _KafkaTomlSource(PydanticBaseSettingsSource):
    """The ``--config`` TOML file, with Kafka-named keys moved into their sections."""

    def __init__(self, settings_cls: type[BaseSettings], path: Path | None) -> None:
        super().__init__(settings_cls)
        self.path = path

    def get_field_value(self, field: FieldInfo, field_name: str) -> tuple[Any, str, bool]:
        return None, field_name, False  # unused: __call__ returns the whole mapping

    def __call__(self) -> dict[str, Any]:
        if self.path is None:
            return {}
        try:
            with open(self.path, "rb") as f:
                data = tomllib.load(f)
        except FileNotFoundError:
            raise SettingsError(f"config file not found: {self.path}") from None
        except tomllib.TOMLDecodeError as exc:
            raise SettingsError(f"config file {self.path}: {exc}") from None
        kafka = _extract_kafka_names(data)
        _reject_unknown_top_level(data)
        return _deep_merge(data, kafka_overrides(kafka))


class Settings(BaseSettings):
    # hide_input_in_errors: a refused value may hold a secret (a bootstrap password, the HTTP token)
    model_config = SettingsConfigDict(
        env_prefix="KGC_", env_nested_delimiter="__", extra="forbid", hide_input_in_errors=True
    )

    kafka: KafkaListenerSettings = Field(default_factory=KafkaListenerSettings)
    http: HttpSettings = Field(default_factory=HttpSettings)
    storage: StorageSettings = Field(default_factory=StorageSettings)
    group: GroupSettings = Field(default_factory=GroupSettings)
    topics: TopicSettings = Field(default_factory=TopicSettings)
    producers: ProducerSettings = Field(default_factory=ProducerSettings)
    log: LogSettings = Field(default_factory=LogSettings)
    runtime: RuntimeSettings = Field(default_factory=RuntimeSettings)
    lag: LagSettings = Field(default_factory=LagSettings)
    authorizer: AuthorizerSettings = Field(default_factory=AuthorizerSettings)
    users: UserSettings = Field(default_factory=UserSettings)
    listeners: ListenersSettings = Field(default_factory=ListenersSettings)  # daemon/listener_settings.py

    @classmethod
    def settings_customise_sources(
        cls,
        settings_cls: type[BaseSettings],
        init_settings: PydanticBaseSettingsSource,
        env_settings: PydanticBaseSettingsSource,
        dotenv_settings: PydanticBaseSettingsSource,
        file_secret_settings: PydanticBaseSettingsSource,
    ) -> tuple[PydanticBaseSettingsSource, ...]:
        return init_settings, env_settings, _KafkaTomlSource(settings_cls, _config_file.get())

    def group_config(self) -> GroupConfig:
        g = self.group
        return GroupConfig(
            initial_rebalance_delay_ms=g.initial_rebalance_delay_ms,
            min_session_timeout_ms=g.min_session_timeout_ms,
            max_session_timeout_ms=g.max_session_timeout_ms,
            max_size=g.max_size,
            offsets_retention_ms=g.offsets_retention_minutes * 60_000,
            offsets_retention_check_interval_ms=g.offsets_retention_check_interval_ms,
            offset_metadata_max_bytes=g.offset_metadata_max_bytes,
            offsets_topic_num_partitions=g.offsets_topic_num_partitions,
        )


def load_settings(config_file: str | Path | None = None, **overrides: Any) -> Settings:
    """Settings from ``overrides`` (nested dicts per section) > env > ``config_file`` > defaults."""
    token = _config_file.set(Path(config_file) if config_file else None)
    try:
        return Settings(**overrides)
    finally:
        _config_file.reset(token)


def listen_override(value: str, what: str = "--kafka-listen") -> dict[str, Any]:
    host, port = _host_port(value, what)
    return {"host": host, "port": port}
