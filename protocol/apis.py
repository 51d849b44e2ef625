"""The API table: which api keys and versions this server answers.

``SUPPORTED_VERSIONS`` is exactly what ApiVersions advertises, so it must list only what the server really serves.
Minimums are the lowest versions Kafka 3.9 served for the group and offset APIs, lower than Kafka 4 (KIP-896 dropped
OffsetCommit v0-1, OffsetFetch v0 and ListOffsets v0, which Sarama 1.2x, Burrow 1.2 and other clients in the field
still send); maximums stay at or below what the clients we test send; aiokafka needs the non-flexible versions.
Every version exists in kio 0.6.5 except those few, whose codecs are written by hand in ``protocol.legacy`` (both
checked by the tests).
"""

from __future__ import annotations

from enum import IntEnum
from types import MappingProxyType
from typing import Final

__all__ = ["SUPPORTED_VERSIONS", "ApiKey", "is_supported"]


class ApiKey(IntEnum):
    PRODUCE = 0
    FETCH = 1
    LIST_OFFSETS = 2
    METADATA = 3
    OFFSET_COMMIT = 8
    OFFSET_FETCH = 9
    FIND_COORDINATOR = 10
    JOIN_GROUP = 11
    HEARTBEAT = 12
    LEAVE_GROUP = 13
    SYNC_GROUP = 14
    DESCRIBE_GROUPS = 15
    LIST_GROUPS = 16
    SASL_HANDSHAKE = 17
    API_VERSIONS = 18
    CREATE_TOPICS = 19
    DELETE_TOPICS = 20
    DELETE_RECORDS = 21
    INIT_PRODUCER_ID = 22
    OFFSET_FOR_LEADER_EPOCH = 23
    DESCRIBE_ACLS = 29
    CREATE_ACLS = 30
    DELETE_ACLS = 31
    DESCRIBE_CONFIGS = 32
    ALTER_CONFIGS = 33
    SASL_AUTHENTICATE = 36
    CREATE_PARTITIONS = 37
    DELETE_GROUPS = 42
    INCREMENTAL_ALTER_CONFIGS = 44
    OFFSET_DELETE = 47
    DESCRIBE_USER_SCRAM_CREDENTIALS = 50
    ALTER_USER_SCRAM_CREDENTIALS = 51
    DESCRIBE_CLUSTER = 60
    CONSUMER_GROUP_HEARTBEAT = 68
    CONSUMER_GROUP_DESCRIBE = 69


SUPPORTED_VERSIONS: Final[MappingProxyType[int, tuple[int, int]]] = MappingProxyType(
    {
        ApiKey.API_VERSIONS: (0, 4),
        ApiKey.METADATA: (0, 12),
        ApiKey.FIND_COORDINATOR: (0, 6),
        ApiKey.JOIN_GROUP: (0, 9),
        ApiKey.SYNC_GROUP: (0, 5),
        ApiKey.HEARTBEAT: (0, 4),
        ApiKey.LEAVE_GROUP: (0, 5),
        ApiKey.OFFSET_COMMIT: (0, 9),
        ApiKey.OFFSET_FETCH: (0, 9),
        ApiKey.PRODUCE: (3, 10),
        ApiKey.LIST_OFFSETS: (0, 7),
        ApiKey.FETCH: (4, 12),
        ApiKey.LIST_GROUPS: (0, 5),
        ApiKey.DESCRIBE_GROUPS: (0, 5),
        ApiKey.DELETE_GROUPS: (0, 2),
        ApiKey.OFFSET_DELETE: (0, 0),
        ApiKey.DESCRIBE_CLUSTER: (0, 2),
        # The topic admin APIs (servers/kafka/topics_admin.py): from the lowest version kio has.
        ApiKey.CREATE_TOPICS: (2, 7),
        ApiKey.DELETE_TOPICS: (1, 6),
        ApiKey.DELETE_RECORDS: (0, 2),
        ApiKey.OFFSET_FOR_LEADER_EPOCH: (2, 4),
        ApiKey.DESCRIBE_CONFIGS: (1, 4),
        ApiKey.CREATE_PARTITIONS: (0, 3),
        ApiKey.INCREMENTAL_ALTER_CONFIGS: (0, 1),
        ApiKey.ALTER_CONFIGS: (0, 2),
        ApiKey.INIT_PRODUCER_ID: (0, 4),
        # The ACL APIs (servers/kafka/acls.py): v1-3, the versions kio has (v0 lacks the pattern type).
        ApiKey.DESCRIBE_ACLS: (1, 3),
        ApiKey.CREATE_ACLS: (1, 3),
        ApiKey.DELETE_ACLS: (1, 3),
        # SCRAM credentials (KIP-554, servers/kafka/users_admin.py)
        ApiKey.DESCRIBE_USER_SCRAM_CREDENTIALS: (0, 0),
        ApiKey.ALTER_USER_SCRAM_CREDENTIALS: (0, 0),
        # SASL (servers/kafka/sasl.py): SaslHandshake v0 (raw tokens, dropped by Kafka 4) is not served.
        ApiKey.SASL_HANDSHAKE: (1, 1),
        ApiKey.SASL_AUTHENTICATE: (0, 2),
    }
)


def is_supported(api_key: int, version: int) -> bool:
    bounds = SUPPORTED_VERSIONS.get(api_key)
    return bounds is not None and bounds[0] <= version <= bounds[1]
