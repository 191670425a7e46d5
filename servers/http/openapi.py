"""The runtime's OpenAPI 3.1 description and capability inventory, served as data.

The document declares every answer a route gives: its status codes, that each body is
``application/json``, and each body's schema (``tests/test_openapi_conformance.py`` runs
schemathesis against a real runtime to hold it to that). Request bodies are declared as
:mod:`servers.http.wire` checks them (closed objects, identifiers of 1..256 characters); given
the build's objectives, ``objective`` is declared as their enumeration.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from compiler.build import SUPPORTED_RUNTIMES
from servers.http.wire import MAX_ID_LENGTH
from servers.runtime.paging import DEFAULT_LIMIT, MAX_CURSOR, MAX_LIMIT

NATIVE_INTEGRATIONS = (
    "seif Python SDK (seif.RuntimeClient)",
    "LangChain StructuredTool (seif.integrations.langchain)",
    "OpenAI Agents FunctionTool (seif.integrations.openai_agents)",
)
"""The integrations that ship with seif (``GET /v1/capabilities``: ``integrations.native``);
the composition boundaries that are only documented are listed beside them."""

SECURITY_BEARER: list[dict[str, list[str]]] = [{"bearer": []}]
SECURITY_APPROVAL: list[dict[str, list[str]]] = [{"approval": []}]

S: dict[str, Any] = {"type": "string"}
ID: dict[str, Any] = {"type": "string", "minLength": 1, "maxLength": MAX_ID_LENGTH}
OPTIONAL_ID: dict[str, Any] = {**ID, "type": ["string", "null"]}
"""An optional field: absent, or null (read as absent), or an identifier."""
VALUE: dict[str, Any] = {"not": {"type": "null"}}
"""Any JSON value but null (a required field that is null is missing)."""
TEXT: dict[str, Any] = {"type": "string", "minLength": 1, "maxLength": 4096, "pattern": r"\S"}
INSTANT: dict[str, Any] = {"type": "string", "format": "date-time"}
BOOL: dict[str, Any] = {"type": "boolean"}
INT: dict[str, Any] = {"type": "integer"}
OBJ: dict[str, Any] = {"type": "object"}
STRINGS: dict[str, Any] = {"type": "array", "items": S}
NULLABLE_S: dict[str, Any] = {"type": ["string", "null"]}
BODY_ERRORS = (400, 408, 413)
"""What reading any request body can answer (:func:`servers.http.wire.read_json`)."""

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


def ref(name: str) -> dict[str, str]:
    return {"$ref": f"#/components/schemas/{name}"}


def obj(required: Sequence[str], props: dict[str, Any], *, closed: bool = False) -> dict[str, Any]:
    """An object schema; ``closed`` forbids properties beyond ``props``."""
    out: dict[str, Any] = {"type": "object", "required": list(required), "properties": props}
    if closed:
        out["additionalProperties"] = False
    return out


def _body(required: list[str], props: dict[str, Any]) -> dict[str, Any]:
    return {
        "required": True,
        "content": {"application/json": {"schema": obj(required, props, closed=True)}},
    }


def _answer(status: int, schema: dict[str, Any]) -> dict[str, Any]:
    return {
        "description": STATUS_TEXT.get(status, "answer"),
        "content": {"application/json": {"schema": schema}},
    }


def _op(
    summary: str,
    answers: dict[int, dict[str, Any]],
    errors: tuple[int, ...],
    *,
    security: Any = None,
    body: dict[str, Any] | None = None,
    params: list[dict[str, Any]] | None = None,
) -> dict[str, Any]:
    """One operation: its success answers, then its errors (each an ``Error``)."""
    responses = {str(status): _answer(status, schema) for status, schema in answers.items()}
    for status in errors:
        responses.setdefault(str(status), _answer(status, ref("Error")))
    op: dict[str, Any] = {"summary": summary, "responses": responses}
    op["security"] = security if security is not None else []
    if body is not None:
        op["requestBody"] = body
    if params:
        op["parameters"] = params
    return op


def _path_param(name: str) -> list[dict[str, Any]]:
    return [{"name": name, "in": "path", "required": True, "schema": S}]


def _pending_query() -> list[dict[str, Any]]:
    """The query of ``GET /v1/context/tools/pending`` (:func:`servers.http.wire.page_of`)."""
    limit = {"type": "integer", "minimum": 1, "maximum": MAX_LIMIT, "default": DEFAULT_LIMIT}
    cursor = {"type": "string", "pattern": f"^[A-Za-z0-9._~-]{{1,{MAX_CURSOR}}}$"}
    described = (
        ("limit", limit, "calls per page at most"),
        ("after", cursor, "the `next` of the page before"),
        ("contextRef", ID, "with `callId`: only this call, if it is held"),
        ("callId", ID, "with `contextRef`: only this call, if it is held"),
    )
    return [
        {"name": name, "in": "query", "required": False, "schema": schema, "description": text}
        for name, schema, text in described
    ]


def _approve() -> dict[str, Any]:
    return _op(
        "approve exactly one call (runner approval credential; `x-seif-approver` names the human)",
        {200: ref("Approval")},
        (*BODY_ERRORS, 401, 404, 409),
        security=SECURITY_APPROVAL,
        body=_body(
            ["contextRef", "tool", "callId", "arguments", "reason"],
            {"contextRef": ID, "tool": ID, "callId": ID, "arguments": VALUE, "reason": TEXT},
        ),
    )


def _reject() -> dict[str, Any]:
    return _op(
        "reject one call: no longer approvable (runner approval credential; `x-seif-approver`"
        " names the human; the reason is never kept)",
        {200: ref("Rejection")},
        (*BODY_ERRORS, 401, 404, 409),
        security=SECURITY_APPROVAL,
        body=_body(
            ["contextRef", "tool", "callId", "arguments", "reason"],
            {"contextRef": ID, "tool": ID, "callId": ID, "arguments": VALUE, "reason": TEXT},
        ),
    )


def _approval_paths() -> dict[str, Any]:
    """The routes the approval flow adds: reject, and the application's approval status."""
    return {
        "/v1/context/tools/reject": {"post": _reject()},
        "/runtime/v1/context/tools/reject": {"post": _reject()},
        "/v1/context/tools/approvals/{contextRef}/{callId}": {
            "get": _op(
                "the approval state of one call of a context this credential resolved"
                " (tools.execute)",
                {200: ref("ApprovalStatus")},
                (400, 401, 403, 404),
                security=SECURITY_BEARER,
                params=_path_param("contextRef") + _path_param("callId"),
            )
        },
    }


