"""The pure authorizer: Kafka's matching rules, implied operations, DENY precedence, filters, and the index."""

from __future__ import annotations

from security.acls import (
    CLUSTER_NAME,
    AclBinding,
    AclFilter,
    AclIndex,
    AclOperation,
    Authorizer,
    PatternType,
    PermissionType,
    ResourceType,
    invalid_binding,
    parse_super_users,
)

T, G, C = ResourceType.TOPIC, ResourceType.GROUP, ResourceType.CLUSTER
LIT, PRE = PatternType.LITERAL, PatternType.PREFIXED
ALLOW, DENY = PermissionType.ALLOW, PermissionType.DENY
Op = AclOperation


def acl(
    rt: ResourceType,
    name: str,
    op: AclOperation,
    perm: PermissionType = ALLOW,
    principal: str = "User:alice",
    pattern: PatternType = LIT,
    host: str = "*",
) -> AclBinding:
    return AclBinding(rt, name, pattern, principal, host, op, perm)


def authorizer(*bindings: AclBinding, **kwargs: object) -> Authorizer:
    return Authorizer(AclIndex(bindings), enabled=True, **kwargs)  # type: ignore[arg-type]


def test_disabled_authorizer_allows_everything() -> None:
    a = Authorizer(AclIndex([acl(G, "g", Op.READ, DENY, principal="User:*")]))
    assert a.authorize("User:ANONYMOUS", "1.2.3.4", Op.READ, G, "g")


def test_no_acl_on_the_resource_uses_allow_everyone_if_no_acl_found() -> None:
    assert not authorizer().authorize("User:alice", "h", Op.READ, G, "g")
    assert authorizer(allow_everyone_if_no_acl_found=True).authorize("User:alice", "h", Op.READ, G, "g")
    # the resource has an ACL (for someone else): the default no longer applies
    a = authorizer(acl(G, "g", Op.READ, principal="User:bob"), allow_everyone_if_no_acl_found=True)
    assert not a.authorize("User:alice", "h", Op.READ, G, "g")
    assert a.authorize("User:bob", "h", Op.READ, G, "g")


def test_super_users_are_allowed_everything() -> None:
    a = authorizer(acl(G, "g", Op.ALL, DENY, principal="User:*"), super_users=["User:admin"])
    assert a.authorize("User:admin", "h", Op.DELETE, G, "g")
    assert not a.authorize("User:alice", "h", Op.READ, G, "g")
    assert parse_super_users(" User:a ; User:b;;") == ["User:a", "User:b"]


def test_implied_operations() -> None:
    for op in (Op.READ, Op.WRITE, Op.DELETE, Op.ALTER):
        a = authorizer(acl(T, "t", op))
        assert a.authorize("User:alice", "h", Op.DESCRIBE, T, "t"), op
        assert a.authorize("User:alice", "h", op, T, "t")
    a = authorizer(acl(T, "t", Op.CREATE))
    assert not a.authorize("User:alice", "h", Op.DESCRIBE, T, "t")
    a = authorizer(acl(T, "t", Op.ALTER_CONFIGS))
    assert a.authorize("User:alice", "h", Op.DESCRIBE_CONFIGS, T, "t")
    assert not a.authorize("User:alice", "h", Op.DESCRIBE, T, "t")
    a = authorizer(acl(T, "t", Op.READ))
    assert not a.authorize("User:alice", "h", Op.WRITE, T, "t")
    a = authorizer(acl(T, "t", Op.ALL))
    assert a.authorize("User:alice", "h", Op.IDEMPOTENT_WRITE, T, "t")


def test_deny_overrides_allow_but_only_for_its_operation() -> None:
    a = authorizer(acl(T, "t", Op.ALL), acl(T, "t", Op.READ, DENY))
    assert not a.authorize("User:alice", "h", Op.READ, T, "t")
    assert a.authorize("User:alice", "h", Op.DESCRIBE, T, "t")  # a DENY on READ does not deny DESCRIBE
    assert a.authorize("User:alice", "h", Op.WRITE, T, "t")
    a = authorizer(acl(T, "t", Op.READ), acl(T, "*", Op.ALL, DENY, principal="User:*"))
    assert not a.authorize("User:alice", "h", Op.DESCRIBE, T, "t")


