"""The log retention loop: every ``log.retention.check.interval.ms`` one pass of ``broker.retention.run_retention``
(whole batches beyond ``retention.ms`` / ``retention.bytes`` deleted, log starts moved; one append for the pass,
which the storage writer writes in one transaction). The pass itself is pure and tested on a manual clock; this
only schedules it. A pass that fails (it cannot: the core only queues records) is logged and the loop goes on."""

from __future__ import annotations

import asyncio
import logging

from broker.partitions import Broker
from broker.retention import run_retention

log = logging.getLogger("broker.retention")


async def run_log_retention(broker: Broker, interval_ms: int) -> None:
    """Run a retention pass every ``interval_ms``, until cancelled."""
    while True:
        await asyncio.sleep(interval_ms / 1000)
        try:
            moved = run_retention(broker)
        except Exception:  # a bug in a pass must not end retention for the daemon's life
            log.exception("log retention pass failed")
            continue
        if moved:
            log.info("log retention: the log start moves on %d partition(s)", moved)
