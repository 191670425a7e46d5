"""``python -m bench.upstream_server [--port P] --token-env VAR``: the upstream MCP server of
``python -m bench upstream``, on the official ``mcp`` SDK as its users write one.

One read tool, ``lookup`` (``readOnlyHint``, a parameter and an output schema), answered with
``structuredContent`` and the same JSON as text, over Streamable HTTP at ``/mcp`` on 127.0.0.1
with the SDK's defaults (sessions, answers as event streams, its DNS rebinding protection);
every request but ``GET /_stats`` needs ``Authorization: Bearer`` the token in ``VAR``.
``GET /_stats`` answers ``{"calls": N}``, the ``tools/call`` requests it has answered, so the
benchmark can check that each call through seif reached it exactly once. Prints ``... listening
on http://127.0.0.1:PORT`` once its socket accepts.
"""

from __future__ import annotations

import argparse
import hmac
import json
import os
import socket
import sys
from typing import Any

TOOL_NAME = "lookup"
PATH = "/mcp"


def listing() -> list[dict[str, Any]]:
    """The server's one tool, as it lists it."""
    return [
        {
            "name": TOOL_NAME,
            "description": "Look up a document's title by its reference.",
            "inputSchema": {
                "type": "object",
                "properties": {"ref": {"type": "string", "minLength": 1, "maxLength": 200}},
                "required": ["ref"],
                "additionalProperties": False,
            },
            "outputSchema": {
                "type": "object",
                "properties": {"ref": {"type": "string"}, "title": {"type": "string"}},
                "required": ["ref", "title"],
                "additionalProperties": False,
            },
            "annotations": {"readOnlyHint": True},
        }
    ]


def app(token: str) -> Any:
    """The ASGI application: the SDK's Streamable HTTP app behind a bearer check."""
    import mcp_types as types
    from mcp.server import Server
    from starlette.requests import Request
    from starlette.responses import JSONResponse
    from starlette.routing import Route

    tools = [types.Tool.model_validate(t) for t in listing()]
    counted = {"calls": 0}

    async def list_tools(_ctx: Any, _params: Any) -> Any:
        return types.ListToolsResult(tools=tools)

    async def call_tool(_ctx: Any, params: Any) -> Any:
        counted["calls"] += 1
        ref = str((params.arguments or {}).get("ref", ""))
        found = {"ref": ref, "title": f"The document {ref}"}
        text = types.TextContent(type="text", text=json.dumps(found))
        return types.CallToolResult(content=[text], structured_content=found)

    async def stats(_request: Request) -> JSONResponse:
        return JSONResponse(counted)

    server = Server(
        "bench-upstream", version="1.0.0", on_list_tools=list_tools, on_call_tool=call_tool
    )
    inner = server.streamable_http_app(custom_starlette_routes=[Route("/_stats", stats)])
    expected = f"Bearer {token}".encode()

    async def guarded(scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] == "http" and scope["path"] != "/_stats":
            sent = dict(scope.get("headers") or []).get(b"authorization", b"")
            if not hmac.compare_digest(sent, expected):
                await send({"type": "http.response.start", "status": 401, "headers": []})
                await send({"type": "http.response.body", "body": b""})
                return
        await inner(scope, receive, send)

    return guarded


def main(argv: list[str]) -> int:
    import uvicorn

    parser = argparse.ArgumentParser(prog="python -m bench.upstream_server")
    parser.add_argument("--port", type=int, default=0)
    parser.add_argument("--token-env", required=True, metavar="VAR")
    args = parser.parse_args(argv)
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind(("127.0.0.1", args.port))
    sock.listen(2048)
    port = sock.getsockname()[1]
    config = uvicorn.Config(
        app(os.environ[args.token_env]), log_level="warning", lifespan="on", access_log=False
    )
    print(f"upstream MCP server listening on http://127.0.0.1:{port}", flush=True)
    uvicorn.Server(config).run(sockets=[sock])
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
