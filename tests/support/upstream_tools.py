"""An upstream MCP server with tools that misbehave on request, on the official SDK's low-level
``Server``, for the runtime's upstream tests: ``python upstream_tools.py stdio STATE_DIR`` or
``python upstream_tools.py http PORT TOKEN STATE_DIR`` (Streamable HTTP on 127.0.0.1, 401
without ``Authorization: Bearer TOKEN``).

``STATE_DIR`` is how a test sees and steers it: every call is appended to ``calls.jsonl``
(``{"name", "arguments", "meta"}``) before it runs, ``pids`` gets a line (its process id) at
each start, and a tool's description is the text of ``NAME-description`` when that file exists
(read at every ``tools/list``). Standalone: imports only the SDK, the standard library and
``upstream_server.py`` beside it.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path
from typing import Any

ECHO_DESCRIPTION = "Echo a text back."
REFLECTED_VARIABLE = "UPSTREAM_TOKEN"
"""The variable whose value the ``reflect`` tool returns (a bound secret, in the tests)."""
ERROR_CODE = -32042


def _text_input() -> dict[str, Any]:
    return {
        "type": "object",
        "properties": {"text": {"type": "string"}},
        "required": ["text"],
        "additionalProperties": False,
    }


def tools(state: Path) -> list[dict[str, Any]]:
    """The listing, exactly as sent."""
    plain = {"inputSchema": _text_input()}
    listing = [
        {
            "name": "echo",
            "description": ECHO_DESCRIPTION,
            "inputSchema": _text_input(),
            "outputSchema": {
                "type": "object",
                "properties": {"text": {"type": "string"}},
                "required": ["text"],
                "additionalProperties": False,
            },
            "annotations": {"readOnlyHint": True},
        },
        {"name": "note", "description": "Write a note.", **plain},
        {"name": "fail", "description": "Answer isError.", **plain},
        {"name": "refuse", "description": "Answer a JSON-RPC error.", **plain},
        {"name": "reflect", "description": "Return its secret.", **plain},
        {"name": "env", "description": "Name its environment.", **plain},
        {"name": "stall", "description": "Never answer.", **plain},
        {"name": "die", "description": "Exit mid-call.", **plain},
        {"name": "shout", "description": "Write the text on stderr.", **plain},
        {"name": "big", "description": "Return a long text.", **plain},
        {"name": "announce", "description": "Change echo's description.", **plain},
    ]
    for tool in listing:  # a description changed after the pin
        described = state / f"{tool['name']}-description"
        if described.exists():
            tool["description"] = described.read_text(encoding="utf-8")
    return listing


def server(state: Path, token: str | None) -> Any:
    import anyio
    import mcp_types as types
    from mcp.server import Server
    from mcp.shared.exceptions import MCPError

    async def list_tools(ctx: Any, params: Any) -> Any:
        return types.ListToolsResult(tools=[types.Tool.model_validate(t) for t in tools(state)])

    def answer(text: str, structured: Any = None, error: bool = False) -> Any:
        content = [types.TextContent(type="text", text=text)]
        return types.CallToolResult(content=content, structured_content=structured, is_error=error)

    async def refuse(ctx: Any, text: str) -> Any:
        raise MCPError(ERROR_CODE, "refused: " + text)

    async def stall(ctx: Any, text: str) -> Any:
        await anyio.sleep(3600)

    async def die(ctx: Any, text: str) -> Any:
        os._exit(3)

    async def shout(ctx: Any, text: str) -> Any:
        print("shouted " + text, file=sys.stderr, flush=True)
        return answer("shouted")

    async def announce(ctx: Any, text: str) -> Any:
        (state / "echo-description").write_text(text, encoding="utf-8")
        await ctx.session.send_tool_list_changed()
        return answer("announced")

    async def env(ctx: Any, text: str) -> Any:
        # the names only: a value of the binding's `env` is a secret (it would be reflected)
        return answer(json.dumps({"names": sorted(os.environ), "LANG": os.environ.get("LANG")}))

    async def reflect(ctx: Any, text: str) -> Any:
        return answer("token " + (token or os.environ.get(REFLECTED_VARIABLE, "")))

    handlers = {
        "echo": lambda ctx, text: _now(answer(text, {"text": text})),
        "note": lambda ctx, text: _now(answer("noted")),
        "fail": lambda ctx, text: _now(answer("disk full: " + text * 1000, error=True)),
        "big": lambda ctx, text: _now(answer("x" * int(text))),
        "refuse": refuse, "stall": stall, "die": die, "shout": shout, "announce": announce,
        "env": env, "reflect": reflect,
    }  # fmt: skip

    async def call_tool(ctx: Any, params: Any) -> Any:
        arguments = params.arguments or {}
        record = {"name": params.name, "arguments": arguments, "meta": dict(params.meta or {})}
        with open(state / "calls.jsonl", "a", encoding="utf-8") as calls:
            calls.write(json.dumps(record) + "\n")
        return await handlers[params.name](ctx, str(arguments.get("text", "")))

    return Server("upstream-tools", on_list_tools=list_tools, on_call_tool=call_tool)


async def _now(value: Any) -> Any:
    return value


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("transport", choices=("stdio", "http"))
    parser.add_argument("rest", nargs="+")
    args = parser.parse_args()
    state = Path(args.rest[-1])
    with open(state / "pids", "a", encoding="utf-8") as pids:  # one line per start
        pids.write(f"{os.getpid()} {time.time()}\n")
    # run as a script: its directory is on sys.path, and upstream_server.py is there
    from upstream_server import serve_http, serve_stdio  # type: ignore[import-not-found]  # script

    if args.transport == "stdio":
        serve_stdio(server(state, None))
    else:
        port, token, _ = args.rest
        serve_http(server(state, token), int(port), token)


if __name__ == "__main__":
    main()
