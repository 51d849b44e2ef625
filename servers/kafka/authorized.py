"""Authorized-operations bitfields (KIP-430), as Kafka fills them (``AuthHelper.authorizedOperations``).

A client that asks (DescribeGroups v3+ ``include_authorized_operations``, Metadata v8+
``include_topic_authorized_operations``, Metadata v8-10 and DescribeCluster ``include_cluster_authorized_operations``)
is told, per resource, which of the operations the resource type supports its principal may do: bit ``1 << code``
set for each allowed operation, ``code`` being Kafka's AclOperation code (``security.acls.AclOperation``). Each
operation is checked as Kafka does, one authorization of the LITERAL resource per supported operation, so the
implied operations count (Read allows Describe) and a DENY removes its bit. Super users get every supported bit.
With the authorizer off (Kafka: no ``authorizer.class.name``) every supported operation is set. A client that does
not ask gets ``NOT_REQUESTED`` (the schemas' default, -2^31).

The operations each resource type supports are Kafka's ``AclEntry.supportedOperations``. For groups that list has
DESCRIBE_CONFIGS and ALTER_CONFIGS since Kafka 4.0's group configs (KAFKA-14510): the bits say what the ACLs allow,
and are answered the same here even though this daemon has no group configs to describe.

Cost: a bitfield is kept per (principal, host, resource) until the ACLs change, so the steady state is one dictionary
lookup; computing one is an ``Authorizer.authorize`` per supported operation, each examining only the bindings whose
pattern matches the resource (or a lookup in the authorizer's decision cache). Nothing grows with the ACL count.
"""

from __future__ import annotations

import weakref
from typing import Final

from security.acls import CLUSTER_NAME, AclOperation, Authorizer, ResourceType

NOT_REQUESTED: Final = -(2**31)  # the schemas' default: "not requested"

_O = AclOperation
SUPPORTED: Final[dict[ResourceType, tuple[AclOperation, ...]]] = {
    ResourceType.TOPIC: (
        _O.READ, _O.WRITE, _O.CREATE, _O.DELETE, _O.ALTER, _O.DESCRIBE, _O.DESCRIBE_CONFIGS, _O.ALTER_CONFIGS,
    ),
    ResourceType.GROUP: (_O.READ, _O.DESCRIBE, _O.DELETE, _O.DESCRIBE_CONFIGS, _O.ALTER_CONFIGS),
    ResourceType.CLUSTER: (
        _O.CREATE, _O.ALTER, _O.DESCRIBE, _O.CLUSTER_ACTION, _O.DESCRIBE_CONFIGS, _O.ALTER_CONFIGS,
        _O.IDEMPOTENT_WRITE,
    ),
}  # fmt: skip


def bits(operations: tuple[AclOperation, ...]) -> int:
    value = 0
    for op in operations:
        value |= 1 << op
    return value


TOPIC_OPERATIONS: Final = bits(SUPPORTED[ResourceType.TOPIC])
GROUP_OPERATIONS: Final = bits(SUPPORTED[ResourceType.GROUP])
CLUSTER_OPERATIONS: Final = bits(SUPPORTED[ResourceType.CLUSTER])


_Key = tuple[str, str, ResourceType, str]
CACHE_SIZE = 100_000  # bitfields kept per authorizer (cleared when full, and whenever the ACLs change)
_cached: weakref.WeakKeyDictionary[Authorizer, tuple[int, dict[_Key, int]]] = weakref.WeakKeyDictionary()


def authorized_operations(
    authorizer: Authorizer, principal: str, host: str, resource_type: ResourceType, name: str
) -> int:
    """The bitfield of the operations on the resource ``principal`` may do from ``host``. Kept per (principal,
    host, resource) until the ACLs change (the index's ``version``, as the authorizer's own decisions), so the steady
    state is one lookup instead of a check per supported operation."""
    supported = SUPPORTED[resource_type]
    if not authorizer.enabled:
        return bits(supported)
    version = authorizer.index.version
    kept = _cached.get(authorizer)
    if kept is None or kept[0] != version:
        kept = _cached[authorizer] = (version, {})
    cache = kept[1]
    key = (principal, host, resource_type, name)
    value = cache.get(key)
    if value is not None:
        return value
    authorize = authorizer.authorize
    value = 0
    for op in supported:
        if authorize(principal, host, op, resource_type, name):
            value |= 1 << op
    if len(cache) >= CACHE_SIZE:
        cache.clear()
    cache[key] = value
    return value


def cluster_operations(authorizer: Authorizer, principal: str, host: str) -> int:
    """What Metadata (v8-10) and DescribeCluster answer when asked: 0 without Describe on the cluster (Kafka checks
    it first), else the cluster's bitfield."""
    if not authorizer.authorize(principal, host, AclOperation.DESCRIBE, ResourceType.CLUSTER, CLUSTER_NAME):
        return 0
    return authorized_operations(authorizer, principal, host, ResourceType.CLUSTER, CLUSTER_NAME)
