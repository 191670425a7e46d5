"""Upstream MCP servers as tool backends (docs/upstream-mcp.md): reaching one through the
official ``mcp`` SDK's client and reading its tool listing exactly as sent (:mod:`.listing`),
one supervised connection per upstream (:mod:`.connection`), and the executor of a tool bound
to one (:mod:`.executor`). :func:`open_executors` opens every bound tool's executor, of either
kind, once, at start."""

from __future__ import annotations

import asyncio
from functools import partial
from pathlib import Path

from policy.ir import Project
from servers.config.files import Bindings
from servers.config.upstreams import UpstreamBinding
from servers.executor import open_http_executors
from servers.executor.interface import Executors
from servers.upstream.connection import UpstreamConnection
from servers.upstream.executor import UpstreamExecutor


def open_executors(
    bindings: Bindings,
    project: Project,
    *,
    stderr_dir: Path | None = None,
) -> Executors:
    """One executor per bound tool, as its binding says: a ``context-tool-executor.v1``
    endpoint (sharing one keep-alive transport) or a tool of an upstream MCP server (one
    connection per upstream, shared by its tools, started here: call it in the running loop).
    Its watchers (:meth:`Executors.watch`) are told an upstream's tools whenever its listing
    changes, or it goes up or down. Closing the executors closes the connections (a stdio
    upstream's process stopped).
    A tool whose contract is not pinned to its binding's upstream is left unbound (the
    bindings loader refuses such bindings)."""
    by_tool, close_http = open_http_executors(bindings)
    connections: dict[str, UpstreamConnection] = {}
    served: dict[str, set[str]] = {}
    for tool_id, binding in bindings.tools.items():
        if not isinstance(binding, UpstreamBinding):
            continue
        tool = project.tool_by_id.get(tool_id)
        upstream = bindings.upstreams.get(binding.upstream)
        pin = None if tool is None else tool.upstream
        if tool is None or upstream is None or pin is None or pin.server != upstream.server:
            continue
        connection = connections.get(upstream.server)
        if connection is None:
            connection = UpstreamConnection(upstream, stderr_dir=stderr_dir)
            connections[upstream.server] = connection
        by_tool[tool_id] = UpstreamExecutor(binding, tool, connection)
        served.setdefault(upstream.server, set()).add(tool_id)

    async def close() -> None:
        await asyncio.gather(*(c.aclose() for c in connections.values()))
        await close_http()

    executors = Executors(by_tool, close)
    for server, connection in connections.items():
        connection.watch(partial(_tell, executors, frozenset(served[server])))
        connection.start()
    return executors


def _tell(executors: Executors, tool_ids: frozenset[str], _server: str) -> None:
    executors.changed(tool_ids)
