"""Structured logs: logfmt (default) or JSON lines on stderr.

Every line is ``ts level logger [group] msg [fields...]``. A log call names the group it is about with
``extra={"group": group_id}``; it is written as its own ``group`` key (never inside the message), so
``grep group=orders`` (or a JSON query) shows one group's story. The other keys of ``FIELDS`` (``member``,
``client_id``, ``client_host``, ``principal``, ...) are written after the message the same way when a call passes them.
A key whose value is None is left out: no line says ``None``. (A message that still starts with ``[group=<id>] ``
has the id lifted into the ``group`` key as well.)

Warnings a client can cause (a malformed frame, a limit hit, a commit refused during a storage outage) are
rate-limited: a log call with ``extra={"throttle": KEY}`` (KEY names the cause and the peer, e.g.
``("malformed", "10.0.0.7")``) passes ``ThrottleFilter``: the first ``burst`` records of a key in a window of
``window_s`` seconds are written, the rest are counted, and when the window ends one summary line is written: the
first message of the window followed by "... and 12,345 more in the last 10 s". Calls without the key are never held
back. The filter keeps at most ``max_keys`` keys (least recently used first out, its summary written), so a peer that
varies its key cannot grow memory.
"""

from __future__ import annotations

import json
import logging
import re
import sys
import threading
import time
from collections import OrderedDict
from collections.abc import Callable, Hashable
from typing import Any

_GROUP_PREFIX = re.compile(r"^\[group=(?P<group>[^\]]*)\]\s*")
_BARE = re.compile(r"^[^\s=\"]+$")

# ``extra`` keys written as fields of their own after the message, in this order (``group`` comes before it).
FIELDS = (
    "member",
    "instance",
    "generation",
    "reason",
    "api",
    "code",
    "client_id",
    "client_host",
    "principal",
)


def record_fields(record: logging.LogRecord) -> dict[str, Any]:
    """The ``group`` and ``FIELDS`` values a record carries (None ones left out)."""
    out: dict[str, Any] = {}
    group = getattr(record, "group", None)
    if group is not None:
        out["group"] = group
    for key in FIELDS:
        value = getattr(record, key, None)
        if value is not None:
            out[key] = value
    return out


def _timestamp(created: float, msecs: float) -> str:
    """``created`` as ``2026-11-27T01:02:03.456Z``; the part up to the second is formatted once per second (kept
    with its second in one tuple: threads that log read and replace it whole)."""
    global _last_second
    second = int(created)
    cached = _last_second
    if cached[0] != second:
        cached = _last_second = (second, time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(created)))
    return f"{cached[1]}.{int(msecs):03d}Z"


_last_second: tuple[int, str] = (-1, "")


def _fields(record: logging.LogRecord) -> dict[str, Any]:
    message = record.getMessage()
    out: dict[str, Any] = {
        "ts": _timestamp(record.created, record.msecs),
        "level": record.levelname.lower(),
        "logger": record.name,
    }
    extra = record_fields(record)
    group = extra.pop("group", None)
    match = _GROUP_PREFIX.match(message) if message.startswith("[group=") else None
    if match:
        group = match.group("group") if group is None else group
        message = message[match.end() :]
    if group is not None:
        out["group"] = group
    out["msg"] = message
    out.update(extra)
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


class _Window:
    __slots__ = ("fields", "level", "logger", "message", "started", "suppressed")

    def __init__(self, record: logging.LogRecord, now: float) -> None:
        self.logger = record.name
        self.level = record.levelno
        self.message = record.getMessage()
        self.fields = record_fields(record)  # the summary line carries the first record's group, client, ...
        self.started = now
        self.suppressed = 0


