"""DescribeUserScramCredentials (50) and AlterUserScramCredentials (51), v0 (KIP-554): SCRAM users over the Kafka
protocol, so that ``AdminClient.alter_user_scram_credentials`` (confluent-kafka, kafka-python) and
``kafka-configs.sh --alter --add-config 'SCRAM-SHA-512=[password=...]' --entity-type users`` manage them.

Describe answers each user's mechanisms and iterations (never salts or keys): every user with a credential when the
request names none, RESOURCE_NOT_FOUND for a named user without one, DUPLICATE_RESOURCE for a user named twice.
Alter carries, per user and mechanism, the salt and the salted password the client derived (the password never
reaches the broker); the broker derives the stored and server keys, writes them durably and answers once they are
stored; a user created can authenticate at once, a deleted one cannot authenticate again. The per-user errors are
``security.users``'. Kafka checks Describe / Alter on the Cluster resource first; with no authorizer (the default)
everyone may call them, as in Kafka.
"""

from __future__ import annotations

from typing import Any

from coordinator.deferred import Deferred
from protocol.errors import ErrorCode
from security.acls import AclOperation
from security.audit import Action
from security.users import MECHANISM_CODES, Deletion, Upsertion, UserResult, UserStore

from . import audit
from ._util import response_cls, then
from .acls import cluster_allowed
from .build import build
from .context import RequestContext, Services


def _users(services: Services) -> UserStore:
    users = services.users
    assert users is not None, "the SCRAM credential APIs are served only with a user store"
    return users


def handle_describe_user_scram_credentials(services: Services, ctx: RequestContext, body: Any) -> Any:
    if not cluster_allowed(services, ctx, AclOperation.DESCRIBE):  # Kafka: Describe on the cluster
        ctx.error = ErrorCode.cluster_authorization_failed
        return build(response_cls(ctx), {"error_code": ctx.error, "error_message": None, "results": []})
    names = None if body.users is None else [u.name for u in body.users]
    results = []
    for d in _users(services).describe(names):
        if d.error and not ctx.error:
            ctx.error = d.error
        results.append(
            {
                "user": d.user,
                "error_code": d.error,
                "error_message": d.message,
                "credential_infos": [{"mechanism": m, "iterations": i} for m, i in d.credentials],
            }
        )
    return build(response_cls(ctx), {"error_code": ErrorCode.none, "error_message": None, "results": results})


def handle_alter_user_scram_credentials(services: Services, ctx: RequestContext, body: Any) -> Any:
    if not cluster_allowed(services, ctx, AclOperation.ALTER):  # Kafka: Alter on the cluster, per user's result
        ctx.error = ErrorCode.cluster_authorization_failed
        names = dict.fromkeys([*(d.name for d in body.deletions), *(u.name for u in body.upsertions)])
        rows = [{"user": n, "error_code": ctx.error, "error_message": None} for n in names]
        return build(response_cls(ctx), {"results": rows})
    deletions = [Deletion(d.name, int(d.mechanism)) for d in body.deletions]
    upsertions = [
        Upsertion(u.name, int(u.mechanism), int(u.iterations), bytes(u.salt), bytes(u.salted_password))
        for u in body.upsertions
    ]
    deferred: Deferred[list[UserResult]] = Deferred()
    _users(services).alter(deletions, upsertions, deferred.resolve)

    upserted = {u.user for u in upsertions}
    deleted: dict[str, list[str]] = {}
    for d in deletions:
        deleted.setdefault(d.user, []).append(MECHANISM_CODES.get(d.mechanism, str(d.mechanism)))

    def answer(results: list[UserResult]) -> Any:
        for r in results:
            if r.error:
                if not ctx.error:
                    ctx.error = r.error
            elif r.user in upserted:
                audit.admin_action(
                    ctx,
                    None,
                    "SCRAM credentials of user %s altered (AlterUserScramCredentials)",
                    r.user,
                    services=services,
                    action=Action.USER_ALTER,
                    resource=r.user,
                )
            else:  # deletions only: the user's credentials (all of them, or some mechanisms) are gone
                audit.admin_action(
                    ctx,
                    None,
                    "SCRAM credentials %s of user %s deleted (AlterUserScramCredentials)",
                    ",".join(deleted.get(r.user, ())),
                    r.user,
                    services=services,
                    action=Action.USER_DELETE,
                    resource=r.user,
                )
        rows = [{"user": r.user, "error_code": r.error, "error_message": r.message} for r in results]
        return build(response_cls(ctx), {"results": rows})

    return then(deferred, answer)
