"""The servers: ``servers.kafka`` (the Kafka listener and one adapter per API) and ``servers.http`` (the operator
HTTP API and dashboard). Each is independent of the other; ``daemon`` wires them to one coordinator.
"""
