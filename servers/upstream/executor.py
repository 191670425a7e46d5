"""A tool backed by a tool of an upstream MCP server: an
:class:`~servers.executor.interface.Executor` over the upstream's shared
:class:`~servers.upstream.connection.UpstreamConnection` (docs/upstream-mcp.md, "Runtime").

Observation (:func:`observation`): ``READY`` with the tool's own version and contract digest
when the upstream lists the pinned name with the pinned descriptor digest; when it lists it with
another digest, the shape the runtime reads as ``INCOMPATIBLE`` (``READY`` with another contract
digest: the one the tool would have with the upstream's current pin) and ``detail``
``UPSTREAM_CHANGED``; ``UNAVAILABLE`` (``UPSTREAM_UNAVAILABLE``) while the upstream is down or
no longer lists it. Every observation of a listed tool carries ``descriptorDigest``, the digest
it is listed with, so ``DISCLOSED`` records keep it.

Dispatch keeps the promises of :mod:`servers.executor.interface`: a write is checked against a
listing read immediately before (a changed or vanished tool is never called); then one
``tools/call``, never retried, with the validated arguments and ``_meta``
``{"io.seif/callId", "io.seif/idempotencyKey"}``; whatever follows the send that seif cannot
know the fate of is ``UNKNOWN``.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from policy import contract_digest
from policy.engine.disclosure import availability
from policy.ir import Tool
from policy.json.strict import dump_bytes
from policy.json.value import iter_strings, thaw
from servers.config.upstreams import UpstreamBinding
from servers.executor.interface import (
    FAILED,
    READY,
    SUCCEEDED,
    UNKNOWN,
    Dispatch,
    Observation,
    Outcome,
    unavailable,
)
from servers.upstream.calls import CallFailed
from servers.upstream.connection import Digests, NotConnected, UpstreamConnection
from servers.wire import reasons

FRESH_S = 5.0
"""A listing younger than this serves a resolve's observation."""
MAX_MESSAGE = 1000
"""At most this many characters of an upstream's ``isError`` text reach the receipt."""
CALL_ID_META, IDEMPOTENCY_META = "io.seif/callId", "io.seif/idempotencyKey"

log = logging.getLogger(__name__)


def observation(tool: Tool, digests: Digests | None) -> Observation:
    """What ``digests`` (the upstream's listing, None while down) say of ``tool``."""
    pin = tool.upstream
    seen = None if digests is None or pin is None else digests.get(pin.tool)
    if pin is None or seen is None:
        return unavailable(reasons.UPSTREAM_UNAVAILABLE)
    if seen == pin.descriptor_digest:
        digest = tool.contract_digest
        return {"state": READY, "version": tool.version, "contractDigest": digest,
                "descriptorDigest": seen}  # fmt: skip
    listed = contract_digest(
        {
            "id": tool.id,
            "name": tool.name,
            "version": tool.version,
            "parameters": thaw(tool.parameters),
            "result": None if tool.result is None else thaw(tool.result),
            "upstream": {"server": pin.server, "tool": pin.tool, "descriptorDigest": seen},
        }
    )
    return {"state": READY, "version": tool.version, "contractDigest": listed,
            "descriptorDigest": seen, "detail": reasons.UPSTREAM_CHANGED}  # fmt: skip


def interpret(result: Any, tool: Tool, max_bytes: int, secrets: Sequence[str]) -> Outcome:
    """The outcome of a ``tools/call`` result object, as the upstream sent it."""
    if any(secret in text for text in iter_strings(result) for secret in secrets):
        return Outcome(UNKNOWN, reason=reasons.CREDENTIAL_REFLECTED)  # output discarded
    if not isinstance(result, dict):
        return Outcome(UNKNOWN, reason=reasons.INVALID_RESPONSE)
    try:
        size = len(dump_bytes(result))
    except (TypeError, ValueError):  # not strict JSON (a NaN, an infinity, ...)
        return Outcome(UNKNOWN, reason=reasons.INVALID_RESPONSE)
    if size > max_bytes:
        return Outcome(UNKNOWN, reason=reasons.TOO_LARGE)
    content, is_error = result.get("content", []), result.get("isError", False)
    if not isinstance(content, list) or not isinstance(is_error, bool):
        return Outcome(UNKNOWN, reason=reasons.INVALID_RESPONSE)
    if is_error:
        return Outcome(FAILED, reason=reasons.UPSTREAM_TOOL_ERROR, message=_text(content))
    if tool.result is None:
        return Outcome(SUCCEEDED, output={"content": content})
    output = result.get("structuredContent")
    validator = tool.result_validator
    if output is None or (validator is not None and not validator.is_valid(output)):
        return Outcome(FAILED, reason=reasons.RESULT_INVALID)
    return Outcome(SUCCEEDED, output=output)


