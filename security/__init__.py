"""Security's pure core: principals, SCRAM credentials and exchanges, ACLs and their authorizer (issue #19).

Layer 2, beside ``coordinator`` and ``broker``: no I/O, no asyncio; the Kafka listener (TLS, SASL) and the storage
use it.
"""
