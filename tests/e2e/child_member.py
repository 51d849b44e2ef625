"""A confluent-kafka group member in its own process, for SIGKILL tests: prints its assignment as JSON lines.

Usage: python child_member.py BOOTSTRAP GROUP TOPIC SESSION_TIMEOUT_MS
"""

from __future__ import annotations

import json
import sys

from confluent_kafka import Consumer


def main() -> None:
    bootstrap, group, topic, session_timeout_ms = sys.argv[1:5]
    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": group,
            "client.id": "child-member",
            "partition.assignment.strategy": "roundrobin",
            "session.timeout.ms": int(session_timeout_ms),
            "heartbeat.interval.ms": 300,
            "enable.auto.commit": False,
        }
    )
    consumer.subscribe([topic])
    last = None
    while True:
        consumer.poll(0.1)
        current = sorted(tp.partition for tp in consumer.assignment())
        if current != last:
            print(json.dumps(current), flush=True)
            last = current


if __name__ == "__main__":
    main()
