"""The OpenAPI document, generated from the routes and the msgspec Structs they use.

Each endpoint is decorated with `operation(...)`, which records what it takes and returns;
`document(routes)` turns that and `msgspec.json.schema_components` into OpenAPI 3.1.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from typing import Any, TypeVar

import msgspec
from starlette.routing import BaseRoute, Route

from cascade_api.models import ErrorDetail, ValidationErrorBody

F = TypeVar("F", bound=Callable[..., Any])

STATUS_TEXT = {
    200: "OK",
    201: "Created",
    202: "Accepted",
    204: "No Content",
    401: "Unauthorized",
    404: "Not Found",
    408: "Request Timeout",
    409: "Conflict",
    413: "Content Too Large",
    415: "Unsupported Media Type",
    422: "Unprocessable Entity",
    503: "Service Unavailable",
}


class Query(msgspec.Struct, frozen=True, kw_only=True):
    """A query parameter past a plain optional string."""

    description: str
    required: bool = False
    schema: dict[str, Any] = msgspec.field(default_factory=lambda: {"type": "string"})


class Operation(msgspec.Struct, frozen=True, kw_only=True):
    summary: str
    description: str = ""
    tag: str = "runs"
    body: Any = None
    body_media_types: tuple[str, ...] = ("application/json",)
    response: Any = None
    status: int = 200
    media_type: str = "application/json"
    other_media_types: tuple[str, ...] = ()  # the same answer in other forms: binary or text, no schema
    errors: dict[int, str] = {}
    also: dict[int, str] = {}  # other statuses answered with a `response` body too
    auth: bool = True
    query: dict[str, str | Query] = {}  # name -> its description, or all about it
    headers: dict[str, str] = {}
    events: dict[str, Any] = {}  # a text/event-stream's events: name -> the type of its JSON data


# The attribute of an endpoint that holds its Operation: set by `operation`, read by `document`.
OPERATION = "__operation__"


def operation(**kwargs: Any) -> Callable[[F], F]:
    def decorate(fn: F) -> F:
        setattr(fn, OPERATION, Operation(**kwargs))
        return fn

    return decorate


_PARAM = re.compile(r"{(\w+)(?::\w+)?}")


def document(routes: Sequence[BaseRoute], *, title: str, version: str) -> dict[str, Any]:
    ops: list[tuple[Route, str, Operation]] = []
    types: list[Any] = [ErrorDetail, ValidationErrorBody]
    for route in routes:
        op = getattr(getattr(route, "endpoint", None), OPERATION, None)
        if not isinstance(route, Route) or op is None:
            continue
        for method in sorted((route.methods or set()) - {"HEAD"}):
            ops.append((route, method.lower(), op))
        types += [t for t in (op.body, op.response, *op.events.values()) if t is not None and t is not bytes and t is not str]
    schemas, components = msgspec.json.schema_components(types, ref_template="#/components/schemas/{name}")
    by_type = dict(zip(types, schemas))
    paths: dict[str, dict[str, Any]] = {}
    for route, method, op in ops:
        path = _PARAM.sub(r"{\1}", route.path)
        paths.setdefault(path, {})[method] = _operation(path, route, op, by_type)
    return {
        "openapi": "3.1.0",
        "info": {"title": title, "version": version},
        "paths": paths,
        "components": {
            "schemas": components,
            "securitySchemes": {"bearer": {"type": "http", "scheme": "bearer"}},
        },
    }


def _operation(path: str, route: Route, op: Operation, by_type: dict[Any, Any]) -> dict[str, Any]:
    out: dict[str, Any] = {
        "summary": op.summary,
        "operationId": route.name,
        "tags": [op.tag],
        "parameters": [
            {"name": name, "in": "path", "required": True, "schema": {"type": "string"}} for name in _PARAM.findall(path)
        ]
        + [_query(name, param) for name, param in op.query.items()]
        + [{"name": name, "in": "header", "required": False, "schema": {"type": "string"}, "description": text}
           for name, text in op.headers.items()],
        "responses": {str(op.status): _response(op, by_type)},
    }
    for status, text in op.also.items():
        out["responses"][str(status)] = {**_response(op, by_type), "description": text}
    if op.description:
        out["description"] = op.description
    if op.auth:
        out["security"] = [{"bearer": []}]
        out["responses"]["401"] = _error("Missing or wrong bearer token, or more than one Authorization header.", by_type)
    if op.body is not None:
        if op.body is bytes:
            content = {m: {"schema": {"type": "string", "format": "binary"}} for m in op.body_media_types}
        else:
            content = {"application/json": {"schema": by_type[op.body]}}
        out["requestBody"] = {"required": True, "content": content}
    for status, text in op.errors.items():
        if status == 422 and op.body is not None and op.body is not bytes:
            out["responses"]["422"] = {
                "description": text,
                "content": {"application/json": {"schema": {"anyOf": [by_type[ErrorDetail], by_type[ValidationErrorBody]]}}},
            }
        elif status < 400:
            out["responses"][str(status)] = {"description": text}
        else:
            out["responses"][str(status)] = _error(text, by_type)
    return out


def _query(name: str, param: str | Query) -> dict[str, Any]:
    q = Query(description=param) if isinstance(param, str) else param
    return {"name": name, "in": "query", "required": q.required, "schema": q.schema, "description": q.description}


def _response(op: Operation, by_type: dict[Any, Any]) -> dict[str, Any]:
    description = STATUS_TEXT.get(op.status, "OK")
    if op.response is None:
        return {"description": description}
    if op.events:
        return {"description": description, "content": {op.media_type: {"schema": {"oneOf": [_event(name, by_type[t]) for name, t in op.events.items()]}}}}
    if op.response in (bytes, str):
        return {"description": description, "content": {op.media_type: {"schema": {"type": "string"}}}}
    others = {media_type: {"schema": {"type": "string", "format": "binary"}} for media_type in op.other_media_types}
    return {"description": description, "content": {op.media_type: {"schema": by_type[op.response]}, **others}}


def _event(name: str, data: dict[str, Any]) -> dict[str, Any]:
    """One server-sent event as OpenAPI 3.1 describes a stream's items: its fields, the data
    a JSON document of the given schema."""
    return {
        "type": "object",
        "properties": {
            "event": {"const": name},
            "id": {"type": "string"},
            "data": {"type": "string", "contentMediaType": "application/json", "contentSchema": data},
        },
        "required": ["event", "id", "data"],
    }


def _error(text: str, by_type: dict[Any, Any]) -> dict[str, Any]:
    return {"description": text, "content": {"application/json": {"schema": by_type[ErrorDetail]}}}
