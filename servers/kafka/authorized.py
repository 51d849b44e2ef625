"""Authorized-operations bitfields (KIP-430) as Kafka answers them with authorization off: every operation the
resource type supports, each as bit ``1 << code`` of Kafka's AclOperation codes. With the authorizer off a client
that asks is told it may do everything the resource allows (with it on, DescribeGroups answers the principal's own
operations: ``groups_admin``); one that does not ask gets ``NOT_REQUESTED``.
"""

from __future__ import annotations

from typing import Final

NOT_REQUESTED: Final = -(2**31)  # the schemas' default: "not requested"

# AclOperation codes (Kafka's numbering).
_CREATE, _DELETE, _ALTER, _DESCRIBE, _READ = 5, 6, 7, 8, 3
_CLUSTER_ACTION, _DESCRIBE_CONFIGS, _ALTER_CONFIGS, _IDEMPOTENT_WRITE = 9, 10, 11, 12


def _bits(*codes: int) -> int:
    value = 0
    for code in codes:
        value |= 1 << code
    return value


# What a group allows, as DescribeGroups has always answered here: READ, DESCRIBE, DELETE. (Kafka's list for groups
# also has DESCRIBE_CONFIGS and ALTER_CONFIGS since KIP-848's group configs; not changed here.)
GROUP_OPERATIONS: Final = _bits(_READ, _DESCRIBE, _DELETE)
# What the cluster resource supports: CREATE, ALTER, DESCRIBE, CLUSTER_ACTION, DESCRIBE_CONFIGS, ALTER_CONFIGS,
# IDEMPOTENT_WRITE.
CLUSTER_OPERATIONS: Final = _bits(
    _CREATE, _ALTER, _DESCRIBE, _CLUSTER_ACTION, _DESCRIBE_CONFIGS, _ALTER_CONFIGS, _IDEMPOTENT_WRITE
)
