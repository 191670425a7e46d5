"""The receipt reasons the runtime adds itself, beside the engine's decision reasons
(:mod:`policy.reasons`): what happened to a call the engine allowed, or to a request that got no
decision. A receipt's ``reason`` is one of these or one of the engine's."""

from __future__ import annotations

from typing import Final

from policy import reasons as engine

# -- the runtime ------------------------------------------------------------------------------
IN_FLIGHT: Final = "IN_FLIGHT"
"""A duplicate that waited the tool's timeout for the first request of its call id (UNKNOWN)."""
STORE_UNAVAILABLE: Final = "STORE_UNAVAILABLE"
"""A shared store did not answer the claim: the call may be claimed (UNKNOWN; retry it)."""
TOOL_UNAVAILABLE: Final = engine.TOOL_UNAVAILABLE
"""Not dispatched: the executor did not describe itself before dispatch (FAILED)."""
TOOL_INCOMPATIBLE: Final = engine.TOOL_INCOMPATIBLE
"""Not dispatched: the executor describes another contract now (FAILED)."""
UPSTREAM_CHANGED: Final = engine.UPSTREAM_CHANGED
"""Not disclosed, or not dispatched: the upstream MCP server lists the tool with another
descriptor digest than its pin (an observation's ``detail``; FAILED)."""
INTERRUPTED: Final = "INTERRUPTED"
"""An intent the store found still running when it was opened: a crash (UNKNOWN)."""
REPLICA_LOST: Final = "REPLICA_LOST"
"""An intent of a replica whose lease lapsed while the call ran (UNKNOWN)."""
RECONCILED: Final = "RECONCILED"
"""An intent the decision log recorded and the store had lost, put back at start (UNKNOWN)."""
REJECTED: Final = "REJECTED"
"""An MCP call a human rejected while it waited (DENIED)."""

# -- the executor's answer, or its transport (servers.executor) -------------------------------
RESULT_INVALID: Final = engine.RESULT_INVALID
EXECUTOR_ERROR: Final = "EXECUTOR_ERROR"
BINDING_MISMATCH: Final = "BINDING_MISMATCH"
REQUEST_INVALID: Final = "REQUEST_INVALID"
INVALID_RESPONSE: Final = "INVALID_RESPONSE"
CREDENTIAL_REFLECTED: Final = "CREDENTIAL_REFLECTED"
REDIRECT: Final = "REDIRECT"
TIMEOUT: Final = "TIMEOUT"
TOO_LARGE: Final = "TOO_LARGE"
CONNECTION_LOST: Final = "CONNECTION_LOST"
CONNECTION_REFUSED: Final = "CONNECTION_REFUSED"
CONNECT_TIMEOUT: Final = "CONNECT_TIMEOUT"
TLS_FAILED: Final = "TLS_FAILED"
TLS_NAME_MISMATCH: Final = "TLS_NAME_MISMATCH"
TLS_UNTRUSTED: Final = "TLS_UNTRUSTED"
ENDPOINT_INVALID: Final = "ENDPOINT_INVALID"
CLIENT_ERROR: Final = "CLIENT_ERROR"

# -- an upstream MCP server's answer (servers.upstream) --------------------------------------
UPSTREAM_UNAVAILABLE: Final = "UPSTREAM_UNAVAILABLE"
"""The upstream is down or does not list the tool (an observation's ``detail``)."""
UPSTREAM_TOOL_ERROR: Final = "UPSTREAM_TOOL_ERROR"
"""The upstream tool answered ``isError`` (FAILED)."""
UPSTREAM_ERROR: Final = "UPSTREAM_ERROR"
"""The upstream answered a JSON-RPC error (FAILED; its code in ``error.code``)."""

RUNTIME_REASONS: Final = frozenset(
    {
        IN_FLIGHT,
        STORE_UNAVAILABLE,
        TOOL_UNAVAILABLE,
        TOOL_INCOMPATIBLE,
        INTERRUPTED,
        REPLICA_LOST,
        RECONCILED,
        REJECTED,
        RESULT_INVALID,
        EXECUTOR_ERROR,
        BINDING_MISMATCH,
        REQUEST_INVALID,
        INVALID_RESPONSE,
        CREDENTIAL_REFLECTED,
        REDIRECT,
        TIMEOUT,
        TOO_LARGE,
        CONNECTION_LOST,
        CONNECTION_REFUSED,
        CONNECT_TIMEOUT,
        TLS_FAILED,
        TLS_NAME_MISMATCH,
        TLS_UNTRUSTED,
        ENDPOINT_INVALID,
        CLIENT_ERROR,
        UPSTREAM_UNAVAILABLE,
        UPSTREAM_TOOL_ERROR,
        UPSTREAM_ERROR,
    }
)
"""Every reason a receipt carries that is not an engine decision's."""
