"""The bindings file of a build with placeholders to fill in, and what each executor must answer.

The template is a bindings file exactly (``servers/config/files.py``, a closed format), so that
it loads once its placeholders are replaced: one entry per tool with a placeholder ``https://``
endpoint, a ``secretRef`` naming the environment variable that will hold that executor's
credential, the tool's declared ``timeoutMs`` and the default ``maxBytes``. What each executor
must describe (``GET {endpoint}/describe``: the executor contract, the tool id, version and
contract digest) is not a bindings field, so it goes into ``contracts.json`` next to the template.

A tool imported from an upstream MCP server (its contract carries ``upstream``) is bound to that
server instead (``{"upstream": SERVER, "timeoutMs", "maxBytes"}``), and the template's
``upstreams`` has an entry for every server the contracts name: a placeholder ``command`` that
does not exist (:func:`placeholder_upstream`), so that a template not filled in is refused at
start, to replace with the server's command or with ``{"url", "secretRef"}``
(docs/upstream-mcp.md, "Binding a tool to its upstream").

Given the ``previous`` revision of the file, :func:`bindings_template` keeps what a person filled
in for every tool still in the project (``timeoutMs`` lowered to the tool's declared one when it
now exceeds it; not when the tool changed between an endpoint and an upstream, or to another
upstream), every upstream still named, and the file's ``traceKeyRef``; it drops the entries of
tools no longer declared and of servers no longer named, and gives new ones placeholders. It
lives below the CLI so that the Design workstation (``servers/design``) can call it too;
``seif bindings template`` and ``seif release`` use it.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from compiler.builds.build import Build, write_atomic
from policy.ir import Project, Tool
from policy.json.strict import dump_bytes

EXECUTOR_CONTRACT = "context-tool-executor.v1"  # servers.executor.client.CONTRACT, without aiohttp
PLACEHOLDER_ENVIRONMENT = "production"
DEFAULT_MAX_BYTES = 65536  # servers.config.files.DEFAULT_MAX_BYTES
CONTRACTS_FILE = "contracts.json"
BINDING_KEYS = ("endpoint", "upstream", "secretRef", "timeoutMs", "maxBytes", "caFile")
"""Every key of one tool's binding, in the order a template writes them."""


def placeholder_endpoint(tool_id: str) -> str:
    return f"https://executor.example/{tool_id}"


def placeholder_command(server: str) -> str:
    """An absolute path that names no program, so that a placeholder is never started."""
    return f"/replace/with/the/{server}/server/command"


def placeholder_upstream(server: str) -> dict[str, Any]:
    return {"command": [placeholder_command(server)]}


def is_placeholder_upstream(server: str, entry: Any) -> bool:
    return isinstance(entry, Mapping) and entry.get("command") == [placeholder_command(server)]


def servers_of(project: Project) -> list[str]:
    """The upstream servers the project's contracts name, in catalogue order."""
    return list(dict.fromkeys(t.upstream.server for t in project.tools if t.upstream is not None))


def secret_env(tool_id: str) -> str:
    """``CONTEXT_TOOL_<TOOL_ID_UPPER_UNDERSCORED>_TOKEN``: inside the tool secret allowlist."""
    return f"CONTEXT_TOOL_{tool_id.upper().replace('-', '_')}_TOKEN"


def placeholder_binding(tool: Tool) -> dict[str, Any]:
    """A tool's binding to fill in: its upstream for a tool imported from one, else an
    executor's (:func:`executor_binding`)."""
    if tool.upstream is not None:
        server = tool.upstream.server
        return {"upstream": server, "timeoutMs": tool.timeout_ms, "maxBytes": DEFAULT_MAX_BYTES}
    return executor_binding(tool)


def executor_binding(tool: Tool) -> dict[str, Any]:
    return {
        "endpoint": placeholder_endpoint(tool.id),
        "secretRef": f"env:{secret_env(tool.id)}",
        "timeoutMs": tool.timeout_ms,
        "maxBytes": DEFAULT_MAX_BYTES,
    }


