"""The pure group coordinator: state machine, offsets, records. No I/O, no asyncio, injected time.

Layering: this package imports ``protocol`` (error codes) and nothing else of ours. The asyncio servers drive it;
storage persists the records it produces.
"""
