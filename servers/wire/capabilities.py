"""``GET /v1/capabilities``: what this runtime supports, as data."""

from __future__ import annotations

from collections.abc import Sequence

from compiler.builds.build import SUPPORTED_RUNTIMES
from servers.wire.answers import Capabilities, Integrations

NATIVE_INTEGRATIONS = (
    "seif Python SDK (seif.RuntimeClient)",
    "LangChain StructuredTool (seif.integrations.langchain)",
    "OpenAI Agents FunctionTool (seif.integrations.openai_agents)",
    "LangGraph interrupt() for held calls (seif.integrations.langgraph)",
)
"""The integrations that ship with seif (``integrations.native``); the composition boundaries
that are only documented are listed beside them."""
SCHEMA_KEYWORDS = (
    *("type", "properties", "required", "additionalProperties", "items", "minItems", "maxItems"),
    *("minLength", "maxLength", "minimum", "maximum", "enum", "const", "description", "title"),
)


def capabilities(mcp_revisions: Sequence[str] = ()) -> Capabilities:
    """What this runtime serves; ``mcp_revisions``: the MCP revisions at ``/mcp/{objective}``
    (``seif serve --mcp``), listed under ``integrations``."""
    native = list(NATIVE_INTEGRATIONS)
    if mcp_revisions:
        native.append(f"MCP Streamable HTTP at /mcp/{{objective}} ({', '.join(mcp_revisions)})")
    integrations: Integrations = {
        "native": native,
        "documented": ["n8n HTTP Request node", "LangChain tool callback"],
    }
    if mcp_revisions:
        integrations["mcp"] = {"path": "/mcp/{objective}", "revisions": list(mcp_revisions)}
    return {
        "runtimeContracts": sorted(SUPPORTED_RUNTIMES),
        "buildFormats": ["seif.build.v1", "seif.build.v2"],
        "executor": {
            "contract": "context-tool-executor.v1",
            "transports": ["https", "http (loopback only)"],
        },
        "schemaSubset": {
            "keywords": list(SCHEMA_KEYWORDS),
            "limits": {
                "nesting": 8,
                "propertiesPerObject": 32,
                "toolsPerCatalogue": 32,
                "catalogueBytes": 65536,
            },
        },
        "integrations": integrations,
    }
