"""Settings precedence (kwargs > env > TOML > defaults), Kafka names in TOML and --set, CLI parsing, topics, logs."""

from __future__ import annotations

import json
import logging
import re
from pathlib import Path

import pytest

from broker.topics import TopicRegistry, parse_topic_spec, topic_id_for
from daemon.__main__ import build_parser, main, settings_from_args
from daemon.settings import SettingsError, load_settings, parse_set_options
from runtime.logging_setup import JsonFormatter, LogfmtFormatter


@pytest.fixture(autouse=True)
def _clean_env(monkeypatch: pytest.MonkeyPatch) -> None:
    import os

    for key in list(os.environ):
        if key.startswith("KGC_"):
            monkeypatch.delenv(key)


def write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "kgc.toml"
    path.write_text(text)
    return path


def test_defaults_are_kafkas() -> None:
    s = load_settings()
    assert (s.kafka.host, s.kafka.port, s.kafka.max_frame_size) == ("127.0.0.1", 9092, 104_857_600)
    assert s.http.listen == "127.0.0.1:8080"
    config = s.group_config()
    assert config.initial_rebalance_delay_ms == 3_000
    assert config.offsets_retention_ms == 7 * 24 * 3600 * 1000
    assert (s.topics.auto_create, s.topics.num_partitions) == (True, 1)


def test_precedence_kwargs_over_env_over_toml(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = write(
        tmp_path,
        '"group.max.size" = 5\nnum.partitions = 3\n'  # quoted and bare Kafka names
        '[kafka]\nport = 9999\nhost = "0.0.0.0"\n[topics.initial]\norders = 6\n',
    )
    s = load_settings(path)
    assert (s.group.max_size, s.topics.num_partitions, s.kafka.port, s.topics.initial) == (5, 3, 9999, {"orders": 6})
    monkeypatch.setenv("KGC_KAFKA__PORT", "1234")
    monkeypatch.setenv("KGC_GROUP__MAX_SIZE", "6")
    s = load_settings(path)
    assert (s.kafka.port, s.group.max_size, s.kafka.host) == (1234, 6, "0.0.0.0")
    s = load_settings(path, **parse_set_options(["group.max.size=7"]))
    assert (s.kafka.port, s.group.max_size, s.topics.num_partitions) == (1234, 7, 3)


def test_unknown_names_are_rejected_clearly(tmp_path: Path) -> None:
    with pytest.raises(SettingsError, match=re.escape("unknown setting 'group.max.sizes'")):
        parse_set_options(["group.max.sizes=1"])
    with pytest.raises(SettingsError, match="NAME=VALUE"):
        parse_set_options(["group.max.size"])
    with pytest.raises(SettingsError, match=re.escape("offsets.retention.hours")):
        load_settings(write(tmp_path, "offsets.retention.hours = 1\n"))
    with pytest.raises(SettingsError, match="not found"):
        load_settings(tmp_path / "missing.toml")


def test_cli_builds_settings_from_flags(tmp_path: Path) -> None:
    path = write(tmp_path, "[group]\nmin_session_timeout_ms = 10\n")
    args = build_parser().parse_args(
        ["serve", "--kafka-listen", "0.0.0.0:19092", "--http-listen", "0.0.0.0:18080",
         "--topic", "a:6", "--topic", "b", "--config", str(path),
         "--set", "group.initial.rebalance.delay.ms=0", "--set", "auto.create.topics.enable=false"]
    )  # fmt: skip
    s = settings_from_args(args)
    assert (s.kafka.host, s.kafka.port, s.http.listen) == ("0.0.0.0", 19092, "0.0.0.0:18080")
    assert s.topics.initial == {"a": 6, "b": 1}
    assert (s.group.initial_rebalance_delay_ms, s.group.min_session_timeout_ms) == (0, 10)
    assert s.topics.auto_create is False


def test_cli_configuration_error_exits_2(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["serve", "--set", "no.such.setting=1"]) == 2
    assert "unknown setting 'no.such.setting'" in capsys.readouterr().err
    assert main(["serve", "--set", "group.max.size=zero"]) == 2
    assert "group.max_size" in capsys.readouterr().err
    assert main(["serve", "--http-listen", "nowhere"]) == 2
    assert "--http-listen" in capsys.readouterr().err


def test_topic_specs_and_registry() -> None:
    assert parse_topic_spec("orders:6") == ("orders", 6)
    assert parse_topic_spec("orders") == ("orders", 1)
    for bad in ("orders:0", "orders:x", "bad name:1", ":3", "__consumer_offsets:3"):
        with pytest.raises(ValueError):
            parse_topic_spec(bad)
    with pytest.raises(ValueError, match="internal"):  # offsets.topic.num.partitions sizes it
        load_settings(None, topics={"initial": {"__consumer_offsets": 3}})
    registry = TopicRegistry(auto_create=True, default_partitions=4)
    registry.add("a", 2)
    assert registry.add("a", 1).partitions == 2  # never shrinks
    assert registry.add("a", 3).partitions == 3
    assert registry.maybe_auto_create("b") is not None
    assert registry.get("b") is not None and registry.get("b").partitions == 4  # type: ignore[union-attr]
    assert registry.maybe_auto_create("c", allowed=False) is None
    assert registry.by_id(topic_id_for("a")) is registry.get("a")
    assert topic_id_for("a") == topic_id_for("a") != topic_id_for("b")
    assert registry.has_partition("a", 2) and not registry.has_partition("a", 3)


def test_log_lines_lift_the_group_id() -> None:
    record = logging.LogRecord("coordinator.group", logging.INFO, "f", 1, "[group=orders] stable at %s", (3,), None)
    line = LogfmtFormatter().format(record)
    assert "group=orders" in line and 'msg="stable at 3"' in line and "level=info" in line
    parsed = json.loads(JsonFormatter().format(record))
    assert (parsed["group"], parsed["msg"], parsed["logger"]) == ("orders", "stable at 3", "coordinator.group")


def test_topic_config_defaults_take_kafka_names_and_precedence() -> None:
    args = build_parser().parse_args(["serve", "--set", "log.retention.hours=2", "--set", "log.retention.bytes=1000"])
    s = settings_from_args(args)
    assert s.topics.topic_defaults() == {"retention.ms": "7200000", "retention.bytes": "1000"}
    args = build_parser().parse_args(
        ["serve", "--set", "log.retention.hours=2", "--set", "log.retention.ms=5", "--set", "message.max.bytes=10",
         "--set", "log.retention.check.interval.ms=100"]
    )  # fmt: skip
    s = settings_from_args(args)
    assert s.topics.topic_defaults() == {"retention.ms": "5", "max.message.bytes": "10"}
    assert s.topics.log_retention_check_interval_ms == 100
    assert settings_from_args(build_parser().parse_args(["serve"])).topics.topic_defaults() == {}


def test_users_bootstrap_is_checked_and_its_password_never_shown() -> None:
    import pytest
    from pydantic import ValidationError

    from daemon.settings import load_settings

    s = load_settings(None, users={"bootstrap": ["SCRAM-SHA-512=[name=admin,password=hunter2]"]})
    assert s.users.credentials() == [("SCRAM-SHA-512", "admin", "hunter2", 8192)]
    assert "hunter2" not in repr(s) and "hunter2" not in s.model_dump_json()
    with pytest.raises(ValidationError, match=r"users\.bootstrap") as e:
        load_settings(None, users={"bootstrap": ["SCRAM-SHA-512=[name=admin,password=hunter2,iterations=1]"]})
    assert "hunter2" not in str(e.value)
