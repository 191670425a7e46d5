"""seif's own MCP server mode in front of upstream MCP servers (docs/upstream-mcp.md,
"Runtime"): tools of two upstreams listed under one objective, and a session told
``notifications/tools/list_changed`` when an upstream's change changes what it may see."""

from __future__ import annotations

import asyncio
import os
import signal
from pathlib import Path

from servers.http.app import create_app
from servers.mcp.app import McpOptions, mount
from tests.support import upstream_runtime as ur
from tests.support.mcp_support import Notified, mcp_client
from tests.support.runtime_harness import serving

LIST_CHANGED = "notifications/tools/list_changed"


def test_a_session_is_told_when_an_upstream_goes_down(tmp_path: Path) -> None:
    states, prepared = ur.two_upstreams(tmp_path)

    async def main() -> None:
        app = create_app(prepared)
        mount(app, McpOptions(approval_wait_s=1))
        async with serving(app) as url:
            for _ in range(100):  # both upstreams started
                if all(len(ur.pids(s)) == 1 for s in states.values()):
                    break
                await asyncio.sleep(0.1)
            await asyncio.sleep(1.0)
            told = Notified()
            async with mcp_client(
                url, "ops", mode="legacy", message_handler=told, consumer="c"
            ) as client:
                listed = {t.name for t in (await client.list_tools()).tools}
                assert {"up_echo", "up_fail", "two_echo"} <= listed, "two servers, one objective"
                assert told.count(LIST_CHANGED) == 0
                os.kill(ur.pids(states["two"])[-1], signal.SIGKILL)
                assert await told.arrived(LIST_CHANGED, timeout=5), "the session was not told"
                again = {t.name for t in (await client.list_tools()).tools}
                assert "up_echo" in again

    try:
        asyncio.run(main())
    finally:
        prepared.close()
