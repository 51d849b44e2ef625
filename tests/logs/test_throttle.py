"""ThrottleFilter: repeated warnings from one cause are summarised instead of written one by one."""

from __future__ import annotations

import logging

import pytest

from runtime.logging_setup import ThrottleFilter


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


class Capture(logging.Handler):
    def __init__(self) -> None:
        super().__init__()
        self.lines: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.lines.append(record.getMessage())


@pytest.fixture
def setup() -> tuple[logging.Logger, ThrottleFilter, Capture, Clock]:
    clock = Clock()
    throttle = ThrottleFilter(window_s=10.0, burst=2, max_keys=3, clock=clock)
    capture = Capture()
    capture.addFilter(throttle)
    logger = logging.getLogger("tests.throttle")
    logger.handlers[:] = [capture]
    logger.propagate = False
    logger.setLevel(logging.INFO)
    return logger, throttle, capture, clock


def test_burst_then_one_summary_when_the_window_ends(
    setup: tuple[logging.Logger, ThrottleFilter, Capture, Clock],
) -> None:
    logger, throttle, capture, clock = setup
    for i in range(12_347):
        logger.warning("bad frame %d from %s", i, "10.0.0.7", extra={"throttle": ("malformed", "10.0.0.7")})
    assert capture.lines == ["bad frame 0 from 10.0.0.7", "bad frame 1 from 10.0.0.7"]
    assert throttle.suppressed_total == 12_345
    clock.now += 10
    assert throttle.flush() == 1
    assert capture.lines[2] == "bad frame 0 from 10.0.0.7 ... and 12,345 more in the last 10 s"
    assert throttle.flush() == 0  # told once


def test_keys_are_independent_and_unkeyed_records_always_pass(
    setup: tuple[logging.Logger, ThrottleFilter, Capture, Clock],
) -> None:
    logger, _, capture, _ = setup
    for _ in range(5):
        logger.warning("a", extra={"throttle": "a"})
        logger.warning("b", extra={"throttle": "b"})
        logger.warning("plain")
    assert capture.lines.count("a") == 2
    assert capture.lines.count("b") == 2
    assert capture.lines.count("plain") == 5


def test_a_new_window_after_the_old_one_ended_writes_the_summary_first(
    setup: tuple[logging.Logger, ThrottleFilter, Capture, Clock],
) -> None:
    logger, _, capture, clock = setup
    for _ in range(4):
        logger.warning("x", extra={"throttle": "k"})
    clock.now += 11
    logger.warning("y", extra={"throttle": "k"})
    assert capture.lines == ["x", "x", "x ... and 2 more in the last 11 s", "y"]


def test_memory_is_bounded_by_max_keys_and_evicted_counts_are_told(
    setup: tuple[logging.Logger, ThrottleFilter, Capture, Clock],
) -> None:
    logger, throttle, capture, _ = setup
    for _ in range(3):
        logger.warning("first", extra={"throttle": 0})
    for key in range(1, 100):
        logger.warning("peer %d", key, extra={"throttle": key})
    assert len(throttle._windows) <= 3
    assert "first ... and 1 more in the last 1 s" in capture.lines
