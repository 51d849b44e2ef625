"""partition_for against values computed with Java's String.hashCode (docs/semantics.md §11)."""

from __future__ import annotations

import pytest

from coordinator.sharding import java_abs, java_string_hash, partition_for

VECTORS = [
    ("my-group", -1906497762, 12),
    ("test-group", 627841412, 12),
    ("group-id", 506313513, 13),
    ("consumer-group-1", 147483020, 20),
    ("", 0, 0),
    ("polygenelubricants", -2147483648, 0),
    ("GydZG_", -2147483648, 0),
    ("été-😀", -1803456526, 26),
]


@pytest.mark.parametrize(("group_id", "hash_code", "partition"), VECTORS)
def test_java_vectors(group_id: str, hash_code: int, partition: int) -> None:
    assert java_string_hash(group_id) == hash_code
    assert partition_for(group_id, 50) == partition


def test_min_value_maps_to_zero_not_negative() -> None:
    assert java_abs(-(2**31)) == 0
    assert java_abs(-5) == 5
    assert partition_for("polygenelubricants", 7) == 0


def test_surrogate_pairs_count_as_two_units() -> None:
    # U+1F600 is the surrogate pair D83D DE00 in UTF-16: hash = 31 * 0xD83D + 0xDE00
    assert java_string_hash("😀") == 31 * 0xD83D + 0xDE00


def test_single_partition_and_invalid_count() -> None:
    assert partition_for("anything", 1) == 0
    with pytest.raises(ValueError):
        partition_for("g", 0)