def _context_paths(objective: dict[str, Any]) -> dict[str, Any]:
    """The routes of a context: resolve, execute, approve, pending, disclosures, traces."""
    optional = ("consumer", "environment", "deployment", "traceId", "turnId")
    resolve_props = {k: OPTIONAL_ID for k in optional}
    execute_props = {
        "contextRef": ID,
        "tool": {
            **ID,
            "description": "the tool id, or the function name the model saw (a tool id wins);"
            " the receipt names the tool id",
        },
        "callId": ID,
        "arguments": VALUE,
    }
    return {
        "/v1/context/resolve": {
            "post": _op(
                "resolve an objective: messages, tool schemas, contracts (context.resolve)",
                {200: ref("Resolved"), 409: ref("Blocked")},
                (*BODY_ERRORS, 401, 403),
                security=SECURITY_BEARER,
                body=_body(["objective"], {"objective": objective, **resolve_props}),
            )
        },
        "/v1/context/tools/execute": {
            "post": _op(
                "decide and dispatch one call; answers with a receipt (tools.execute)",
                {200: ref("Receipt")},
                (*BODY_ERRORS, 401, 403),
                security=SECURITY_BEARER,
                body=_body(
                    ["contextRef", "tool", "callId", "arguments"],
                    {**execute_props, "approvalId": OPTIONAL_ID, "turnId": OPTIONAL_ID},
                ),
            )
        },
        "/v1/context/tools/approve": {"post": _approve()},
        "/runtime/v1/context/tools/approve": {"post": _approve()},
        **_approval_paths(),
        "/v1/context/tools/pending": {
            "get": _op(
                "calls waiting for approval, a page at a time, oldest first: follow `next` until"
                " it is null; or the one call `contextRef` and `callId` name (runner approval"
                " credential)",
                {200: ref("PendingList")},
                (400, 401),
                security=SECURITY_APPROVAL,
                params=_pending_query(),
            )
        },
        "/v1/context/disclosures": {
            "post": _op(
                "report the schemas the application bound (context.resolve)",
                {202: obj(["accepted"], {"accepted": {"const": True}}, closed=True)},
                (*BODY_ERRORS, 401, 403, 404),
                security=SECURITY_BEARER,
                body=_body(
                    ["contextRef", "tools"],
                    {
                        "contextRef": ID,
                        "turnId": OPTIONAL_ID,
                        "tools": {"type": "array", "items": {"type": "string", "minLength": 1}},
                    },
                ),
            )
        },
        "/v1/traces/head": {
            "get": _op(
                "the last record of the decision log, its seq and digest, to anchor elsewhere"
                " (traces.read)",
                {200: ref("TraceHead")},
                (401, 403),
                security=SECURITY_BEARER,
            )
        },
        "/v1/traces/{contextRef}": {
            "get": _op(
                "trace events of one context (traces.read; an application's credential reads"
                " only the contexts it resolved)",
                {200: ref("Trace")},
                (401, 403, 404),
                security=SECURITY_BEARER,
                params=_path_param("contextRef"),
            )
        },
        "/metrics": {"get": _metrics()},
    }


