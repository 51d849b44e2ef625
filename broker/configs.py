"""Topic configs: the ones we serve, their broker-level defaults, checking, and how DescribeConfigs reports them.

Kafka's topic configs each have a broker-level synonym that is the default for every topic (``retention.ms`` <-
``log.retention.ms``). We serve five:

* ``cleanup.policy`` - only ``delete`` (retention deletes whole batches); ``compact`` is refused (INVALID_CONFIG):
  there is no log cleaner.
* ``max.message.bytes`` - the largest record batch a Produce may append (MESSAGE_TOO_LARGE beyond it).
* ``message.timestamp.type`` - ``CreateTime`` (the producer's) or ``LogAppendTime`` (the broker's).
* ``retention.ms`` - batches whose largest timestamp is older than this are deleted (-1: kept for ever).
* ``retention.bytes`` - per partition, the oldest batches beyond this size are deleted (-1: no limit).

Any other name is refused with INVALID_CONFIG by the admin APIs (``ConfigError``): a config we would accept and then
ignore would lie to the operator. Values are checked as Kafka's ``LogConfig`` checks them.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from enum import IntEnum

__all__ = [
    "BROKER_SYNONYMS",
    "CONFIG_NAMES",
    "CONFIG_TYPES",
    "KAFKA_DEFAULTS",
    "ConfigError",
    "ConfigSource",
    "ConfigType",
    "DescribedConfig",
    "TopicConfig",
    "check_config",
    "describe_broker_configs",
    "describe_topic_configs",
]

DEFAULT_MAX_MESSAGE_BYTES = 1_048_588  # Kafka's max.message.bytes default (LogConfig)
DEFAULT_RETENTION_MS = 604_800_000  # 7 days (log.retention.hours=168)

# Kafka's defaults of the topic configs we serve, by topic-level name.
KAFKA_DEFAULTS: Mapping[str, str] = {
    "cleanup.policy": "delete",
    "max.message.bytes": str(DEFAULT_MAX_MESSAGE_BYTES),
    "message.timestamp.type": "CreateTime",
    "retention.bytes": "-1",
    "retention.ms": str(DEFAULT_RETENTION_MS),
}
CONFIG_NAMES = tuple(sorted(KAFKA_DEFAULTS))
# Topic config -> its broker-level synonym (Kafka's ServerTopicConfigSynonyms).
BROKER_SYNONYMS: Mapping[str, str] = {
    "cleanup.policy": "log.cleanup.policy",
    "max.message.bytes": "message.max.bytes",
    "message.timestamp.type": "log.message.timestamp.type",
    "retention.bytes": "log.retention.bytes",
    "retention.ms": "log.retention.ms",
}


class ConfigSource(IntEnum):
    """DescribeConfigs' ``config_source`` (Kafka's DescribeConfigsResponse.ConfigSource)."""

    TOPIC_CONFIG = 1
    STATIC_BROKER_CONFIG = 4
    DEFAULT_CONFIG = 5


class ConfigType(IntEnum):
    """DescribeConfigs v3+ ``config_type``."""

    STRING = 2
    INT = 3
    LONG = 5
    LIST = 7


CONFIG_TYPES: Mapping[str, ConfigType] = {
    "cleanup.policy": ConfigType.LIST,
    "max.message.bytes": ConfigType.INT,
    "message.timestamp.type": ConfigType.STRING,
    "retention.bytes": ConfigType.LONG,
    "retention.ms": ConfigType.LONG,
}


class ConfigError(ValueError):
    """A config name we do not serve or a value Kafka would refuse: INVALID_CONFIG, with this message."""


@dataclass(frozen=True, slots=True)
class TopicConfig:
    """A topic's effective configs (its own over the broker defaults), as the broker core uses them."""

    max_message_bytes: int = DEFAULT_MAX_MESSAGE_BYTES
    log_append_time: bool = False
    retention_ms: int = DEFAULT_RETENTION_MS
    retention_bytes: int = -1

    @classmethod
    def of(cls, configs: Mapping[str, str]) -> TopicConfig:
        """From Kafka's names; raises ``ConfigError`` (a ValueError) for an unknown name or a bad value."""
        values = {name: check_config(name, value) for name, value in configs.items()}
        out = cls()
        return cls(
            max_message_bytes=int(values.get("max.message.bytes", out.max_message_bytes)),
            log_append_time=values.get("message.timestamp.type", "CreateTime") == "LogAppendTime",
            retention_ms=int(values.get("retention.ms", out.retention_ms)),
            retention_bytes=int(values.get("retention.bytes", out.retention_bytes)),
        )


