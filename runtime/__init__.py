"""The asyncio layer around the pure core: its timer, the Deferred -> Future bridge, metrics and log set-up.

Imports the core and the protocol; never storage, the servers or the wiring.
"""
