"""The executor side: what the runtime needs of a tool's backend (:mod:`.interface`), the
``context-tool-executor.v1`` client and its HTTP/1.1 transport, and shared availability
observations. :func:`open_http_executors` opens the executors of the tools bound to endpoints
(``servers.upstream.open_executors`` adds those bound to upstream MCP servers)."""

from __future__ import annotations

from collections.abc import Awaitable, Callable

from servers.config.files import Binding, Bindings
from servers.executor.client import ExecutorClient, HttpExecutor, new_transport
from servers.executor.interface import Executor


def open_http_executors(
    bindings: Bindings,
) -> tuple[dict[str, Executor], Callable[[], Awaitable[None]]]:
    """One executor per tool bound to a ``context-tool-executor.v1`` endpoint, sharing one
    keep-alive transport, and what closes it."""
    transport = new_transport()
    client = ExecutorClient(transport)
    by_tool: dict[str, Executor] = {
        tool_id: HttpExecutor(binding, client)
        for tool_id, binding in bindings.tools.items()
        if isinstance(binding, Binding)
    }
    return by_tool, transport.close
