"""Kafka's authorization model: ACL bindings, filters, and the authorizer that decides a request's operation.

What Kafka does (``StandardAuthorizer`` / ``StandardAuthorizerData``, the ``AclOperation``/``ResourceType``/
``PatternType``/``AclPermissionType`` enums of the client library):

* An ACL *binding* is a resource pattern (type, name, LITERAL or PREFIXED) plus an entry (principal, host,
  operation, ALLOW or DENY). The LITERAL name ``*`` matches every resource of its type.
* A request's check is (principal, client host, operation, resource type, resource name). Super users are allowed
  everything. The ACLs that apply are those on the resource type whose pattern matches the name and whose principal
  is the session's or ``User:*`` and whose host is the client's or ``*``.
* Any applying DENY on the operation (or on ALL) wins. Otherwise an applying ALLOW on the operation, on ALL, or on
  an operation that implies it allows: READ, WRITE, DELETE and ALTER imply DESCRIBE; ALTER_CONFIGS implies
  DESCRIBE_CONFIGS. A DENY on READ does not deny DESCRIBE.
* If the resource has no ACL at all (for any principal), ``allow.everyone.if.no.acl.found`` decides; if it has ACLs
  but none allows, the answer is deny.
* Filters (DescribeAcls, DeleteAcls) may say ANY for every field, and the pattern type MATCH: "every binding that
  would apply to this literal name" (the literal, the ``*`` wildcard and every matching prefix).

What we do: the same rules. ``AclIndex`` keeps the bindings indexed by resource type, then by LITERAL name and by
PREFIXED prefix, so a check looks at the literal name, the wildcard and the name's own prefixes (at most
``len(name) + 1`` dictionary probes) and at the entries on those patterns only: the cost of a check does not grow
with the number of ACLs on other resources. ``Authorizer`` is off unless ``enabled`` (then every check allows, as
the daemon did before ACLs); it holds the index by reference, so a binding created or deleted takes effect on the
next check, on every open connection. Decisions are cached per (principal, host, operation, resource) until the
index changes (its ``version``), so the steady-state check is one dictionary lookup.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from enum import IntEnum


class ResourceType(IntEnum):
    UNKNOWN = 0
    ANY = 1
    TOPIC = 2
    GROUP = 3
    CLUSTER = 4
    TRANSACTIONAL_ID = 5
    DELEGATION_TOKEN = 6
    USER = 7


class AclOperation(IntEnum):
    UNKNOWN = 0
    ANY = 1
    ALL = 2
    READ = 3
    WRITE = 4
    CREATE = 5
    DELETE = 6
    ALTER = 7
    DESCRIBE = 8
    CLUSTER_ACTION = 9
    DESCRIBE_CONFIGS = 10
    ALTER_CONFIGS = 11
    IDEMPOTENT_WRITE = 12
    CREATE_TOKENS = 13
    DESCRIBE_TOKENS = 14


class PermissionType(IntEnum):
    UNKNOWN = 0
    ANY = 1
    DENY = 2
    ALLOW = 3


class PatternType(IntEnum):
    UNKNOWN = 0
    ANY = 1
    MATCH = 2
    LITERAL = 3
    PREFIXED = 4


CLUSTER_NAME = "kafka-cluster"  # the one Cluster resource's name
WILDCARD = "*"  # LITERAL resource name matching every resource of its type; ACL host matching every host
WILDCARD_PRINCIPAL = "User:*"

# ALLOW on one of these also allows the key (Kafka's AclAuthorizer/StandardAuthorizer implied operations).
_IMPLIED_BY: dict[AclOperation, frozenset[AclOperation]] = {
    AclOperation.DESCRIBE: frozenset(
        {AclOperation.DESCRIBE, AclOperation.READ, AclOperation.WRITE, AclOperation.DELETE, AclOperation.ALTER}
    ),
    AclOperation.DESCRIBE_CONFIGS: frozenset({AclOperation.DESCRIBE_CONFIGS, AclOperation.ALTER_CONFIGS}),
}


@dataclass(frozen=True, slots=True)
class AclBinding:
    """One ACL: a resource pattern and an entry, as CreateAcls carries it."""

    resource_type: ResourceType
    resource_name: str
    pattern_type: PatternType
    principal: str
    host: str
    operation: AclOperation
    permission: PermissionType


@dataclass(frozen=True, slots=True)
class AclFilter:
    """A DescribeAcls / DeleteAcls filter: ANY (or None for the strings) matches every value of a field."""

    resource_type: ResourceType = ResourceType.ANY
    resource_name: str | None = None
    pattern_type: PatternType = PatternType.ANY
    principal: str | None = None
    host: str | None = None
    operation: AclOperation = AclOperation.ANY
    permission: PermissionType = PermissionType.ANY

    def matches(self, b: AclBinding) -> bool:
        if self.resource_type != ResourceType.ANY and self.resource_type != b.resource_type:
            return False
        if not self._matches_pattern(b):
            return False
        if self.principal is not None and self.principal != b.principal:
            return False
        if self.host is not None and self.host != b.host:
            return False
        if self.operation != AclOperation.ANY and self.operation != b.operation:
            return False
        return self.permission == PermissionType.ANY or self.permission == b.permission

    def _matches_pattern(self, b: AclBinding) -> bool:
        name = self.resource_name
        if self.pattern_type == PatternType.MATCH:
            if name is None:
                return True
            if b.pattern_type == PatternType.LITERAL:
                return b.resource_name in (name, WILDCARD)
            return b.pattern_type == PatternType.PREFIXED and name.startswith(b.resource_name)
        if self.pattern_type != PatternType.ANY and self.pattern_type != b.pattern_type:
            return False
        return name is None or name == b.resource_name


def invalid_binding(b: AclBinding) -> str | None:
    """Why CreateAcls refuses ``b`` with INVALID_REQUEST (Kafka's ``AclControlManager.validateNewAcl``), or None."""
    if b.resource_type in (ResourceType.UNKNOWN, ResourceType.ANY):
        return "Invalid resourceType " + b.resource_type.name
    if b.pattern_type not in (PatternType.LITERAL, PatternType.PREFIXED):
        return "Invalid patternType " + b.pattern_type.name
    if b.operation in (AclOperation.UNKNOWN, AclOperation.ANY):
        return "Invalid operation " + b.operation.name
    if b.permission not in (PermissionType.ALLOW, PermissionType.DENY):
        return "Invalid permissionType " + b.permission.name
    if not b.resource_name:
        return "Resource name should not be empty"
    if b.resource_type == ResourceType.CLUSTER and (
        b.pattern_type != PatternType.LITERAL or b.resource_name != CLUSTER_NAME
    ):
        return f"The only valid name for the CLUSTER resource is {CLUSTER_NAME}"
    if ":" not in b.principal:
        return f"Could not parse principal from `{b.principal}` (no colon is present separating the principal type"
    if not b.host:
        return "Invalid host (empty)"
    return None


class AclIndex:
    """The ACLs in memory, indexed for the authorizer: type -> LITERAL name -> bindings, type -> prefix -> bindings."""

    def __init__(self, bindings: Iterable[AclBinding] = ()) -> None:
        self._literal: dict[ResourceType, dict[str, list[AclBinding]]] = {}
        self._prefixed: dict[ResourceType, dict[str, list[AclBinding]]] = {}
        self._all: set[AclBinding] = set()
        self.version = 0  # bumped by every change: the authorizer's decision cache is valid for one version
        for b in bindings:
            self.add(b)

    def __len__(self) -> int:
        return len(self._all)

    def __contains__(self, b: object) -> bool:
        return b in self._all

    def __iter__(self) -> Iterator[AclBinding]:
        return iter(self._all)

    def _table(self, b: AclBinding) -> dict[str, list[AclBinding]]:
        tables = self._literal if b.pattern_type == PatternType.LITERAL else self._prefixed
        return tables.setdefault(b.resource_type, {})

    def add(self, b: AclBinding) -> bool:
        """Add ``b``; False if it was there already (creating an existing ACL is not an error in Kafka)."""
        if b in self._all:
            return False
        self._all.add(b)
        self._table(b).setdefault(b.resource_name, []).append(b)
        self.version += 1
        return True

    def remove(self, b: AclBinding) -> bool:
        if b not in self._all:
            return False
        self._all.discard(b)
        self.version += 1
        table = self._table(b)
        entries = table[b.resource_name]
        entries.remove(b)
        if not entries:
            del table[b.resource_name]
        return True

    def matching(self, f: AclFilter) -> list[AclBinding]:
        """The bindings ``f`` matches, in a stable order (type, pattern, name, principal, host, operation)."""
        found = [b for b in self._all if f.matches(b)]
        found.sort(key=_sort_key)
        return found

    def applicable(self, resource_type: ResourceType, name: str) -> Iterator[AclBinding]:
        """Every binding whose pattern matches the resource: its literal name, the wildcard, its prefixes."""
        literal = self._literal.get(resource_type)
        if literal:
            yield from literal.get(name, ())
            if name != WILDCARD:
                yield from literal.get(WILDCARD, ())
        prefixed = self._prefixed.get(resource_type)
        if prefixed:
            if len(prefixed) <= len(name):
                for prefix, entries in prefixed.items():
                    if name.startswith(prefix):
                        yield from entries
            else:
                for end in range(1, len(name) + 1):
                    yield from prefixed.get(name[:end], ())


def _sort_key(b: AclBinding) -> tuple[int, int, str, str, str, int, int]:
    return (b.resource_type, b.pattern_type, b.resource_name, b.principal, b.host, b.operation, b.permission)


class Authorizer:
    """Decides (principal, host, operation, resource) as Kafka's StandardAuthorizer does; see the module docstring.

    ``enabled`` False (the default, ``authorizer.enabled``) allows everything: the daemon behaves as it did before
    ACLs. ``super_users`` are principals such as ``User:admin`` (Kafka's ``super.users``, split on ``;``).
    """

    def __init__(
        self,
        index: AclIndex | None = None,
        *,
        enabled: bool = False,
        super_users: Iterable[str] = (),
        allow_everyone_if_no_acl_found: bool = False,
    ) -> None:
        self.index = index if index is not None else AclIndex()
        self.enabled = enabled
        self.super_users = frozenset(super_users)
        self.allow_everyone_if_no_acl_found = allow_everyone_if_no_acl_found
        self._cache: dict[tuple[str, str, AclOperation, ResourceType, str], bool] = {}
        self._cache_version = -1

    CACHE_SIZE = 100_000  # decisions kept (cleared when full, and whenever the ACLs change)

    def authorize(
        self, principal: str, host: str, operation: AclOperation, resource_type: ResourceType, name: str
    ) -> bool:
        if not self.enabled:
            return True
        key = (principal, host, operation, resource_type, name)
        cache = self._cache
        if self._cache_version != self.index.version:
            cache.clear()
            self._cache_version = self.index.version
        decision = cache.get(key)
        if decision is None:
            if len(cache) >= self.CACHE_SIZE:
                cache.clear()
            decision = cache[key] = self._decide(principal, host, operation, resource_type, name)
        return decision

    def _decide(
        self, principal: str, host: str, operation: AclOperation, resource_type: ResourceType, name: str
    ) -> bool:
        if principal in self.super_users:
            return True
        if host[:1] == "/":  # the listener's "/1.2.3.4" (Kafka's InetAddress form); ACL hosts are bare addresses
            host = host[1:]
        allowing = _IMPLIED_BY.get(operation)
        found_any = False
        allowed = False
        for b in self.index.applicable(resource_type, name):
            found_any = True
            if b.principal != principal and b.principal != WILDCARD_PRINCIPAL:
                continue
            if b.host != WILDCARD and b.host != host:
                continue
            op = b.operation
            if b.permission == PermissionType.DENY:
                if op == operation or op == AclOperation.ALL:
                    return False
            elif op == operation or op == AclOperation.ALL or (allowing is not None and op in allowing):
                allowed = True
        if not found_any:
            return self.allow_everyone_if_no_acl_found
        return allowed

    def authorize_any(self, principal: str, host: str, operation: AclOperation, resource_type: ResourceType) -> bool:
        """Whether the principal may do ``operation`` on *some* resource of the type (Kafka's
        ``Authorizer.authorizeByResourceType``, KIP-679: InitProducerId without IdempotentWrite on the cluster needs
        Write on any topic), as Kafka decides it: allowed if a check on a made-up name (``hardcode``) is allowed
        (super users; ``allow.everyone.if.no.acl.found`` when no ACL applies to that name); denied by a DENY on the
        wildcard; allowed by an ALLOW on the wildcard; else allowed if some LITERAL ALLOW is not denied by a DENY on
        the same literal name nor by a PREFIXED DENY on one of its prefixes, or some PREFIXED ALLOW has no PREFIXED
        DENY on one of its prefixes (itself included). Walks the type's bindings: used once per producer, not per
        request."""
        if not self.enabled or self.authorize(principal, host, operation, resource_type, "hardcode"):
            return True
        if host[:1] == "/":
            host = host[1:]
        allows: dict[PatternType, set[str]] = {PatternType.LITERAL: set(), PatternType.PREFIXED: set()}
        denies: dict[PatternType, set[str]] = {PatternType.LITERAL: set(), PatternType.PREFIXED: set()}
        wildcard_allow = False
        for b in self.index:
            if b.resource_type != resource_type:
                continue
            if (b.principal != principal and b.principal != WILDCARD_PRINCIPAL) or b.host not in (WILDCARD, host):
                continue
            if b.operation != operation and b.operation != AclOperation.ALL:
                continue
            literal_wildcard = b.pattern_type == PatternType.LITERAL and b.resource_name == WILDCARD
            if b.permission == PermissionType.DENY:
                if literal_wildcard:
                    return False
                denies[b.pattern_type].add(b.resource_name)
            elif literal_wildcard:
                wildcard_allow = True
            else:
                allows[b.pattern_type].add(b.resource_name)
        if wildcard_allow:
            return True
        denied_prefixes = denies[PatternType.PREFIXED]
        for pattern_type, names in allows.items():
            for name in names:
                if pattern_type == PatternType.LITERAL and name in denies[PatternType.LITERAL]:
                    continue
                if not any(name[:end] in denied_prefixes for end in range(1, len(name) + 1)):
                    return True
        return False

    def authorize_cluster(self, principal: str, host: str, operation: AclOperation) -> bool:
        return self.authorize(principal, host, operation, ResourceType.CLUSTER, CLUSTER_NAME)


def parse_super_users(value: str) -> list[str]:
    """Kafka's ``super.users``: principals separated by ``;`` (``User:alice;User:bob``), blanks ignored."""
    return [p.strip() for p in value.split(";") if p.strip()]