def test_patterns_literal_wildcard_and_prefixed() -> None:
    a = authorizer(acl(T, "orders", Op.READ), acl(T, "pay.", Op.WRITE, pattern=PRE), acl(G, "*", Op.READ))
    assert a.authorize("User:alice", "h", Op.READ, T, "orders")
    assert not a.authorize("User:alice", "h", Op.READ, T, "orders2")
    assert a.authorize("User:alice", "h", Op.WRITE, T, "pay.eu")
    assert a.authorize("User:alice", "h", Op.WRITE, T, "pay.")
    assert not a.authorize("User:alice", "h", Op.WRITE, T, "pay")
    assert a.authorize("User:alice", "h", Op.READ, G, "any-group")
    assert not a.authorize("User:alice", "h", Op.READ, ResourceType.TOPIC, "other")


def test_prefixed_deny_over_literal_allow() -> None:
    a = authorizer(acl(T, "pay.eu", Op.WRITE), acl(T, "pay.", Op.WRITE, DENY, pattern=PRE))
    assert not a.authorize("User:alice", "h", Op.WRITE, T, "pay.eu")


def test_principal_and_host() -> None:
    a = authorizer(acl(G, "g", Op.READ, principal="User:*", host="10.0.0.1"))
    assert a.authorize("User:anyone", "10.0.0.1", Op.READ, G, "g")
    assert not a.authorize("User:anyone", "10.0.0.2", Op.READ, G, "g")
    a = authorizer(acl(G, "g", Op.READ, principal="User:bob"))
    assert not a.authorize("User:alice", "h", Op.READ, G, "g")


def test_acls_take_effect_at_once_through_the_shared_index() -> None:
    index = AclIndex()
    a = Authorizer(index, enabled=True)
    assert not a.authorize("User:alice", "h", Op.READ, G, "g")
    binding = acl(G, "g", Op.READ)
    assert index.add(binding) and not index.add(binding)
    assert a.authorize("User:alice", "h", Op.READ, G, "g")
    assert index.remove(binding) and not index.remove(binding)
    assert not a.authorize("User:alice", "h", Op.READ, G, "g")
    assert len(index) == 0


def test_filters() -> None:
    bindings = [
        acl(T, "orders", Op.READ),
        acl(T, "*", Op.DESCRIBE, principal="User:*"),
        acl(T, "ord", Op.WRITE, DENY, pattern=PRE),
        acl(T, "x", Op.WRITE, pattern=PRE),
        acl(G, "orders", Op.READ, principal="User:bob"),
        acl(C, CLUSTER_NAME, Op.ALTER),
    ]
    index = AclIndex(bindings)
    assert len(index.matching(AclFilter())) == 6
    assert index.matching(AclFilter(resource_type=T, resource_name="orders", pattern_type=LIT)) == [bindings[0]]
    matched = index.matching(AclFilter(resource_type=T, resource_name="orders", pattern_type=PatternType.MATCH))
    assert set(matched) == {bindings[0], bindings[1], bindings[2]}
    assert index.matching(AclFilter(pattern_type=PRE, permission=DENY)) == [bindings[2]]
    assert index.matching(AclFilter(principal="User:bob")) == [bindings[4]]
    assert index.matching(AclFilter(operation=Op.ALTER)) == [bindings[5]]
    assert index.matching(AclFilter(host="10.0.0.1")) == []


def test_invalid_bindings() -> None:
    assert invalid_binding(acl(T, "t", Op.READ)) is None
    assert invalid_binding(acl(ResourceType.ANY, "t", Op.READ))
    assert invalid_binding(acl(T, "t", Op.ANY))
    assert invalid_binding(acl(T, "t", Op.READ, PermissionType.ANY))
    assert invalid_binding(acl(T, "t", Op.READ, pattern=PatternType.MATCH))
    assert invalid_binding(acl(T, "t", Op.READ, principal="alice"))
    assert invalid_binding(acl(C, "other", Op.ALTER))
    assert invalid_binding(acl(C, CLUSTER_NAME, Op.ALTER)) is None


