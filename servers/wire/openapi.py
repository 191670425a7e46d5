"""The runtime's OpenAPI 3.1 document, generated from the route table (:mod:`servers.wire.routes`)
and the wire's types (:mod:`servers.wire.requests`, :mod:`servers.wire.answers`).

Each operation declares every answer its route gives: the success answers by status, then one
``Error`` answer for the status of each error code the route can answer (a status already
answered by a success shape, such as 409 ``Blocked``, keeps that shape). Every body is
``application/json`` but ``GET /metrics``'s. ``tests/servers/wire/test_openapi_conformance.py`` runs
schemathesis against a real runtime to hold every answer to the document.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from servers.wire import answers
from servers.wire.routes import ROUTES, Auth, Route, Text
from servers.wire.schema import Schemas, ref

STATUS_TEXT = {
    200: "success",
    202: "accepted",
    400: "malformed request: body, field or header",
    401: "no or bad credential",
    403: "the credential lacks the scope, or no live turn",
    404: "no such context or turn (for this credential)",
    408: "the body did not arrive in time",
    409: "conflict: see the code",
    413: "the body exceeds 1 MiB",
    503: "not ready",
}
SECURITY: dict[Auth, list[dict[str, list[str]]]] = {
    Auth.NONE: [],
    Auth.BEARER: [{"bearer": []}],
    Auth.APPROVAL: [{"approval": []}],
}
DESCRIPTION = (
    "Errors are {error: {code, message}} and never quote a request header. Before any route, "
    "the HTTP layer may answer 400 (a malformed request line or header) or close a connection "
    "that has not sent its headers in time, does not take its answer within the write timeout, "
    "or is past the connection limit (503 TOO_MANY_CONNECTIONS); an error answered before the "
    "body was read closes the connection."
)


def _answer(status: int, schema: dict[str, Any]) -> dict[str, Any]:
    return {
        "description": STATUS_TEXT.get(status, "answer"),
        "content": {"application/json": {"schema": schema}},
    }


def _responses(route: Route, schemas: Schemas) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for status, shape in route.answers.items():
        if shape is Text:
            text = {"text/plain": {"schema": {"type": "string"}}}
            out[str(status.value)] = {"description": "ok", "content": text}
        else:
            out[str(status.value)] = _answer(status, schemas.of(shape))
    for error in route.errors():
        out.setdefault(str(error.status.value), _answer(error.status, ref("Error")))
    return dict(sorted(out.items()))


def operation(route: Route, schemas: Schemas) -> dict[str, Any]:
    """One route as an OpenAPI operation."""
    op: dict[str, Any] = {
        "summary": route.summary,
        "responses": _responses(route, schemas),
        "security": SECURITY[route.auth],
    }
    if route.body is not None:
        content = {"application/json": {"schema": schemas.body(route.body)}}
        op["requestBody"] = {"required": True, "content": content}
    parameters = [
        {"name": name, "in": "path", "required": True, "schema": {"type": "string"}}
        for name in route.parameters()
    ] + [
        {"name": q.name, "in": "query", "required": False, "schema": q.schema}
        | {"description": q.description}
        for q in route.query
    ]
    if parameters:
        op["parameters"] = parameters
    return op


def document(objectives: Sequence[str] = ()) -> dict[str, Any]:
    """The OpenAPI 3.1 document; with ``objectives`` (the build's), ``objective`` is their
    enumeration, else any identifier."""
    schemas = Schemas(answers.COMPONENTS, answers.CLOSED, tuple(objectives))
    paths: dict[str, Any] = {}
    for route in ROUTES:
        paths.setdefault(route.path, {})[route.method.lower()] = operation(route, schemas)
    return {
        "openapi": "3.1.0",
        "info": {"title": "seif runtime", "version": "1", "description": DESCRIPTION},
        "paths": paths,
        "components": {
            "securitySchemes": {
                "bearer": {"type": "http", "scheme": "bearer"},
                "approval": {"type": "apiKey", "in": "header", "name": "x-seif-tool-approval"},
            },
            "schemas": {c.__name__: schemas.inline(c) for c in answers.COMPONENTS},
        },
    }