class ThrottleFilter(logging.Filter):
    """Rate-limits records that carry a ``throttle`` key (see the module docstring). Thread-safe."""

    def __init__(
        self,
        window_s: float = 10.0,
        burst: int = 3,
        max_keys: int = 4096,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        super().__init__()
        self.window_s = window_s
        self.burst = burst
        self.max_keys = max_keys
        self._clock = clock
        self._lock = threading.Lock()
        self._windows: OrderedDict[Hashable, _Window] = OrderedDict()
        self._passed: dict[Hashable, int] = {}
        self.suppressed_total = 0  # records held back since start (observability)

    def filter(self, record: logging.LogRecord) -> bool:
        key = getattr(record, "throttle", None)
        if key is None or getattr(record, "throttle_summary", False):
            return True
        now = self._clock()
        summaries: list[tuple[_Window, float]] = []
        with self._lock:
            window = self._windows.get(key)
            if window is not None and now - window.started >= self.window_s:
                if window.suppressed:
                    summaries.append((window, now))
                del self._windows[key]
                window = None
            if window is None:
                self._windows[key] = _Window(record, now)
                self._passed[key] = 1
                while len(self._windows) > self.max_keys:
                    old_key, old = self._windows.popitem(last=False)
                    self._passed.pop(old_key, None)
                    if old.suppressed:
                        summaries.append((old, now))
                allow = True
            else:
                self._windows.move_to_end(key)
                passed = self._passed.get(key, 0)
                if passed < self.burst:
                    self._passed[key] = passed + 1
                    allow = True
                else:
                    window.suppressed += 1
                    self.suppressed_total += 1
                    allow = False
        for old, at in summaries:
            _write_summary(old, at)
        return allow

    def flush(self, *, everything: bool = False) -> int:
        """Write the summary of every window that has ended (all of them with ``everything``); return how many."""
        now = self._clock()
        due: list[_Window] = []
        with self._lock:
            for key in [k for k, w in self._windows.items() if everything or now - w.started >= self.window_s]:
                window = self._windows.pop(key)
                self._passed.pop(key, None)
                if window.suppressed:
                    due.append(window)
        for window in due:
            _write_summary(window, now)
        return len(due)


def _write_summary(window: _Window, now: float) -> None:
    elapsed = max(1, round(now - window.started))
    logging.getLogger(window.logger).log(
        window.level,
        "%s ... and %s more in the last %d s",
        window.message,
        f"{window.suppressed:,}",
        elapsed,
        extra={**window.fields, "throttle": None, "throttle_summary": True},
    )


_throttle: ThrottleFilter | None = None


def _flush_forever(throttle: ThrottleFilter) -> None:
    stop = threading.Event()
    while not stop.wait(throttle.window_s / 2):
        throttle.flush()


def setup_logging(level: str = "INFO", fmt: str = "logfmt", *, throttle_window_s: float = 10.0) -> None:
    global _throttle
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(JsonFormatter() if fmt == "json" else LogfmtFormatter())
    if _throttle is None:
        _throttle = ThrottleFilter(window_s=throttle_window_s)
        # Summaries of windows no later record ends are written by this thread, so a burst that stops is still told.
        threading.Thread(target=_flush_forever, args=(_throttle,), name="kgc-log-throttle", daemon=True).start()
    handler.addFilter(_throttle)
    root = logging.getLogger()
    for old in list(root.handlers):
        root.removeHandler(old)
    root.addHandler(handler)
    root.setLevel(level.upper())
    # No record written here shows its caller, thread or process: skip collecting them (``logging._srcfile = None``
    # is the documented way to skip ``findCaller``'s stack walk). ~2.5 of the ~14 us of a line at INFO, e.g. the
    # "member joined" line of every member-adding JoinGroup (benchmarks/notes.md, eighth round: joins).
    logging._srcfile = None
    logging.logThreads = False
    logging.logProcesses = False
    logging.logMultiprocessing = False
    # Clients' and libraries' chatter stays at WARNING unless asked for.
    for noisy in ("asyncio", "aiosqlite", "sqlalchemy.engine"):
        logging.getLogger(noisy).setLevel(max(logging.WARNING, root.level))
