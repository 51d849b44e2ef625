"""Structured logs: logfmt (default) or JSON lines on stderr.

The core logs ``[group=<id>] <what happened>`` on logger ``coordinator.group``; the group id is lifted into its own
``group`` key so ``grep group=orders`` (or a JSON query) shows one group's story.
"""

from __future__ import annotations

import json
import logging
import re
import sys
import time
from typing import Any

_GROUP_PREFIX = re.compile(r"^\[group=(?P<group>[^\]]*)\]\s*")
_BARE = re.compile(r"^[^\s=\"]+$")


def _fields(record: logging.LogRecord) -> dict[str, Any]:
    message = record.getMessage()
    out: dict[str, Any] = {
        "ts": time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(record.created)) + f".{int(record.msecs):03d}Z",
        "level": record.levelname.lower(),
        "logger": record.name,
    }
    match = _GROUP_PREFIX.match(message)
    if match:
        out["group"] = match.group("group")
        message = message[match.end() :]
    out["msg"] = message
    if record.exc_info:
        out["error"] = logging.Formatter().formatException(record.exc_info)
    return out


def _logfmt_value(value: Any) -> str:
    text = str(value)
    if text and _BARE.match(text):
        return text
    return '"' + text.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n") + '"'


class LogfmtFormatter(logging.Formatter):
    def format(self, record: logging.LogRecord) -> str:
        return " ".join(f"{k}={_logfmt_value(v)}" for k, v in _fields(record).items())


class JsonFormatter(logging.Formatter):
    def format(self, record: logging.LogRecord) -> str:
        return json.dumps(_fields(record), ensure_ascii=False)


def setup_logging(level: str = "INFO", fmt: str = "logfmt") -> None:
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(JsonFormatter() if fmt == "json" else LogfmtFormatter())
    root = logging.getLogger()
    for old in list(root.handlers):
        root.removeHandler(old)
    root.addHandler(handler)
    root.setLevel(level.upper())
    # Clients' and libraries' chatter stays at WARNING unless asked for.
    for noisy in ("asyncio", "aiosqlite", "sqlalchemy.engine"):
        logging.getLogger(noisy).setLevel(max(logging.WARNING, root.level))
