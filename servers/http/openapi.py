"""The runtime's OpenAPI 3.1 description and capability inventory, served as data."""

from __future__ import annotations

from typing import Any

from compiler.build import SUPPORTED_RUNTIMES

ERROR = {"$ref": "#/components/schemas/Error"}
SECURITY_BEARER: list[dict[str, list[str]]] = [{"bearer": []}]
SECURITY_APPROVAL: list[dict[str, list[str]]] = [{"approval": []}]


def _body(required: list[str], props: dict[str, Any]) -> dict[str, Any]:
    return {
        "required": True,
        "content": {
            "application/json": {
                "schema": {
                    "type": "object",
                    "additionalProperties": False,
                    "required": required,
                    "properties": props,
                }
            }
        },
    }


def _answers(ok: str, *errors: int) -> dict[str, Any]:
    out: dict[str, Any] = {
        ok: {
            "description": "success",
            "content": {"application/json": {"schema": {"type": "object"}}},
        }
    }
    for status in errors:
        out[str(status)] = {
            "description": "error",
            "content": {"application/json": {"schema": ERROR}},
        }
    return out


S = {"type": "string"}
OBJ = {"type": "object"}


def _op(
    summary: str,
    ok: str,
    errors: tuple[int, ...],
    *,
    security: Any = None,
    body: dict[str, Any] | None = None,
    params: list[dict[str, Any]] | None = None,
) -> dict[str, Any]:
    op: dict[str, Any] = {"summary": summary, "responses": _answers(ok, *errors)}
    op["security"] = security if security is not None else []
    if body is not None:
        op["requestBody"] = body
    if params:
        op["parameters"] = params
    return op


def _paths() -> dict[str, Any]:
    turn = [{"name": "turnId", "in": "path", "required": True, "schema": S}]
    ctx = [{"name": "contextRef", "in": "path", "required": True, "schema": S}]
    approve = _op(
        "approve exactly one call (runner approval credential)",
        "200",
        (400, 401, 404, 409, 413),
        security=SECURITY_APPROVAL,
        body=_body(
            ["contextRef", "tool", "callId", "arguments", "reason"],
            {"contextRef": S, "tool": S, "callId": S, "arguments": {}, "reason": S},
        ),
    )
    return {
        "/v1/health": {"get": _op("liveness", "200", ())},
        "/v1/ready": {"get": _op("every bound descriptor matches its contract", "200", (503,))},
        "/v1/capabilities": {
            "get": _op("what this runtime supports", "200", (401,), security=SECURITY_BEARER)
        },
        "/v1/openapi.json": {"get": _op("this document", "200", ())},
        "/v1/turns": {
            "post": _op(
                "start a turn (context.resolve)", "200", (401, 403), security=SECURITY_BEARER
            )
        },
        "/v1/turns/{turnId}/complete": {
            "post": _op(
                "report technical completion (context.resolve)",
                "200",
                (400, 401, 403, 404),
                security=SECURITY_BEARER,
                params=turn,
                body=_body(["outcome"], {"outcome": {"enum": ["COMPLETED", "FAILED"]}}),
            )
        },
        "/v1/context/resolve": {
            "post": _op(
                "resolve an objective: messages, tool schemas, contracts (context.resolve)",
                "200",
                (400, 401, 403, 409, 413),
                security=SECURITY_BEARER,
                body=_body(
                    ["objective"],
                    {
                        k: S
                        for k in (
                            "objective",
                            "consumer",
                            "environment",
                            "deployment",
                            "traceId",
                            "turnId",
                        )
                    },
                ),
            )
        },
        "/v1/context/tools/execute": {
            "post": _op(
                "decide and dispatch one call; answers with a receipt (tools.execute)",
                "200",
                (400, 401, 403, 413),
                security=SECURITY_BEARER,
                body=_body(
                    ["contextRef", "tool", "callId", "arguments"],
                    {
                        "contextRef": S,
                        "tool": S,
                        "callId": S,
                        "arguments": {},
                        "approvalId": S,
                        "turnId": S,
                    },
                ),
            )
        },
        "/v1/context/tools/approve": {"post": approve},
        "/runtime/v1/context/tools/approve": {"post": approve},
        "/v1/context/tools/pending": {
            "get": _op(
                "calls waiting for approval (runner approval credential)",
                "200",
                (401,),
                security=SECURITY_APPROVAL,
            )
        },
        "/v1/context/disclosures": {
            "post": _op(
                "report the schemas the application bound (context.resolve)",
                "202",
                (400, 401, 403, 404, 413),
                security=SECURITY_BEARER,
                body=_body(
                    ["contextRef", "tools"],
                    {"contextRef": S, "turnId": S, "tools": {"type": "array", "items": S}},
                ),
            )
        },
        "/v1/traces/{contextRef}": {
            "get": _op(
                "trace events of one context (traces.read)",
                "200",
                (401, 403),
                security=SECURITY_BEARER,
                params=ctx,
            )
        },
    }


def document() -> dict[str, Any]:
    return {
        "openapi": "3.1.0",
        "info": {"title": "seif runtime", "version": "1"},
        "paths": _paths(),
        "components": {
            "securitySchemes": {
                "bearer": {"type": "http", "scheme": "bearer"},
                "approval": {"type": "apiKey", "in": "header", "name": "x-seif-tool-approval"},
            },
            "schemas": {
                "Error": {
                    "type": "object",
                    "required": ["error"],
                    "properties": {
                        "error": {
                            "type": "object",
                            "required": ["code", "message"],
                            "properties": {"code": S, "message": S},
                        }
                    },
                }
            },
        },
    }


def capabilities() -> dict[str, Any]:
    return {
        "runtimeContracts": sorted(SUPPORTED_RUNTIMES),
        "buildFormats": ["seif.build.v1", "seif.build.v2"],
        "executor": {
            "contract": "context-tool-executor.v1",
            "transports": ["https", "http (loopback only)"],
        },
        "schemaSubset": {
            "keywords": [
                "type",
                "properties",
                "required",
                "additionalProperties",
                "items",
                "minItems",
                "maxItems",
                "minLength",
                "maxLength",
                "minimum",
                "maximum",
                "enum",
                "const",
                "description",
                "title",
            ],
            "limits": {
                "nesting": 8,
                "propertiesPerObject": 32,
                "toolsPerCatalogue": 32,
                "catalogueBytes": 65536,
            },
        },
        "integrations": {
            "native": [],  # nothing beyond HTTP/JSON ships yet: no SDK, no framework nodes
            "documented": ["n8n HTTP Request node", "LangChain tool callback"],
        },
    }
