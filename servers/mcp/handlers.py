"""``tools/list`` and ``tools/call`` for one MCP request, whichever path framed it (the SDK's,
or the native stateless one of :mod:`servers.mcp.fast`): the context it uses, its call id, and
the runtime's answer as the SDK's result types."""

from __future__ import annotations

import hashlib
import json
import logging
import secrets
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from typing import Any

import mcp_types as mt
from aiohttp import web
from mcp.shared.exceptions import MCPError

from policy.json.strict import dump_bytes
from servers.http.app import RUNTIME
from servers.identity.principal import Authenticated
from servers.mcp.calls import Alive, CallRequest, Progress, always, call
from servers.mcp.contexts import Fresh, Live, Wanted
from servers.mcp.mounted import MOUNTED
from servers.mcp.results import CALL_ID_META, call_result, private_list, refusal
from servers.store.rows import StoreError
from servers.wire import reasons
from servers.wire.errors import INVALID_PARAMS, ErrorCode, Refused
from servers.wire.fields import ID_RULE, is_id
from servers.wire.requests import ResolveRequest

COORDINATES = ("consumer", "environment", "deployment")
Renewed = Callable[[], Awaitable[None]]
"""Tell the client its tools may have changed (a session's context was renewed)."""

LOG = logging.getLogger("seif.mcp")
NAMED_CALL_SLACK_S = 60.0
"""How much longer than an approval wait a request of a named call id waits for another
replica's request of it (which may wait that long, then run the tool)."""


@dataclass(frozen=True, slots=True)
class Asked:
    """One request as the handlers need it: who, where, in which session (if any)."""

    credential: Authenticated
    objective: str
    coordinates: Mapping[str, str]
    session: str | None
    request_id: Any
    sent: Mapping[str, Any]
    """The request's ``params`` as seif's strict boundary parsed them."""
    alive: Alive = always
    """Whether its client still waits for the answer."""

    def wanted(self) -> Wanted:
        """Its MCP session's context, or its credential's for the objective and coordinates
        (a session's coordinates are part of its key too: a request naming others gets a
        context of its own, never another's)."""
        coords = tuple(self.coordinates.get(c, "") for c in COORDINATES)
        owner = self.credential.owner  # the credential and the subject: a user's own context
        key: tuple[object, ...]
        if self.session is not None:  # the SDK checked it is a session this caller opened
            key = ("session", owner, self.objective, self.session, *coords)
        else:
            key = ("credential", owner, self.objective, *coords)
        request = ResolveRequest(
            objective=self.objective,
            consumer=self.coordinates.get("consumer"),
            environment=self.coordinates.get("environment"),
            deployment=self.coordinates.get("deployment"),
        )
        return Wanted(key, request, self.credential)

    def call_id(self) -> CallId:
        """``_meta["io.seif/callId"]`` when given (-32602 when it is no id); else, in a
        session, one derived from the session and the JSON-RPC id (a resent request is the
        same call); else a call of its own (nothing to qualify a request id by)."""
        meta = self.sent.get("_meta")
        given = meta.get(CALL_ID_META) if isinstance(meta, dict) else None
        if given is not None:
            if not is_id(given):
                raise MCPError(INVALID_PARAMS, f"`_meta.{CALL_ID_META}` must be {ID_RULE}")
            return CallId(given, named=True)
        if self.session is not None:
            seed = self.session.encode() + b"\0" + dump_bytes(self.request_id)
            return CallId("mcp-" + hashlib.blake2b(seed, digest_size=16).hexdigest(), named=True)
        return CallId("mcp-" + secrets.token_hex(16), named=False)


@dataclass(frozen=True, slots=True)
class CallId:
    """A call's id, and whether it names one call of its credential and objective across
    their contexts (a client's, or a session's request id) or only this request's."""

    value: str
    named: bool


