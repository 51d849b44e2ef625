"""deploy/: the example configuration loads, the unit's ExecStart parses with the real CLI, and every KGC_*
variable the unit, the image and the compose file set is a real setting."""

from __future__ import annotations

import re
import shlex
from pathlib import Path

import pytest

from daemon.__main__ import build_parser
from daemon.settings import Settings, load_settings

DEPLOY = Path(__file__).resolve().parents[2] / "deploy"


def test_example_config_loads() -> None:
    settings = load_settings(DEPLOY / "kgc.toml")
    assert settings.kafka.port == 9092 and settings.topics.initial == {"orders": 6, "payments": 3}
    assert settings.http.listen == "127.0.0.1:8080"


def test_unit_exec_start_parses_with_the_cli() -> None:
    unit = (DEPLOY / "kgc.service").read_text()
    (exec_start,) = re.findall(r"^ExecStart=(.+)$", unit, flags=re.M)
    argv = shlex.split(exec_start)
    assert argv[0].endswith("/kgc")
    args = build_parser().parse_args(argv[1:])
    assert args.command == "serve" and args.config == "/etc/kgc/kgc.toml"
    assert re.search(r"^EnvironmentFile=-/etc/kgc/kgc.env$", unit, flags=re.M)
    assert re.search(r"^KillSignal=SIGTERM$", unit, flags=re.M)


def _kgc_env(text: str) -> dict[str, str]:
    found = dict(re.findall(r"\b(KGC_[A-Z_]+)[=:]\s*\"?([^\s\"\\]+)", text))
    return {k: v for k, v in found.items() if k not in ("KGC_HTTP__TOKEN",)}  # commented-out examples


@pytest.mark.parametrize("name", ["Containerfile", "compose.yaml"])
def test_environment_variables_are_settings(name: str, monkeypatch: pytest.MonkeyPatch) -> None:
    env = _kgc_env((DEPLOY / name).read_text())
    assert env, f"{name} sets no KGC_ variables"
    for key, value in env.items():
        monkeypatch.setenv(key, value)
    settings = Settings()
    for key, value in env.items():
        section, field = key.removeprefix("KGC_").lower().split("__")
        assert str(getattr(getattr(settings, section), field)) == value, key
