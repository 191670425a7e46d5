"""The native path of a stateless (``2026-07-28``) ``tools/list`` or ``tools/call`` that asked
for no progress: answered as the SDK's JSON path answers it, without its per-request machinery.

The SDK's own checks decide whether a request qualifies, in the SDK's order (``Content-Type``,
``Accept``, routing headers, the envelope ladder ``classify_inbound_request``, the method's
params against the revision's surface ``validate_client_request``, the call id); a request that
fails any of them, or is anything else, is left to the SDK, which answers it (and every
rejection) itself. A request that passes is answered here: the same handlers as the SDK's
(:mod:`servers.mcp.handlers`), the result shaped by the SDK's own serializer for the revision
(``serialize_server_result``), ``resultType`` and the ``serverInfo`` stamp added as the SDK adds
them. ``tests/servers/mcp/test_mcp_fast.py`` holds the two paths to the same answers.

Why: the SDK spends more CPU per request on its task groups, streams and models than seif's
execute path spends deciding, logging and dispatching (``python -m bench mcp``,
docs/benchmarks.md).
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import Any

from aiohttp import web
from mcp.server.streamable_http import check_accept_headers
from mcp.shared.exceptions import MCPError
from mcp.shared.inbound import (
    InboundModernRoute,
    classify_inbound_request,
    find_duplicated_routing_header,
)
from mcp_types import methods
from mcp_types.version import MODERN_PROTOCOL_VERSIONS
from pydantic import BaseModel, ValidationError

from policy.json.strict import dump_bytes
from servers.mcp.handlers import (
    Asked,
    CallId,
    call_tool,
    list_tools,
    no_progress,
    nobody_to_tell,
)
from servers.wire.errors import INTERNAL_ERROR

LOG = logging.getLogger("seif.mcp")
METHODS = frozenset({"tools/list", "tools/call"})
SERVER_INFO_META = "io.modelcontextprotocol/serverInfo"


@dataclass(frozen=True, slots=True)
class Route:
    """A request this path answers: its revision, method, id, and what the handlers need."""

    version: str
    method: str
    request_id: Any
    asked: Asked
    call_id: CallId | None


def route(request: web.Request, message: Any, asked: Asked) -> Route | None:
    """The route of a request this path answers as the SDK would; None to leave it to the
    SDK (anything else, and every request it would refuse)."""
    headers = request.headers
    version = headers.get("mcp-protocol-version")
    if version not in MODERN_PROTOCOL_VERSIONS or not isinstance(message, dict):
        return None
    method = message.get("method")
    if method not in METHODS or "id" not in message or wants_progress(message):
        return None
    if not headers.get("content-type", "").lower().startswith("application/json"):
        return None
    if not check_accept_headers(request)[0]:  # type: ignore[arg-type] # reads .headers only
        return None
    if find_duplicated_routing_header(headers.items()) is not None:
        return None
    verdict = classify_inbound_request(message, headers={k.lower(): v for k, v in headers.items()})
    if not isinstance(verdict, InboundModernRoute):
        return None
    try:
        methods.validate_client_request(method, verdict.protocol_version, message.get("params"))
        call_id = asked.call_id() if method == "tools/call" else None
    except (ValidationError, ValueError, KeyError, MCPError):
        return None
    return Route(verdict.protocol_version, method, message["id"], asked, call_id)


def wants_progress(message: Any) -> bool:
    """Whether a request asked to be told its progress (``params._meta.progressToken``)."""
    params = message.get("params") if isinstance(message, dict) else None
    meta = params.get("_meta") if isinstance(params, dict) else None
    return isinstance(meta, dict) and "progressToken" in meta


async def answer(app: web.Application, found: Route, server_info: dict[str, Any]) -> web.Response:
    """The JSON-RPC answer of a routed request, as the SDK's JSON path writes it (a failure
    of seif's own is ``-32603`` with status 200, as the SDK answers a handler's exception)."""
    try:
        shaped = await _result(app, found, server_info)
    except Exception as exc:  # a bug, never a client's doing: say nothing about the data
        LOG.error("internal error in MCP %s: %s", found.method, type(exc).__name__)
        error = {"code": INTERNAL_ERROR, "message": "Internal error"}
        return _json({"jsonrpc": "2.0", "id": found.request_id, "error": error})
    return _json({"jsonrpc": "2.0", "id": found.request_id, "result": shaped})


def _json(body: Any) -> web.Response:
    return web.Response(body=dump_bytes(body), headers={"Content-Type": "application/json"})


async def _result(app: web.Application, found: Route, server_info: dict[str, Any]) -> Any:
    result: BaseModel
    if found.method == "tools/list":
        result = await list_tools(app, found.asked, nobody_to_tell)
    else:
        assert found.call_id is not None
        name = found.asked.sent["name"]
        result = await call_tool(app, found.asked, name, found.call_id, no_progress, nobody_to_tell)
    dumped = result.model_dump(by_alias=True, mode="json", exclude_none=True)
    shaped = methods.serialize_server_result(found.method, found.version, dumped)
    shaped.setdefault("resultType", "complete")
    meta = shaped.get("_meta")
    shaped["_meta"] = {**(meta if isinstance(meta, dict) else {}), SERVER_INFO_META: server_info}
    return shaped
