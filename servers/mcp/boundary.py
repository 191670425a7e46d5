"""The HTTP boundary of ``/mcp/{objective}``: what seif checks before the MCP SDK sees a request.

- first, before the token: the ``Origin`` and, on a loopback runtime, the ``Host`` (DNS
  rebinding: 403 ``ORIGIN_REFUSED``, :mod:`servers.mcp.origins`);
- the bearer token (``servers.http.app.bearer``, as every route of the runtime): 401 with
  ``WWW-Authenticate: Bearer``; 403 for a credential without both ``context.resolve`` and
  ``tools.execute``. The endpoint is a protected resource of its own (the issuers' ``audience``
  joined with ``mcp/{objective}``): a token for it is accepted, and with issuers its challenges
  name its metadata (``resource_metadata``, served at
  ``/.well-known/oauth-protected-resource/mcp/{objective}``) and the scope values it needs;
- the objective: 403 ``OBJECTIVE_FORBIDDEN`` for a credential whose ``objectives`` do not
  hold it (``servers.http.app.resolvable``), 404 ``OBJECTIVE_UNKNOWN``; and the query
  (``consumer``, ``environment``, ``deployment``, each at most once: anything else is 400);
- the credential's budget of MCP requests being answered, and MCP's share of the connections
  (429 and 503, each a JSON-RPC error, :mod:`servers.mcp.streams`);
- the body: its size and encoding (``servers.http.bodies``), strict JSON (JSON-RPC ``-32700``),
  one JSON-RPC 2.0 message object (a batch or a broken envelope is ``-32600``, as is a request
  id that is neither a string nor an integer, or one still in use in the same session).

The SDK then speaks the protocol, through :mod:`servers.mcp.bridge`; a client that left before
its answer is no error of anyone's and is not logged as one.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from functools import partial
from typing import Any

from aiohttp import web
from mcp.server.auth.middleware.bearer_auth import AuthenticatedUser
from mcp.server.auth.provider import AccessToken
from mcp.server.streamable_http_manager import StreamableHTTPSessionManager
from mcp_types.version import HANDSHAKE_PROTOCOL_VERSIONS

from policy.json.strict import JsonError, dump_bytes, loads
from servers.http import bodies
from servers.http.app import MCP_SCOPES, bearer, resolvable
from servers.http.bodies import error_response
from servers.identity.principal import Authenticated
from servers.mcp import bridge, fast, origins
from servers.mcp.handlers import Asked
from servers.mcp.mounted import MOUNTED, Mounted
from servers.wire.errors import (
    CLIENT_GONE,
    INVALID_REQUEST,
    PARSE_ERROR,
    RPC_STATUS,
    ErrorCode,
    Refused,
)
from servers.wire.fields import ID_RULE, is_id
from servers.wire.limits import MAX_ID_LENGTH

LOG = logging.getLogger("seif.mcp")
COORDINATES = ("consumer", "environment", "deployment")


async def handle(request: web.Request) -> web.StreamResponse:
    mounted = request.app[MOUNTED]
    options, headers = mounted.options, request.headers
    rebinding = origins.refusal(
        headers.getall("Origin", []),
        headers.getall("Host", []),
        options.allowed_origins,
        options.loopback,
    )
    if rebinding is not None:
        raise Refused(ErrorCode.ORIGIN_REFUSED, rebinding)
    objective = request.match_info["objective"]
    # the resource the endpoint is: an objective the build does not declare is refused below,
    # after the token (its challenge names the runtime's metadata, not a path's that is none)
    resource = f"mcp/{objective}" if objective in mounted.managers else ""
    try:
        credential = await bearer(request, *MCP_SCOPES, resource=resource)
    except Refused as exc:  # 401 and 403 with their `WWW-Authenticate`
        return error_response(exc)
    resolvable(credential, objective)  # 403 OBJECTIVE_FORBIDDEN: before any session or context
    if objective not in mounted.managers:
        raise Refused(ErrorCode.OBJECTIVE_NOT_MOUNTED)
    with mounted.streams.held(credential.id, request.method == "GET") as refused:
        if refused is not None:
            answer = _rpc_error(INVALID_REQUEST, refused.message, refused.status)
            answer.headers["Retry-After"] = "1"
            return answer
        return await _handled(request, mounted, credential, objective)


async def _handled(
    request: web.Request, mounted: Mounted, credential: Authenticated, objective: str
) -> web.StreamResponse:
    who = credential.principal  # the SDK's sessions belong to the client, issuer and subject
    token = AccessToken(
        token="",
        client_id=credential.id,
        scopes=[],
        subject=who.subject,
        claims=None if who.issuer is None else {"iss": who.issuer},
    )
    extra: dict[str, Any] = {
        "user": AuthenticatedUser(token),
        "seif.credential": credential,
        "seif.objective": objective,
        "seif.coordinates": _coordinates(request),
        "seif.alive": partial(_alive, request),
    }
    body = b""
    if request.method == "POST":
        body = await bodies.read_bytes(request)
        parsed = one_message(body)
        if isinstance(parsed, web.Response):
            return parsed
        extra["seif.body"] = parsed
    message = extra.get("seif.body")
    manager = mounted.managers[objective]
    if _stateless(request):
        found = fast.route(request, message, _asked(extra, message)) if mounted.native else None
        if found is not None:
            mounted.native_answers += 1
            return await fast.answer(request.app, found, mounted.server_info)
        if not fast.wants_progress(message):
            manager = mounted.plain[objective]
    with _answering(mounted, request, (credential.id, objective), message) as (
        refused,
        answered,
    ):
        if refused is not None:
            return refused
        return await _served(manager, request, body, extra, answered)


def _asked(extra: Mapping[str, Any], message: Any) -> Asked:
    params = message.get("params") if isinstance(message, dict) else None
    return Asked(
        credential=extra["seif.credential"],
        objective=extra["seif.objective"],
        coordinates=extra["seif.coordinates"],
        session=None,
        request_id=message.get("id") if isinstance(message, dict) else None,
        sent=params if isinstance(params, dict) else {},
        alive=extra["seif.alive"],
    )


def _alive(request: web.Request) -> bool:
    """Whether the request's client is still connected (waiting for its answer)."""
    return request.transport is not None and not request.transport.is_closing()