def _text(content: list[Any]) -> str:
    """The text items of an ``isError`` result, at most :data:`MAX_MESSAGE` characters."""
    texts = [item.get("text") for item in content if isinstance(item, dict)]
    return "\n".join(t for t in texts if isinstance(t, str))[:MAX_MESSAGE]


def _error_outcome(error: Exception) -> Outcome:
    """The outcome of a ``tools/call`` the SDK raised for, after it may have been sent."""
    from mcp.shared.exceptions import MCPError  # noqa: PLC0415
    from mcp_types import CONNECTION_CLOSED, REQUEST_TIMEOUT  # noqa: PLC0415
    from pydantic import ValidationError  # noqa: PLC0415

    if isinstance(error, MCPError):
        if error.code == REQUEST_TIMEOUT:
            return Outcome(UNKNOWN, reason=reasons.TIMEOUT)
        if error.code == CONNECTION_CLOSED:
            return Outcome(UNKNOWN, reason=reasons.CONNECTION_LOST)
        return Outcome(FAILED, reason=reasons.UPSTREAM_ERROR, error_code=str(error.code))
    if isinstance(error, TimeoutError):
        return Outcome(UNKNOWN, reason=reasons.TIMEOUT)
    if isinstance(error, ValidationError):
        return Outcome(UNKNOWN, reason=reasons.INVALID_RESPONSE)
    return Outcome(UNKNOWN, reason=reasons.CLIENT_ERROR)


@dataclass(frozen=True, slots=True)
class UpstreamExecutor:
    """The executor of one upstream-bound tool (``contract`` is its compiled contract, with
    the pin)."""

    binding: UpstreamBinding
    contract: Tool
    connection: UpstreamConnection

    @property
    def tool(self) -> str:
        return self.binding.tool

    async def describe(self) -> Observation:
        return observation(self.contract, await self.connection.digests(FRESH_S))

    async def dispatch(self, call: Dispatch) -> Outcome:
        tool = call.tool
        if tool.id != self.binding.tool or tool.upstream is None:
            return Outcome(FAILED, reason=reasons.BINDING_MISMATCH)
        if tool.effect == "write":  # the listing of right now: a rug pull is never called
            refused = availability(tool, observation(tool, await self.connection.digests(0)))
            if refused is not None:
                return Outcome(FAILED, reason=refused)
        meta = {CALL_ID_META: call.call_id, IDEMPOTENCY_META: call.idempotency_key}
        timeout_s = self.binding.timeout_ms / 1000
        try:
            async with asyncio.timeout(timeout_s + 1.0):  # the client's own bound is timeout_s
                result = await self.connection.call(
                    tool.upstream.tool, thaw(call.arguments), meta,
                    timeout_s=timeout_s, max_bytes=self.binding.max_bytes,
                )  # fmt: skip
        except NotConnected:
            return Outcome(FAILED, reason=reasons.TOOL_UNAVAILABLE)
        except CallFailed as failed:
            outcome = failed.outcome
            log.warning("upstream %s %s: %s", self.connection.server, self.tool, outcome.reason)
            return outcome
        except Exception as error:  # the SDK's, whatever their class: classified, not shown
            outcome = _error_outcome(error)
            log.warning("upstream %s %s: %s", self.connection.server, self.tool, outcome.reason)
            return outcome
        return interpret(result, tool, self.binding.max_bytes, self.connection.secrets)
