"""The OpenAPI 3.1 document, generated from the endpoint table and its pydantic models."""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from aiohttp import web
from pydantic import BaseModel, TypeAdapter
from pydantic.json_schema import models_json_schema

from .access import Role
from .models import ErrorBody

REF = "#/components/schemas/{model}"
_PATH_PARAM = re.compile(r"\{(\w+)\}")

STATUS_TEXT = {
    200: "OK",
    201: "Created",
    400: "Bad request: the query or body is invalid",
    401: "Missing or wrong bearer token",
    404: "Unknown group, member, topic or partition",
    409: "Conflict with the group's state",
    415: "The body is not JSON (Content-Type: application/json)",
    503: "Not ready, or the storage did not answer in time",
}


@dataclass(frozen=True, slots=True)
class Endpoint:
    method: str
    path: str
    handler: Any  # Callable[[web.Request], Awaitable[web.StreamResponse]]
    summary: str
    tag: str
    responses: dict[int, type[BaseModel]]
    query: type[BaseModel] | None = None
    body: type[BaseModel] | TypeAdapter[Any] | None = None
    body_name: str | None = None  # the schema name of a TypeAdapter body (a discriminated union)
    mutating: bool = False
    # The role a principal needs (servers.http.access.Role): viewer for reads; set for every mutating endpoint.
    role: Role = Role.VIEWER
    description: str = ""
    path_descriptions: dict[str, str] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if self.mutating and self.role < Role.OPERATOR:
            raise ValueError(f"{self.method} {self.path}: a mutating endpoint needs the operator or admin role")

    @property
    def path_params(self) -> list[str]:
        return _PATH_PARAM.findall(self.path)

    def operation_id(self) -> str:
        return getattr(self.handler, "__name__", f"{self.method}_{self.path}").strip("_")


def _without_null(schema: dict[str, Any]) -> dict[str, Any]:
    """Query parameters are optional already: drop the ``null`` branch pydantic emits for ``X | None``."""
    branches = schema.get("anyOf")
    if not branches:
        return schema
    kept = [b for b in branches if b.get("type") != "null"]
    rest = {k: v for k, v in schema.items() if k not in ("anyOf", "default") or (k == "default" and v is not None)}
    if len(kept) == 1:
        return {**rest, **kept[0]}
    return {**rest, "anyOf": kept}


def build_openapi(
    endpoints: Iterable[Endpoint],
    *,
    title: str,
    version: str,
    extra_paths: dict[str, Any] | None = None,
) -> dict[str, Any]:
    endpoints = list(endpoints)
    models: list[type[BaseModel]] = [ErrorBody]
    for ep in endpoints:
        models.extend(ep.responses.values())
        if isinstance(ep.body, type):
            models.append(ep.body)
        if ep.query is not None:
            models.append(ep.query)
    unique = list(dict.fromkeys(models))
    keyed = [(m, "validation" if _is_input(m, endpoints) else "serialization") for m in unique]
    _, top = models_json_schema(keyed, ref_template=REF)  # type: ignore[arg-type]
    schemas: dict[str, Any] = top.get("$defs", {})
    for ep in endpoints:
        if isinstance(ep.body, TypeAdapter):
            adapter_schema = ep.body.json_schema(ref_template=REF)
            schemas.update(adapter_schema.pop("$defs", {}))
            schemas[_body_name(ep)] = adapter_schema

    paths: dict[str, Any] = {}
    for ep in endpoints:
        op: dict[str, Any] = {
            "operationId": ep.operation_id(),
            "summary": ep.summary,
            "tags": [ep.tag],
            "responses": {},
        }
        if ep.description:
            op["description"] = ep.description
        params: list[dict[str, Any]] = [
            {
                "name": name,
                "in": "path",
                "required": True,
                "schema": {"type": "string", "minLength": 1},
                **({"description": ep.path_descriptions[name]} if name in ep.path_descriptions else {}),
            }
            for name in ep.path_params
        ]
        if ep.query is not None:
            props = schemas[ep.query.__name__]["properties"]
            for name, prop in props.items():
                schema = _without_null(prop)
                param: dict[str, Any] = {"name": name, "in": "query", "required": False, "schema": schema}
                if "description" in schema:
                    param["description"] = schema["description"]
                if schema.get("type") == "array":
                    param["style"] = "form"
                    param["explode"] = True
                params.append(param)
        if params:
            op["parameters"] = params
        if ep.body is not None:
            op["requestBody"] = {
                "required": True,
                "content": {"application/json": {"schema": {"$ref": REF.format(model=_body_name(ep))}}},
            }
        statuses = dict(ep.responses)
        if ep.query is not None or ep.body is not None:
            statuses.setdefault(400, ErrorBody)
        if ep.body is not None:
            statuses.setdefault(415, ErrorBody)
        if ep.mutating:
            statuses.setdefault(401, ErrorBody)
            statuses.setdefault(403, ErrorBody)  # a principal whose role is too low, or a cross-origin browser
            op["security"] = [{"bearer": []}]
        op["x-required-role"] = ep.role.label
        for status, model in sorted(statuses.items()):
            op["responses"][str(status)] = {
                "description": STATUS_TEXT.get(status, "See the body"),
                "content": {"application/json": {"schema": {"$ref": REF.format(model=model.__name__)}}},
            }
        paths.setdefault(ep.path, {})[ep.method.lower()] = op
    for path, item in (extra_paths or {}).items():
        paths.setdefault(path, {}).update(item)
    return {
        "openapi": "3.1.0",
        "info": {
            "title": title,
            "version": version,
            "description": "Operator API of the consumer-group coordinator. Times are epoch milliseconds.",
        },
        "paths": paths,
        "components": {
            "schemas": schemas,
            "securitySchemes": {
                "bearer": {
                    "type": "http",
                    "scheme": "bearer",
                    "description": "A principal's token ([http] principals, stored as SHA-256). Reads need the viewer "
                    "role (anonymous requests get [http] anonymous_role), x-required-role says what each "
                    "operation needs; without any credential configured the API is open.",
                }
            },
        },
    }


def _body_name(ep: Endpoint) -> str:
    if isinstance(ep.body, type):
        return ep.body.__name__
    assert ep.body_name is not None, f"{ep.path}: a TypeAdapter body needs body_name"
    return ep.body_name


def _is_input(model: type[BaseModel], endpoints: list[Endpoint]) -> bool:
    return any(ep.body is model or ep.query is model for ep in endpoints)


def openapi_handler(doc: dict[str, Any]) -> Any:
    async def openapi(_request: web.Request) -> web.Response:
        return web.json_response(doc)

    return openapi
