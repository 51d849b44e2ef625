"""Log lines: the group and the other ``extra`` fields are keys of their own, and no ``None`` is ever written."""

from __future__ import annotations

import json
import logging

from runtime.logging_setup import JsonFormatter, LogfmtFormatter, ThrottleFilter


def _record(msg: str, *args: object, **extra: object) -> logging.LogRecord:
    record = logging.LogRecord("coordinator.group", logging.INFO, "f", 1, msg, args, None)
    record.__dict__.update(extra)
    return record


def test_group_and_fields_are_keys_and_none_is_left_out() -> None:
    record = _record(
        "member joined", group="orders", member="m-1", instance=None, client_id="", client_host="/10.0.0.7"
    )
    line = LogfmtFormatter().format(record)
    assert line.split(" ", 1)[1] == (
        'level=info logger=coordinator.group group=orders msg="member joined" member=m-1 client_id="" '
        "client_host=/10.0.0.7"
    )
    parsed = json.loads(JsonFormatter().format(record))
    assert parsed["group"] == "orders" and parsed["member"] == "m-1" and "instance" not in parsed
    assert list(parsed)[:5] == ["ts", "level", "logger", "group", "msg"]


def test_values_that_need_quotes_are_quoted() -> None:
    line = LogfmtFormatter().format(_record("rebalance", group="my group", reason='the "admin" said so'))
    assert 'group="my group"' in line and 'reason="the \\"admin\\" said so"' in line


def test_the_throttle_summary_keeps_the_fields_of_the_first_line() -> None:
    now = [100.0]
    throttle = ThrottleFilter(window_s=10.0, burst=1, clock=lambda: now[0])
    lines: list[str] = []

    class Capture(logging.Handler):
        def emit(self, record: logging.LogRecord) -> None:
            lines.append(LogfmtFormatter().format(record).split(" ", 1)[1])

    handler = Capture()
    handler.addFilter(throttle)
    logger = logging.getLogger("tests.fields")
    logger.handlers[:] = [handler]
    logger.propagate = False
    logger.setLevel(logging.INFO)
    extra = {"group": "g", "client_host": "/h", "throttle": ("refused", "/h")}
    for _ in range(3):
        logger.info("Heartbeat refused: REBALANCE_IN_PROGRESS", extra=extra)
    now[0] += 10
    throttle.flush()
    assert lines[-1] == (
        'level=info logger=tests.fields group=g msg="Heartbeat refused: REBALANCE_IN_PROGRESS ... and 2 more in the '
        'last 10 s" client_host=/h'
    )


def test_timestamps_are_utc_to_the_millisecond_across_seconds() -> None:
    # The part up to the second is formatted once per second (runtime.logging_setup._timestamp): records of one
    # second, of the next, and of the first again each show their own time.
    formatter = LogfmtFormatter()
    stamps = []
    for created in (1_700_000_000.25, 1_700_000_000.999, 1_700_000_001.0, 1_700_000_000.5):
        record = _record("tick")
        record.created, record.msecs = created, (created - int(created)) * 1000
        stamps.append(formatter.format(record).split(" ", 1)[0])
    assert stamps == [
        "ts=2023-11-14T22:13:20.250Z",
        "ts=2023-11-14T22:13:20.999Z",
        "ts=2023-11-14T22:13:21.000Z",
        "ts=2023-11-14T22:13:20.500Z",
    ]