def _long(name: str, value: str, minimum: int, maximum: int = 2**63 - 1) -> str:
    try:
        number = int(value.strip())
    except ValueError:
        raise ConfigError(f"Invalid value {value!r} for configuration {name}: not a number") from None
    if not minimum <= number <= maximum:
        raise ConfigError(f"Invalid value {value} for configuration {name}: value must be at least {minimum}")
    return str(number)


def check_config(name: str, value: str | None) -> str:
    """The value, normalised, if ``name`` is served and ``value`` legal for it; ``ConfigError`` otherwise."""
    if name not in KAFKA_DEFAULTS:
        raise ConfigError(f"Unknown or unsupported topic config {name!r} (supported: {', '.join(CONFIG_NAMES)})")
    if value is None:
        raise ConfigError(f"Invalid value null for configuration {name}")
    if name == "cleanup.policy":
        policies = [v.strip() for v in value.split(",") if v.strip()]
        if "compact" in policies:
            raise ConfigError("cleanup.policy=compact is not supported: there is no log cleaner, only delete")
        if set(policies) != {"delete"}:
            raise ConfigError(f"Invalid value {value!r} for configuration cleanup.policy: only delete is supported")
        return "delete"
    if name == "message.timestamp.type":
        if value not in ("CreateTime", "LogAppendTime"):
            raise ConfigError(f"Invalid value {value!r} for configuration message.timestamp.type: "
                              "String must be one of: CreateTime, LogAppendTime")  # fmt: skip
        return value
    if name == "max.message.bytes":
        return _long(name, value, 0, 2**31 - 1)
    if name == "retention.ms":
        return _long(name, value, -1)
    return _long(name, value, -(2**63))  # retention.bytes: any long, negative = no limit


@dataclass(frozen=True, slots=True)
class DescribedConfig:
    name: str
    value: str
    source: ConfigSource
    config_type: ConfigType
    synonyms: tuple[tuple[str, str, ConfigSource], ...]  # (name, value, source), most specific first


def describe_topic_configs(
    own: Mapping[str, str], broker_defaults: Mapping[str, str], names: list[str] | None = None
) -> list[DescribedConfig]:
    """Every served config (or only ``names``, unknown ones left out) of a topic with its own configs ``own``:
    the effective value and where it comes from; synonyms: the topic's own value, the broker's setting (when the
    operator set one: STATIC_BROKER_CONFIG) and Kafka's default."""
    out = []
    for name in CONFIG_NAMES if names is None else [n for n in names if n in KAFKA_DEFAULTS]:
        synonyms: list[tuple[str, str, ConfigSource]] = []
        if name in own:
            synonyms.append((name, own[name], ConfigSource.TOPIC_CONFIG))
        if name in broker_defaults:
            synonyms.append((BROKER_SYNONYMS[name], broker_defaults[name], ConfigSource.STATIC_BROKER_CONFIG))
        synonyms.append((BROKER_SYNONYMS[name], KAFKA_DEFAULTS[name], ConfigSource.DEFAULT_CONFIG))
        _, value, source = synonyms[0]
        out.append(DescribedConfig(name, value, source, CONFIG_TYPES[name], tuple(synonyms)))
    return out


def describe_broker_configs(
    broker_defaults: Mapping[str, str], names: list[str] | None = None
) -> list[DescribedConfig]:
    """The broker resource: the broker-level synonyms of the served topic configs, with their values."""
    by_broker_name = {broker: topic for topic, broker in BROKER_SYNONYMS.items()}
    wanted = sorted(by_broker_name) if names is None else [n for n in names if n in by_broker_name]
    out = []
    for broker_name in wanted:
        topic_name = by_broker_name[broker_name]
        synonyms: list[tuple[str, str, ConfigSource]] = []
        if topic_name in broker_defaults:
            synonyms.append((broker_name, broker_defaults[topic_name], ConfigSource.STATIC_BROKER_CONFIG))
        synonyms.append((broker_name, KAFKA_DEFAULTS[topic_name], ConfigSource.DEFAULT_CONFIG))
        _, value, source = synonyms[0]
        out.append(DescribedConfig(broker_name, value, source, CONFIG_TYPES[topic_name], tuple(synonyms)))
    return out