def test_many_acls_on_other_resources_are_not_looked_at() -> None:
    """The index: a check visits only the bindings on the resource's own patterns, whatever their total."""
    index = AclIndex(acl(T, f"topic-{i}", Op.READ, principal=f"User:u{i}") for i in range(10_000))
    index.add(acl(T, "topic-", Op.WRITE, pattern=PRE, principal="User:w"))
    assert len(list(index.applicable(T, "topic-42"))) == 2
    a = Authorizer(index, enabled=True)
    assert a.authorize("User:u42", "h", Op.READ, T, "topic-42")
    assert not a.authorize("User:u41", "h", Op.READ, T, "topic-42")
    assert a.authorize("User:w", "h", Op.DESCRIBE, T, "topic-9999")


def test_authorize_any_topic_for_idempotent_producers() -> None:
    a = authorizer(acl(T, "pay.", Op.WRITE, pattern=PRE))
    assert a.authorize_any("User:alice", "/1.2.3.4", Op.WRITE, T)
    assert not a.authorize_any("User:bob", "h", Op.WRITE, T)
    a = authorizer(acl(T, "pay.", Op.WRITE, pattern=PRE), acl(T, "pay.", Op.WRITE, DENY, pattern=PRE))
    assert not a.authorize_any("User:alice", "h", Op.WRITE, T)
    a = authorizer(acl(T, "t", Op.ALL), acl(T, "*", Op.WRITE, DENY, principal="User:*"))
    assert not a.authorize_any("User:alice", "h", Op.WRITE, T)


def test_authorize_any_as_kafkas_authorize_by_resource_type() -> None:
    """Kafka's Authorizer.authorizeByResourceType: a PREFIXED DENY on a prefix of an allowed name dominates it, a
    LITERAL DENY only its own name; allow.everyone.if.no.acl.found counts when no ACL applies to a made-up name."""
    a = authorizer(acl(T, "pay.orders", Op.WRITE), acl(T, "pay", Op.WRITE, DENY, pattern=PRE))
    assert not a.authorize_any("User:alice", "h", Op.WRITE, T)  # every topic alice may write is denied
    a = authorizer(acl(T, "pay.orders", Op.WRITE, pattern=PRE), acl(T, "pay", Op.WRITE, DENY, pattern=PRE))
    assert not a.authorize_any("User:alice", "h", Op.WRITE, T)
    a = authorizer(acl(T, "pay", Op.WRITE, pattern=PRE), acl(T, "pay.orders", Op.WRITE, DENY, pattern=PRE))
    assert a.authorize_any("User:alice", "h", Op.WRITE, T)  # pay.refunds is writable
    a = authorizer(acl(T, "pay", Op.WRITE, pattern=PRE), acl(T, "pay", Op.WRITE, DENY))
    assert a.authorize_any("User:alice", "h", Op.WRITE, T)  # a literal DENY does not cancel a prefix
    a = authorizer(acl(T, "x", Op.WRITE), acl(T, "x", Op.WRITE, DENY, principal="User:*"))
    assert not a.authorize_any("User:alice", "h", Op.WRITE, T)
    # ACLs on other topics only, everyone allowed where no ACL is found: some topic (one without ACLs) is writable
    a = authorizer(acl(T, "secret", Op.READ, principal="User:bob"), allow_everyone_if_no_acl_found=True)
    assert a.authorize_any("User:alice", "h", Op.WRITE, T)
    a = authorizer(acl(T, "secret", Op.READ, principal="User:bob"))
    assert not a.authorize_any("User:alice", "h", Op.WRITE, T)
    assert authorizer(acl(T, "*", Op.WRITE, DENY), super_users=["User:alice"]).authorize_any(
        "User:alice", "h", Op.WRITE, T
    )


def test_hosts_in_the_listeners_slash_form_match_bare_acl_hosts() -> None:
    a = authorizer(acl(G, "g", Op.READ, host="10.0.0.1"))
    assert a.authorize("User:alice", "/10.0.0.1", Op.READ, G, "g")
    assert not a.authorize("User:alice", "/10.0.0.2", Op.READ, G, "g")


def test_cached_decisions_follow_every_change_of_the_acls() -> None:
    index = AclIndex([acl(T, "t", Op.READ)])
    a = Authorizer(index, enabled=True)
    assert a.authorize("User:alice", "h", Op.READ, T, "t")  # cached
    deny = acl(T, "t", Op.READ, DENY)
    index.add(deny)
    assert not a.authorize("User:alice", "h", Op.READ, T, "t")
    index.remove(deny)
    assert a.authorize("User:alice", "h", Op.READ, T, "t")