def _metrics() -> dict[str, Any]:
    """``GET /metrics``: the Prometheus text format (``metrics.read``, never implied)."""
    op = _op("Prometheus metrics (metrics.read)", {}, (401, 403), security=SECURITY_BEARER)
    text = {"schema": {"type": "string"}}
    op["responses"]["200"] = {"description": "ok", "content": {"text/plain": text}}
    return op


def _paths(objective: dict[str, Any]) -> dict[str, Any]:
    return {
        "/v1/health": {"get": _op("liveness", {200: ref("Health")}, ())},
        "/v1/ready": {
            "get": _op(
                "every bound descriptor matches its contract (503 with each tool's state if not)",
                {200: ref("Ready"), 503: ref("Ready")},
                (),
            )
        },
        "/v1/capabilities": {
            "get": _op(
                "what this runtime supports (any credential)",
                {200: ref("Capabilities")},
                (401,),
                security=SECURITY_BEARER,
            )
        },
        "/v1/openapi.json": {
            "get": _op("this document", {200: obj(["openapi", "info", "paths"], {})}, ())
        },
        "/v1/turns": {
            "post": _op(
                "start a turn (context.resolve)",
                {200: ref("Turn")},
                (401, 403, 413),
                security=SECURITY_BEARER,
            )
        },
        "/v1/turns/{turnId}/complete": {
            "post": _op(
                "report technical completion (context.resolve)",
                {200: ref("TurnCompleted")},
                (*BODY_ERRORS, 401, 403, 404, 409),
                security=SECURITY_BEARER,
                params=_path_param("turnId"),
                body=_body(["outcome"], {"outcome": {"enum": ["COMPLETED", "FAILED"]}}),
            )
        },
        **_context_paths(objective),
    }


def _explanation() -> dict[str, Any]:
    return obj(["pointer"], {"pointer": S, "profile": S, "rule": {}, "tool": S, "detail": S})


RESOLVED_FIELDS = (
    *("contextRef", "build", "objective", "expiresAt"),
    *("messages", "tools", "contracts", "omitted", "tokens"),
)


