"""The pure group coordinator: the classic group state machine, offsets, records. No I/O, no asyncio, injected time.

Layering (docs/architecture.md): this package imports ``protocol`` (error codes, the consumer protocol) and nothing
else of ours. The asyncio layer (``runtime``) drives its timers, ``storage`` persists the records it produces, and the
servers (``servers.kafka``, ``servers.http``) translate requests into its messages.
"""
