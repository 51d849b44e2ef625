"""The operator API's SCRAM users: ``GET /v1/users``, ``PUT /v1/users/{user}``, ``DELETE /v1/users/{user}``.

The same store as Kafka's DescribeUserScramCredentials / AlterUserScramCredentials (``security.users``): a user set
here can authenticate (SCRAM or PLAIN) as soon as the answer arrives, one deleted cannot authenticate again. Unlike
the Kafka API, the password travels to the daemon (over the HTTP API's own transport: use TLS or a local socket)
and the daemon derives the salted credential with a fresh random salt; the password is never stored or logged, and
no answer ever carries salts or keys. Every call is an admin action, logged with who asked.
"""

from __future__ import annotations

import asyncio
from typing import Any, Literal

from aiohttp import web
from pydantic import BaseModel, Field, SecretStr

from protocol.errors import ErrorCode
from security.audit import Action
from security.credentials import SCRAM_MECHANISMS, ScramCredential
from security.scram_keys import DEFAULT_ITERATIONS, MAX_ITERATIONS, MIN_ITERATIONS, new_credential
from security.users import UserStore

from . import audit, keys
from .access import Role
from .models import ErrorBody
from .openapi import Endpoint
from .routes import json_error, parse_body, respond

Mechanism = Literal["SCRAM-SHA-256", "SCRAM-SHA-512"]


class UserCredential(BaseModel):
    mechanism: Mechanism
    iterations: int


class UserView(BaseModel):
    name: str
    credentials: list[UserCredential] = Field(description="The user's SCRAM mechanisms (never salts or keys).")


class UserList(BaseModel):
    users: list[UserView]


class UserSet(BaseModel):
    """A password for one mechanism (the user is created if new; an existing credential of that mechanism is
    replaced: rotation)."""

    model_config = {"extra": "forbid"}
    password: SecretStr = Field(min_length=1, description="Never stored: the daemon keeps the salted credential.")
    mechanism: Mechanism = "SCRAM-SHA-512"
    iterations: int = Field(default=DEFAULT_ITERATIONS, ge=MIN_ITERATIONS, le=MAX_ITERATIONS)


class UserDeleted(BaseModel):
    name: str
    deleted: list[Mechanism]


class UserDeleteQuery(BaseModel):
    mechanism: Mechanism | None = Field(default=None, description="Only this mechanism (default: every one).")


def _store(request: web.Request) -> UserStore:
    return request.app[keys.USERS]


def _view(store: UserStore, name: str) -> UserView:
    return UserView(
        name=name,
        credentials=[UserCredential(mechanism=m, iterations=i) for m, i in store.mechanisms(name).items()],  # type: ignore[arg-type]
    )


async def _write(store: UserStore, changes: list[tuple[str, ScramCredential | str]]) -> None:
    future: asyncio.Future[Any] = asyncio.get_running_loop().create_future()

    def done(failure: Any) -> None:
        if not future.done():
            future.set_result(failure)

    store.set_credentials(changes, done)
    if await future is not None:
        raise json_error(503, "the credential could not be stored (storage unavailable); nothing changed")


async def list_users(request: web.Request) -> web.Response:
    store = _store(request)
    return respond(UserList(users=[_view(store, u) for u in store.users()]))


async def get_user(request: web.Request) -> web.Response:
    store = _store(request)
    name = request.match_info["user"]
    if not store.mechanisms(name):
        raise json_error(404, f"user {name!r} has no SCRAM credential")
    return respond(_view(store, name))


async def set_user(request: web.Request) -> web.Response:
    store = _store(request)
    name = request.match_info["user"]
    body = await parse_body(request, UserSet)
    created = not store.mechanisms(name)
    # PBKDF2 takes milliseconds: off the event loop
    credential = await asyncio.to_thread(new_credential, body.mechanism, body.password.get_secret_value(),
                                         body.iterations)  # fmt: skip
    await _write(store, [(name, credential)])
    audit.admin_action(request, None, "SCRAM credential %s of user %s %s through the operator API",
                       body.mechanism, name, "created" if created else "replaced", action=Action.USER_ALTER,
                       resource=name)  # fmt: skip
    return respond(_view(store, name), 201 if created else 200)


async def delete_user(request: web.Request) -> web.Response:
    store = _store(request)
    name = request.match_info["user"]
    wanted = request.query.get("mechanism")
    if wanted is not None and wanted not in SCRAM_MECHANISMS:
        raise json_error(400, f"mechanism must be one of {', '.join(SCRAM_MECHANISMS)}")
    held = [m for m in store.mechanisms(name) if wanted is None or m == wanted]
    if not held:
        raise json_error(404, f"user {name!r} has no {wanted or 'SCRAM'} credential")
    await _write(store, [(name, m) for m in held])
    audit.admin_action(request, None, "SCRAM credentials %s of user %s deleted through the operator API",
                       ",".join(held), name, action=Action.USER_DELETE, resource=name)  # fmt: skip
    return respond(UserDeleted(name=name, deleted=held))  # type: ignore[arg-type]


_USER = {"user": "The user name (as clients give it in sasl.username)."}

USER_ENDPOINTS: list[Endpoint] = [
    Endpoint("GET", "/v1/users", list_users, "SCRAM users", "users", {200: UserList}),
    Endpoint("GET", "/v1/users/{user}", get_user, "One SCRAM user", "users", {200: UserView, 404: ErrorBody},
             path_descriptions=_USER),
    Endpoint("PUT", "/v1/users/{user}", set_user, "Create a user or set its password", "users",
             {200: UserView, 201: UserView, 400: ErrorBody, 503: ErrorBody}, body=UserSet, mutating=True,
             role=Role.ADMIN, path_descriptions=_USER,
             description="Kafka's AlterUserScramCredentials upsertion, with the password given to the daemon: it "
             "derives the salted credential (random salt) and stores only that, durably, before answering. 201 "
             "when the user is new. The user can authenticate at once."),
    Endpoint("DELETE", "/v1/users/{user}", delete_user, "Delete a user's credentials", "users",
             {200: UserDeleted, 400: ErrorBody, 404: ErrorBody, 503: ErrorBody}, query=UserDeleteQuery,
             mutating=True, role=Role.ADMIN, path_descriptions=_USER,
             description="Kafka's AlterUserScramCredentials deletion: every mechanism of the user, or only "
             "?mechanism=. The user cannot authenticate with it again."),
]  # fmt: skip

__all__ = ["USER_ENDPOINTS", "ErrorCode"]