def _resolved() -> dict[str, Any]:
    message = obj(["id", "role", "text"], {"id": S, "role": S, "text": S})
    contract = obj(
        ["id", "name", "version", "contractDigest", "effect"],
        {"id": S, "name": S, "version": S, "contractDigest": S, "effect": S},
    )
    tokens = obj(
        ["messages", "tools", "total", "ceiling", "estimated"],
        {"messages": INT, "tools": INT, "total": INT, "ceiling": INT, "estimated": BOOL},
    )
    return obj(
        RESOLVED_FIELDS,
        {
            "contextRef": S,
            "build": S,
            "objective": S,
            "expiresAt": INSTANT,
            "messages": {"type": "array", "items": message},
            "tools": {"type": "array", "items": OBJ},
            "contracts": {"type": "array", "items": contract},
            "omitted": {"type": "array", "items": ref("Omission")},
            "tokens": tokens,
        },
    )


def _receipt() -> dict[str, Any]:
    decision = obj(
        ["outcome", "reason", "tool", "callId"],
        {
            "outcome": S,
            "reason": NULLABLE_S,
            "tool": S,
            "callId": S,
            "approvalRequired": BOOL,
            "explanation": {"anyOf": [ref("Explanation"), {"type": "null"}]},
            "errors": {"type": "array", "items": obj(["pointer", "keyword", "message"], {})},
        },
    )
    return obj(
        ["callId", "tool", "status", "reason", "duplicate", "outputAvailable"],
        {
            "callId": S,
            "tool": S,
            "status": {"enum": ["SUCCEEDED", "FAILED", "UNKNOWN", "DENIED"]},
            "reason": NULLABLE_S,
            "duplicate": BOOL,
            "outputAvailable": BOOL,
            "output": {},
            "executorError": S,
            "decision": decision,
        },
    )


def _answers_shapes() -> dict[str, Any]:
    """The bodies of the answers of the context routes."""
    pending = obj(  # expiresAt: when the call stops being approvable and leaves the list
        ["contextRef", "tool", "callId", "arguments", "requestedAt", "expiresAt"],
        {
            "contextRef": S,
            "tool": S,
            "callId": S,
            "arguments": {},
            "reason": S,
            "requestedAt": INSTANT,
            "expiresAt": INSTANT,
            "contextExpiresAt": INSTANT,
            "coordinates": obj(
                ["objective", "consumer", "environment", "deployment"],
                {k: S for k in ("objective", "consumer", "environment", "deployment")},
            ),
        },
    )
    events = {"type": "array", "items": obj(["event"], {"event": S})}
    return {
        "Resolved": _resolved(),
        "Receipt": _receipt(),
        "Approval": obj(["approvalId", "expiresAt"], {"approvalId": S, "expiresAt": INSTANT}),
        "PendingList": obj(
            ["pending", "next"],
            {"pending": {"type": "array", "items": pending}, "next": NULLABLE_S},
        ),
        "Rejection": obj(
            ["state", "callId", "approver"],
            {"state": {"const": "REJECTED"}, "callId": S, "approver": S},
            closed=True,
        ),
        "ApprovalStatus": obj(
            ["state"],
            {
                "state": {"enum": ["PENDING", "APPROVED", "REJECTED", "EXPIRED", "NONE"]},
                "approvalId": S,
                "expiresAt": INSTANT,
            },
            closed=True,
        ),
        "Trace": obj(["contextRef", "events"], {"contextRef": S, "events": events}),
        "TraceHead": obj(
            ["seq", "digest"],
            {
                "seq": {"type": ["integer", "null"], "minimum": 1},
                "digest": {"type": ["string", "null"], "pattern": "^blake3:[0-9a-f]{64}$"},
            },
            closed=True,
        ),
    }