def keeps(tool: Tool, entry: Any) -> bool:
    """Whether a previous binding still binds ``tool`` the way its contract wants: an endpoint
    for a tool without a pin, its pinned server's id for one with it."""
    if not isinstance(entry, Mapping):
        return False
    if tool.upstream is None:
        return "upstream" not in entry
    return entry.get("upstream") == tool.upstream.server and "endpoint" not in entry


def kept_binding(tool: Tool, entry: Mapping[str, Any]) -> dict[str, Any]:
    """The binding a person filled in for ``tool``: its keys as written, a ``timeoutMs`` above
    the tool's declared one lowered to it (the runtime refuses a larger one)."""
    kept = {key: entry[key] for key in BINDING_KEYS if key in entry}
    timeout = kept.get("timeoutMs")
    if isinstance(timeout, int) and not isinstance(timeout, bool) and timeout > tool.timeout_ms:
        kept["timeoutMs"] = tool.timeout_ms
    return kept


def bindings_template(
    project: Project,
    environment: str = PLACEHOLDER_ENVIRONMENT,
    revision: int = 1,
    previous: Mapping[str, Any] | None = None,
) -> dict[str, Any]:
    """The bindings document of ``project`` for ``environment`` at ``revision``; ``previous``
    (a bindings document, already checked to be one) gives the entries to keep."""
    before: Mapping[str, Any] = (previous or {}).get("tools") or {}
    document: dict[str, Any] = {"environment": environment, "revision": revision}
    if previous is not None and "traceKeyRef" in previous:
        document["traceKeyRef"] = previous["traceKeyRef"]
    servers = servers_of(project)
    if servers:
        named: Mapping[str, Any] = (previous or {}).get("upstreams") or {}
        document["upstreams"] = {
            server: dict(named[server]) if server in named else placeholder_upstream(server)
            for server in servers
        }
    document["tools"] = {
        tool.id: (
            kept_binding(tool, before[tool.id])
            if keeps(tool, before.get(tool.id))
            else placeholder_binding(tool)
        )
        for tool in project.tools
    }
    return document


def contracts_document(build: Build) -> dict[str, Any]:
    """What every bound executor must answer on ``GET {endpoint}/describe``, per tool."""
    return {
        "build": build.digest,
        "format": build.format,
        "requiresRuntime": build.requires_runtime,
        "project": {"id": build.project.id, "version": build.project.version},
        "executorContract": EXECUTOR_CONTRACT,
        "tools": [
            {
                "id": tool.id,
                "name": tool.name,
                "version": tool.version,
                "contractDigest": tool.contract_digest,
                "effect": tool.effect,
                "approval": tool.approval,
                **_served(tool),
            }
            for tool in build.project.tools
        ],
    }


def _served(tool: Tool) -> dict[str, Any]:
    """What serves ``tool``: its upstream's pin (the listing must match it), or the executor
    whose ``describe`` must answer its contract."""
    if tool.upstream is not None:
        return {"upstream": tool.upstream.to_json()}
    described = {"id": tool.id, "version": tool.version, "contractDigest": tool.contract_digest}
    return {
        "secretEnv": secret_env(tool.id),
        "describe": {"contract": EXECUTOR_CONTRACT, "tool": described},
    }


def json_bytes(document: Any) -> bytes:
    return dump_bytes(document, indent=2) + b"\n"


def write_public(path: Path, data: bytes) -> None:
    """A template and its contracts are meant to be shared: world-readable, written atomically."""
    write_atomic(path, data, mode=0o644)


def write_template(build: Build, out: Path, document: Mapping[str, Any] | None = None) -> Path:
    """Write ``document`` (default: the build's template) to ``out`` and ``contracts.json``
    beside it, each atomically; returns the path of the latter."""
    out.parent.mkdir(parents=True, exist_ok=True)
    template = bindings_template(build.project) if document is None else document
    write_public(out, json_bytes(template))
    contracts = out.parent / CONTRACTS_FILE
    write_public(contracts, json_bytes(contracts_document(build)))
    return contracts
