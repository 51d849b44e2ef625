"""Benchmarks: the Kafka-protocol load generator, the bare baseline server and the runner that writes
docs/performance.md (``python -m benchmarks.run``). Not part of the test suite; see docs/performance.md."""
