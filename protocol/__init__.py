"""Sans-I/O Kafka wire protocol: framing, headers, message codec and error codes.

Rules of this package: no sockets, no asyncio, no clock, no logging side effects, and no imports from the
rest of this project. Bytes go in, typed values come out (and the reverse).
"""