def _stateless(request: web.Request) -> bool:
    """Whether the SDK serves the request statelessly: a revision past the handshake ones."""
    version = request.headers.get("mcp-protocol-version")
    return version is not None and version not in HANDSHAKE_PROTOCOL_VERSIONS


async def _served(
    manager: StreamableHTTPSessionManager,
    request: web.Request,
    body: bytes,
    extra: dict[str, Any],
    answered: Callable[[], None] | None,
) -> web.StreamResponse:
    try:
        answer, gone = await bridge.serve(manager.handle_request, request, body, extra, answered)
    except ConnectionResetError:
        gone, answer = True, None
    except bridge.StreamBroken as broken:  # a bug, mid-answer: no second answer is begun
        LOG.error("internal error in MCP %s after its answer began", request.method)
        return broken.response
    except Exception as exc:  # a bug, never a client's doing: say nothing about the data
        LOG.error("internal error in MCP %s: %s", request.method, type(exc).__name__)
        raise
    if answer is None:
        if gone:
            return web.Response(status=CLIENT_GONE)
        raise Refused(ErrorCode.INTERNAL, "the MCP transport gave no answer")
    return answer


@contextmanager
def _answering(
    mounted: Mounted, request: web.Request, where: tuple[str, str], message: Any
) -> Iterator[tuple[web.Response | None, Callable[[], None] | None]]:
    """Hold a session request's id while it is answered: the SDK keys a session's answers by
    id, so a second request with an id still in use is refused (-32600), never crossed.
    Yields the refusal, or the release of the id: called (by :mod:`servers.mcp.bridge`) just
    before the answer is sent, when the SDK holds the id no longer, so a client that sends
    the id again the moment its answer arrives finds it free."""
    session = request.headers.get("mcp-session-id")
    is_request = isinstance(message, dict) and "method" in message and "id" in message
    if not session or not is_request:
        yield None, None
        return
    key = (*where, session, str(message["id"]))  # where: (credential, objective)
    if key in mounted.in_flight:
        yield _rpc_error(INVALID_REQUEST, "this request id is still in use in this session"), None
        return
    holder = mounted.in_flight[key] = object()

    def release() -> None:  # only its own hold: the id may be another request's already
        if mounted.in_flight.get(key) is holder:
            del mounted.in_flight[key]

    try:
        yield None, release
    finally:
        release()


def _coordinates(request: web.Request) -> dict[str, str]:
    """``consumer``, ``environment``, ``deployment`` from the query (each at most once)."""
    out = {}
    for name in request.query:
        if name not in COORDINATES:
            raise Refused(ErrorCode.BAD_REQUEST, f"unknown query parameter `{name[:64]}`")
        values = request.query.getall(name)
        if len(values) > 1:
            message = f"query parameter `{name}` is given more than once"
            raise Refused(ErrorCode.BAD_REQUEST, message)
        if not is_id(values[0]):
            raise Refused(ErrorCode.BAD_REQUEST, f"`{name}` must be {ID_RULE}")
        out[name] = values[0]
    return out


def one_message(body: bytes) -> dict[str, Any] | web.Response:
    """The body as one JSON-RPC 2.0 message object, or the JSON-RPC error answering it."""
    try:
        value = loads(body)
    except JsonError as exc:
        return _rpc_error(PARSE_ERROR, f"the body is not strict JSON: {exc}")
    if isinstance(value, list):
        return _rpc_error(INVALID_REQUEST, "batch requests are not supported: send one message")
    if not isinstance(value, dict):
        return _rpc_error(INVALID_REQUEST, "the body must be a JSON-RPC message object")
    problem = _envelope_problem(value)
    return _rpc_error(INVALID_REQUEST, problem) if problem else value


def _envelope_problem(message: dict[str, Any]) -> str | None:
    """What is wrong with a message's JSON-RPC 2.0 envelope, if anything."""
    if message.get("jsonrpc") != "2.0":
        return '`jsonrpc` must be "2.0"'
    if "method" in message:
        if not isinstance(message["method"], str):
            return "`method` must be a string"
    elif "result" not in message and "error" not in message:
        return "a message needs a `method` (or is a response, with `result` or `error`)"
    answered_error = message.get("id", 0) is None and "error" in message
    if "id" in message and not (_plain_id(message["id"]) or answered_error):
        return "`id` must be a string or an integer"
    if isinstance(message.get("id"), str) and len(message["id"]) > MAX_ID_LENGTH:
        return f"`id` must be at most {MAX_ID_LENGTH} characters"
    return None


def _plain_id(value: Any) -> bool:
    return isinstance(value, str) or (isinstance(value, int) and not isinstance(value, bool))


def _rpc_error(code: int, message: str, status: int = RPC_STATUS) -> web.Response:
    body = {"jsonrpc": "2.0", "id": None, "error": {"code": code, "message": message}}
    return web.Response(body=dump_bytes(body), status=status, content_type="application/json")
