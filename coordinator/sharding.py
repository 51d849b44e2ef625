"""Group -> coordinator shard mapping, bit-exact with Kafka's ``partitionFor``.

Kafka maps a group to a ``__consumer_offsets`` partition with ``Utils.abs(groupId.hashCode()) % numPartitions``.
``String.hashCode`` runs over UTF-16 code units (so a character outside the BMP counts as two surrogate units) with
32-bit wrap-around, and ``Utils.abs(Integer.MIN_VALUE)`` is 0 rather than MIN_VALUE. Clients and tools that compute
the coordinator themselves rely on getting the same answer.
"""

from __future__ import annotations

import struct

_MASK = 0xFFFFFFFF


def java_string_hash(s: str) -> int:
    """Java's ``String.hashCode``: ``h = 31*h + unit`` over UTF-16 code units, as a signed 32-bit int."""
    data = s.encode("utf-16-be", "surrogatepass")
    h = 0
    for (unit,) in struct.iter_unpack(">H", data):
        h = (31 * h + unit) & _MASK
    return h - 0x1_0000_0000 if h & 0x8000_0000 else h


def java_abs(n: int) -> int:
    """Kafka's ``Utils.abs``: ``Integer.MIN_VALUE`` maps to 0, anything else to its absolute value."""
    return 0 if n == -0x8000_0000 else abs(n)


def partition_for(group_id: str, num_partitions: int) -> int:
    if num_partitions <= 0:
        raise ValueError(f"num_partitions must be positive, got {num_partitions}")
    return java_abs(java_string_hash(group_id)) % num_partitions
