"""What MCP clients are shown: a disclosure as a ``tools/list`` result, a receipt as a
``tools/call`` result. Plain data in, the SDK's types out; no policy here.

- A tool: ``name`` (the function name the model calls), ``description``, ``inputSchema`` (the
  exact parameter schema), ``outputSchema`` (the result schema, when it is declared and is an
  object schema: MCP's ``structuredContent`` is always an object) and ``annotations``
  (``readOnlyHint`` for effect ``read``, ``destructiveHint`` for effect ``write``,
  ``idempotentHint: false``, as seif never retries a call).
- ``SUCCEEDED``: the output as JSON text, and as ``structuredContent`` when it is an object.
- Anything else, and a duplicate: ``isError: true``, a text saying what happened and what to
  do (for ``ARGUMENTS_INVALID``, each schema error's pointer and message, bounded, never a
  value: :mod:`policy.feedback`), and the receipt's ``status``, ``reason`` and ``duplicate`` in
  ``_meta["io.seif/receipt"]``. Never a ``structuredContent``: the tool's ``outputSchema``
  describes its output, which an error result does not carry, and clients such as the official
  TypeScript SDK reject a whole result whose ``structuredContent`` the schema does not admit.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import mcp_types as mt

from policy import reasons as R
from policy.engine.disclosure import Disclosure
from policy.feedback import argument_errors
from policy.ir import Tool
from policy.json.strict import dumps
from policy.json.value import thaw
from servers.wire import reasons

CALL_ID_META = "io.seif/callId"
CONTEXT_META = "io.seif/contextRef"
RECEIPT_META = "io.seif/receipt"

ADVICE = {
    R.TOOL_NOT_DISCLOSED: "this tool is not available here; list the tools and use one listed",
    R.ARGUMENTS_INVALID: "the arguments do not match the tool's inputSchema; correct them",
    R.CONDITION_DENIED: "the policy does not allow this call with these arguments",
    R.CONDITION_NOT_MET: "the policy does not allow this call now",
    R.CONDITION_ERROR: "the policy could not evaluate this call; do not retry it unchanged",
    R.CALL_LIMIT_EXCEEDED: "this tool has been called as often as allowed in this context",
    R.CALL_CONFLICT: "this call id was used for other arguments; use a new call id",
    R.APPROVAL_REQUIRED: (
        "a human has not approved this exact call yet; the call is held for approval: "
        "call again with the same io.seif/callId and arguments once it is approved"
    ),
    R.APPROVAL_INVALID: "the approval does not match these exact arguments",
    R.APPROVAL_EXPIRED: "the approval ran out unused; call again to ask for a new one",
    reasons.REJECTED: "a human rejected this call; do not make it again",
    R.CONTEXT_EXPIRED: "the context expired; list the tools again",
    R.CONTEXT_UNKNOWN: "the context is unknown; list the tools again",
    R.RESOLUTION_BLOCKED: "no tools can be disclosed for this objective now",
    reasons.TOOL_UNAVAILABLE: "the tool's executor is not available; nothing ran",
    reasons.TOOL_INCOMPATIBLE: (
        "the tool's executor does not serve the declared contract; nothing ran"
    ),
    reasons.UPSTREAM_CHANGED: (
        "the tool's upstream MCP server changed it since it was reviewed; nothing ran"
    ),
    reasons.UPSTREAM_TOOL_ERROR: "the upstream tool failed the call",
    reasons.UPSTREAM_ERROR: "the upstream MCP server refused the call; see its error code",
    reasons.IN_FLIGHT: (
        "the first request of this call id is still running; its outcome is unknown"
    ),
    reasons.EXECUTOR_ERROR: "the tool's executor refused or failed the call; see its error code",
    reasons.RESULT_INVALID: (
        "the tool's answer did not match its declared result; nothing is returned"
    ),
    reasons.TIMEOUT: "the tool did not answer in time; it may or may not have run",
    reasons.INTERRUPTED: "the runtime stopped while the call ran; it may or may not have run",
    reasons.INVALID_RESPONSE: "the tool's answer could not be read; it may or may not have run",
    reasons.BINDING_MISMATCH: "the tool's executor serves another contract; nothing ran",
    reasons.REPLICA_LOST: ("the runtime replica running the call died; it may or may not have run"),
    reasons.STORE_UNAVAILABLE: (
        "the runtime's store did not answer; retry with the same call id, which runs it once"
    ),
}
STATUS_TEXT = {
    "DENIED": "The call was refused and nothing ran",
    "FAILED": "The call failed",
    "UNKNOWN": (
        "The call's outcome is unknown: it may or may not have run; do not retry it with a "
        "new call id without checking"
    ),
}


_LISTED: dict[tuple[str, ...], mt.Tool] = {}
"""Each tool as MCP lists it, by what it shows (a build's tools are few and never change):
built once, never mutated, shared by every list that shows it."""


def mcp_tool(tool: Tool) -> mt.Tool:
    """One disclosed tool as MCP lists it."""
    key = (tool.id, tool.contract_digest, tool.description, tool.effect)
    found = _LISTED.get(key)
    if found is None:
        found = _LISTED[key] = _listed(tool)
    return found


def _listed(tool: Tool) -> mt.Tool:
    result = thaw(tool.result) if tool.result is not None else None
    return mt.Tool(
        name=tool.name,
        description=tool.description,
        input_schema=thaw(tool.parameters),
        output_schema=result if _object_schema(result) else None,
        annotations=mt.ToolAnnotations(
            read_only_hint=tool.effect == "read",
            destructive_hint=tool.effect == "write",
            idempotent_hint=False,
        ),
    )


def _object_schema(schema: Any) -> bool:
    return isinstance(schema, dict) and schema.get("type") == "object"


def tools_result(disclosure: Disclosure, context_ref: str) -> mt.ListToolsResult:
    """The ``tools/list`` result of one disclosure: its tools in declared order (it is
    deterministic: clients may cache it), the context's ref and messages in ``_meta``."""
    messages = [{"id": m.id, "role": m.role, "text": m.text} for m in disclosure.messages]
    meta = {CONTEXT_META: context_ref, "io.seif/messages": messages}
    return private_list([mcp_tool(t) for t in disclosure.tools], meta)


def private_list(tools: list[mt.Tool], meta: dict[str, Any]) -> mt.ListToolsResult:
    """A ``tools/list`` result saying it depends on the credential that asked (its context):
    ``cacheScope: "private"``, so no shared cache gives it to another, and ``ttlMs: 0``, as it
    may change at the next request. Both are on the wire of the stateless revision only (the
    SDK's serializer drops them from the older ones)."""
    return mt.ListToolsResult(tools=tools, cache_scope="private", ttl_ms=0, _meta=meta)


def call_result(receipt: Mapping[str, Any]) -> mt.CallToolResult:
    """A receipt as a ``tools/call`` result."""
    status, duplicate = receipt["status"], bool(receipt.get("duplicate"))
    meta = {CALL_ID_META: receipt["callId"]}
    if status == "SUCCEEDED" and not duplicate:
        output = receipt.get("output")
        return mt.CallToolResult(
            content=[mt.TextContent(text=dumps(output))],
            structured_content=output if isinstance(output, dict) else None,
            _meta=meta,
        )
    return refusal(status, receipt.get("reason"), duplicate, meta, _specifics(receipt))


def refusal(
    status: str,
    reason: str | None,
    duplicate: bool,
    meta: Mapping[str, Any] | None = None,
    specifics: str = "",
) -> mt.CallToolResult:
    """An ``isError`` result: what happened and what to do (and ``specifics``, the receipt's
    details that say how), the receipt's status, reason and duplicate flag in ``_meta``."""
    receipt = {"status": status, "reason": reason, "duplicate": duplicate}
    return mt.CallToolResult(
        content=[mt.TextContent(text=explain(status, reason, duplicate) + specifics)],
        is_error=True,
        _meta={**(meta or {}), RECEIPT_META: receipt},
    )


def explain(status: str, reason: str | None, duplicate: bool) -> str:
    """One sentence for the model: what happened, and what to do."""
    if duplicate:
        first = f"This call id was made before (it ended {status}); nothing new ran"
        if reason:
            first += f" ({reason})"
        return first + ": no output is available again; do not retry it."
    head = STATUS_TEXT.get(status, f"The call ended {status}")
    if reason is None:
        return head + "."
    return f"{head} ({reason}): {ADVICE.get(reason, 'see the reason code')}."


def _specifics(receipt: Mapping[str, Any]) -> str:
    """What the receipt says beyond its reason that helps to fix the call: the schema errors
    of refused arguments (:mod:`policy.feedback`: bounded, never a value), the executor's own
    error code."""
    if receipt.get("duplicate"):
        return ""
    decision = receipt.get("decision")
    errors = decision.get("errors") if isinstance(decision, Mapping) else None
    if receipt.get("reason") == R.ARGUMENTS_INVALID and errors:
        return f" To fix: {argument_errors(errors).text()}."
    error = receipt.get("error")
    said = error.get("message") if isinstance(error, Mapping) else None
    if isinstance(said, str):  # an upstream MCP tool's own isError text
        return f" The tool said: {said}"
    code = receipt.get("executorError")
    return f" The executor's error code: `{code}`." if isinstance(code, str) else ""