def _schemas() -> dict[str, Any]:
    error = obj(["code", "message"], {"code": S, "message": S})
    omission = obj(
        ["id", "kind", "reason", "explanation"],
        {"id": S, "kind": S, "reason": S, "explanation": ref("Explanation")},
    )
    blocked = obj(
        ["error", "causes", "omitted"],
        {
            "error": error,
            "causes": {"type": "array", "items": ref("Omission")},
            "omitted": {"type": "array", "items": ref("Omission")},
        },
    )
    states = {"enum": ["READY", "INCOMPATIBLE", "UNAVAILABLE"]}
    return {
        "Error": obj(["error"], {"error": error}),
        "Blocked": blocked,
        "Explanation": _explanation(),
        "Omission": omission,
        "Health": obj(["status"], {"status": {"const": "ok"}}, closed=True),
        "Ready": obj(
            ["ready", "tools"],
            {
                "ready": BOOL,
                "tools": {"type": "object", "additionalProperties": states},
                "store": {"enum": ["READY", "LEASE_LOST"]},
            },
            closed=True,
        ),
        "Capabilities": _capabilities_schema(),
        "Turn": obj(["turnId", "expiresAt"], {"turnId": S, "expiresAt": INSTANT}, closed=True),
        "TurnCompleted": obj(
            ["turnId", "outcome"],
            {"turnId": S, "outcome": {"enum": ["COMPLETED", "FAILED"]}},
            closed=True,
        ),
        **_answers_shapes(),
    }


def _capabilities_schema() -> dict[str, Any]:
    return obj(
        ["runtimeContracts", "buildFormats", "executor", "schemaSubset", "integrations"],
        {
            "runtimeContracts": STRINGS,
            "buildFormats": STRINGS,
            "executor": obj(["contract", "transports"], {"contract": S, "transports": STRINGS}),
            "schemaSubset": obj(["keywords", "limits"], {"keywords": STRINGS, "limits": OBJ}),
            "integrations": obj(
                ["native", "documented"],
                {
                    "native": STRINGS,
                    "documented": STRINGS,
                    "mcp": obj(["path", "revisions"], {"path": S, "revisions": STRINGS}),
                },
            ),
        },
    )


def document(objectives: Sequence[str] = ()) -> dict[str, Any]:
    """The OpenAPI 3.1 document; with ``objectives`` (the build's), ``objective`` is their
    enumeration, else any identifier."""
    objective = {"enum": sorted(objectives)} if objectives else ID
    return {
        "openapi": "3.1.0",
        "info": {
            "title": "seif runtime",
            "version": "1",
            "description": (
                "Errors are {error: {code, message}} and never quote a request header. Before "
                "any route, the HTTP layer may answer 400 (a malformed request line or header) "
                "or close a connection that has not sent its headers in time, does not take its "
                "answer within the write timeout, or is past the connection limit (503 "
                "TOO_MANY_CONNECTIONS); an error answered before the body was read closes the "
                "connection."
            ),
        },
        "paths": _paths(objective),
        "components": {
            "securitySchemes": {
                "bearer": {"type": "http", "scheme": "bearer"},
                "approval": {"type": "apiKey", "in": "header", "name": "x-seif-tool-approval"},
            },
            "schemas": _schemas(),
        },
    }


def capabilities(mcp_revisions: Sequence[str] = ()) -> dict[str, Any]:
    """What this runtime serves; ``mcp_revisions``: the MCP revisions at ``/mcp/{objective}``
    (``seif serve --mcp``), listed under ``integrations``."""
    native = list(NATIVE_INTEGRATIONS)
    if mcp_revisions:
        native.append(f"MCP Streamable HTTP at /mcp/{{objective}} ({', '.join(mcp_revisions)})")
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
            "native": native,
            "documented": ["n8n HTTP Request node", "LangChain tool callback"],
            **(
                {"mcp": {"path": "/mcp/{objective}", "revisions": list(mcp_revisions)}}
                if mcp_revisions
                else {}
            ),
        },
    }
