import pytest

from protocol import legacy
from protocol.apis import SUPPORTED_VERSIONS, ApiKey, is_supported
from protocol.codec import request_class, response_class

# The advertised table, as README and docs/robustness.md (old clients) state it for this server.
SPEC = {
    "ApiVersions": (18, 0, 4),
    "Metadata": (3, 0, 12),
    "FindCoordinator": (10, 0, 6),
    "JoinGroup": (11, 0, 9),
    "SyncGroup": (14, 0, 5),
    "Heartbeat": (12, 0, 4),
    "LeaveGroup": (13, 0, 5),
    "OffsetCommit": (8, 0, 9),
    "OffsetFetch": (9, 0, 9),
    "Produce": (0, 3, 10),
    "ListOffsets": (2, 0, 7),
    "Fetch": (1, 4, 12),
    "ListGroups": (16, 0, 5),
    "DescribeGroups": (15, 0, 5),
    "DeleteGroups": (42, 0, 2),
    "OffsetDelete": (47, 0, 0),
    "DescribeCluster": (60, 0, 2),
    "CreateTopics": (19, 2, 7),
    "DeleteTopics": (20, 1, 6),
    "DeleteRecords": (21, 0, 2),
    "OffsetForLeaderEpoch": (23, 2, 4),
    "DescribeConfigs": (32, 1, 4),
    "CreatePartitions": (37, 0, 3),
    "IncrementalAlterConfigs": (44, 0, 1),
    "AlterConfigs": (33, 0, 2),
    "InitProducerId": (22, 0, 4),
    "DescribeAcls": (29, 1, 3),
    "CreateAcls": (30, 1, 3),
    "DeleteAcls": (31, 1, 3),
    "DescribeUserScramCredentials": (50, 0, 0),
    "AlterUserScramCredentials": (51, 0, 0),
    "SaslHandshake": (17, 1, 1),
    "SaslAuthenticate": (36, 0, 2),
}


def test_advertises_exactly_the_specified_table() -> None:
    assert dict(SUPPORTED_VERSIONS) == {key: (lo, hi) for key, lo, hi in SPEC.values()}


def test_api_key_numbers_are_kafkas() -> None:
    assert ApiKey.PRODUCE == 0 and ApiKey.FETCH == 1 and ApiKey.LIST_OFFSETS == 2 and ApiKey.METADATA == 3
    assert ApiKey.OFFSET_COMMIT == 8 and ApiKey.OFFSET_FETCH == 9 and ApiKey.FIND_COORDINATOR == 10
    assert ApiKey.JOIN_GROUP == 11 and ApiKey.HEARTBEAT == 12 and ApiKey.LEAVE_GROUP == 13
    assert ApiKey.SYNC_GROUP == 14 and ApiKey.DESCRIBE_GROUPS == 15 and ApiKey.LIST_GROUPS == 16
    assert ApiKey.API_VERSIONS == 18 and ApiKey.DELETE_GROUPS == 42 and ApiKey.OFFSET_DELETE == 47
    assert ApiKey.DESCRIBE_CLUSTER == 60


ALL_VERSIONS = [(n, k, v) for n, (k, lo, hi) in SPEC.items() for v in range(lo, hi + 1)]


# Served although kio 0.6.5 has no schema for them (Kafka 3.9 served them, Kafka 4 dropped them): protocol.legacy.
HAND_WRITTEN = {(8, 0), (8, 1), (9, 0), (2, 0)}


@pytest.mark.parametrize(("name", "key", "version"), ALL_VERSIONS)
def test_kio_has_every_advertised_version(name: str, key: int, version: int) -> None:
    req, resp = request_class(key, version), response_class(key, version)
    assert (req.__api_key__, req.__version__) == (key, version)
    assert (resp.__api_key__, resp.__version__) == (key, version)
    if (key, version) in HAND_WRITTEN:
        assert req is legacy.REQUEST_CLASSES[(key, version)] and resp is legacy.RESPONSE_CLASSES[(key, version)]
        assert req.__name__ == f"{name}RequestV{version}" and resp.__name__ == f"{name}ResponseV{version}"
    else:
        assert req.__name__ == f"{name}Request" and resp.__name__ == f"{name}Response"


def test_the_hand_written_versions_are_exactly_those_kio_lacks() -> None:
    from kio.index import KioIndexError, load_request_schema

    missing = set()
    for key, lo, hi in SPEC.values():
        for version in range(lo, hi + 1):
            try:
                load_request_schema(key, version)
            except KioIndexError:
                missing.add((key, version))
    assert missing == HAND_WRITTEN == set(legacy.REQUEST_CLASSES) == set(legacy.RESPONSE_CLASSES)


@pytest.mark.parametrize(("key", "lo", "hi"), list(SPEC.values()))
def test_is_supported_bounds(key: int, lo: int, hi: int) -> None:
    assert is_supported(key, lo) and is_supported(key, hi)
    assert not is_supported(key, lo - 1)
    assert not is_supported(key, hi + 1)


@pytest.mark.parametrize("key", [26, ApiKey.CONSUMER_GROUP_HEARTBEAT, 999, -1])
def test_unserved_keys_are_unsupported(key: int) -> None:
    assert not any(is_supported(key, v) for v in range(0, 20))


def test_unknown_schema_is_a_value_error() -> None:
    with pytest.raises(ValueError):
        request_class(12, 99)
    with pytest.raises(ValueError):
        response_class(999, 0)