async def list_tools(app: web.Application, asked: Asked, renewed: Renewed) -> mt.ListToolsResult:
    """The context's tools (resolving or renewing it as needed); each list a ``DISCLOSED``."""
    found = await _context(app, asked)
    if isinstance(found, Refused):
        return private_list([], {"io.seif/blocked": found.extra.get("causes")})
    live, fresh = found
    if fresh == "LIVE":  # its context's list again: logged as disclosed again, so it replays
        await app[RUNTIME].contexts.disclosed_again(live.opened)
    await _told(app, asked, fresh, renewed)
    return live.listed


async def call_tool(
    app: web.Application,
    asked: Asked,
    name: str,
    call_id: CallId,
    progress: Progress,
    renewed: Renewed,
) -> mt.CallToolResult:
    """One call through the runtime's execute path (and the approval wait). A named call id
    is one call of the credential and objective: the requests of one are served one at a
    time, and one that ran in another of their contexts (another session, a context since
    renewed, a runtime since restarted) is answered by that call's receipt, never run again.
    A store that did not answer is ``UNKNOWN`` ``STORE_UNAVAILABLE`` (retry the call id: it
    runs once), not a protocol error."""
    try:
        return await _call_once(app, asked, name, call_id, progress, renewed)
    except StoreError as exc:
        LOG.error("store unavailable in an MCP call: %s", type(exc).__name__)
        unanswered = reasons.STORE_UNAVAILABLE
        return refusal("UNKNOWN", unanswered, False, {CALL_ID_META: call_id.value})


async def _call_once(
    app: web.Application,
    asked: Asked,
    name: str,
    call_id: CallId,
    progress: Progress,
    renewed: Renewed,
) -> mt.CallToolResult:
    if not call_id.named:
        return await _call_here(app, asked, name, call_id.value, progress, renewed, own=True)
    mounted = app[MOUNTED]
    key = (asked.credential.id, asked.objective, call_id.value)  # serialized per application
    across = app[RUNTIME].exclusive(  # and one at a time across replicas: a request of it on
        json.dumps(["mcp-call", *key]),  # another may wait for its approval, then one call
        mounted.options.approval_wait_s + NAMED_CALL_SLACK_S,
    )
    async with mounted.claims.held(key), across:
        return await _call_here(app, asked, name, call_id.value, progress, renewed)


async def _call_here(
    app: web.Application,
    asked: Asked,
    name: str,
    call_id: str,
    progress: Progress,
    renewed: Renewed,
    *,
    own: bool = False,
) -> mt.CallToolResult:
    found = await _context(app, asked)
    if isinstance(found, Refused):
        return refusal("DENIED", found.code, False, {CALL_ID_META: call_id})
    live, fresh = found
    await _told(app, asked, fresh, renewed)
    runtime = app[RUNTIME]
    arguments = asked.sent.get("arguments")
    request = CallRequest(
        context_ref=live.context_ref,
        tool=name,
        call_id=call_id,
        arguments={} if arguments is None else arguments,
        credential=asked.credential,
        own=own,
    )
    earlier = await runtime.dispatcher.made_before(
        request.execute(), asked.credential, asked.objective
    )
    if earlier is not None:
        return call_result(earlier)
    wait_s = app[MOUNTED].options.approval_wait_s
    receipt = await call(runtime, request, wait_s, progress, asked.alive)
    return call_result(receipt)


async def _context(app: web.Application, asked: Asked) -> tuple[Live, Fresh] | Refused:
    """The request's live context, or the refusal of a blocked resolution (logged)."""
    try:
        return await app[MOUNTED].contexts.get(asked.wanted())
    except Refused as exc:
        if exc.error is not ErrorCode.RESOLUTION_BLOCKED:
            raise
        return exc


async def _told(app: web.Application, asked: Asked, fresh: Fresh, renewed: Renewed) -> None:
    """Tell a session whose context was renewed; remember how to tell it of a change."""
    if asked.session is None:
        return
    app[MOUNTED].contexts.remember(asked.wanted().key, renewed)
    if fresh == "RENEWED":
        await renewed()


async def no_progress(_done: float, _total: float, _message: str) -> None:
    """Progress nobody asked for."""


async def nobody_to_tell() -> None:
    """A renewal with no session to tell."""
