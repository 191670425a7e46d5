"""The executor side: what the runtime needs of a tool's backend (:mod:`.interface`), the
``context-tool-executor.v1`` client and its HTTP/1.1 transport, and shared availability
observations. :func:`open_executors` chooses each bound tool's executor, once, at start."""

from __future__ import annotations

from servers.config.files import Binding, Bindings
from servers.executor.client import ExecutorClient, HttpExecutor, new_transport
from servers.executor.interface import Executor, Executors


def open_executors(bindings: Bindings) -> Executors:
    """One executor per bound tool, as its binding says (today every binding names a
    ``context-tool-executor.v1`` endpoint), sharing one keep-alive transport."""
    transport = new_transport()
    client = ExecutorClient(transport)
    by_tool: dict[str, Executor] = {
        tool_id: HttpExecutor(binding, client)
        for tool_id, binding in bindings.tools.items()
        if isinstance(binding, Binding)  # upstream-bound tools: servers.upstream (issue 31)
    }
    return Executors(by_tool, transport.close)
