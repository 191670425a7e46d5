"""A small upstream MCP server on the official SDK's low-level ``Server``, for ``seif tool
import`` tests: ``python upstream_server.py stdio [--note-description TEXT]`` or ``python
upstream_server.py http PORT TOKEN [--note-description TEXT]`` (Streamable HTTP on 127.0.0.1,
answering 401 without ``Authorization: Bearer TOKEN``).

Its listing (:func:`tools`) is sent exactly as written here, two tools a page, so a test can
compute each descriptor digest from the same JSON. Standalone: imports only the SDK.
"""

from __future__ import annotations

import argparse
from typing import Any

VERSION = "0.3.1"
NOTE_DESCRIPTION = "Read one note by its path."


def tools(note_description: str = NOTE_DESCRIPTION) -> list[dict[str, Any]]:
    """The listing, in order: a nullable optional argument and annotations (narrowed and
    dropped), a `pattern` (refused), a name outside the id pattern and no annotations (a write),
    a tool whose result is an open object."""
    return [
        {
            "name": "read_note",
            "description": note_description,
            "inputSchema": {
                "$schema": "https://json-schema.org/draft/2020-12/schema",
                "type": "object",
                "properties": {
                    "path": {"type": "string", "minLength": 1, "description": "The note."},
                    "limit": {
                        "anyOf": [{"type": "integer", "minimum": 1}, {"type": "null"}],
                        "default": None,
                        "title": "Limit",
                    },
                },
                "required": ["path"],
                "additionalProperties": False,
            },
            "annotations": {"readOnlyHint": True},
        },
        {
            "name": "find_notes",
            "description": "Find notes whose path matches a glob.",
            "inputSchema": {
                "type": "object",
                "properties": {"glob": {"type": "string", "pattern": "^[a-z*/]+$"}},
                "required": ["glob"],
            },
            "annotations": {"readOnlyHint": True},
        },
        {
            "name": "Write.Note",
            "description": "Write one note.",
            "inputSchema": {
                "type": "object",
                "properties": {
                    "path": {"type": "string"},
                    "text": {"type": ["string", "null"], "maxLength": 1000},
                },
                "required": ["path"],
            },
        },
        {
            "name": "stat_note",
            "description": "What is known of a note.",
            "inputSchema": {"type": "object", "properties": {"path": {"type": "string"}}},
            "outputSchema": {
                "type": "object",
                "properties": {"size": {"type": "integer", "minimum": 0}},
                "additionalProperties": True,
            },
            "annotations": {"readOnlyHint": False, "title": "Stat"},
        },
    ]


PAGE = 2


def server(note_description: str) -> Any:
    import mcp_types as types
    from mcp.server import Server

    listing = tools(note_description)

    async def list_tools(ctx: Any, params: Any) -> Any:
        start = int(params.cursor) if params is not None and params.cursor else 0
        page = listing[start : start + PAGE]
        after = start + PAGE
        more = str(after) if after < len(listing) else None
        tools_ = [types.Tool.model_validate(t) for t in page]
        return types.ListToolsResult(tools=tools_, next_cursor=more)

    return Server("notes-upstream", version=VERSION, on_list_tools=list_tools)


def run_stdio(note_description: str) -> None:
    serve_stdio(server(note_description))


def serve_stdio(srv: Any) -> None:
    """Serve the low-level server ``srv`` over stdio."""
    import anyio
    from mcp.server.stdio import stdio_server

    async def main() -> None:
        async with stdio_server() as (read, write):
            await srv.run(read, write, srv.create_initialization_options())

    anyio.run(main)


def run_http(port: int, token: str, note_description: str) -> None:
    serve_http(server(note_description), port, token)


def serve_http(srv: Any, port: int, token: str) -> None:
    """Serve ``srv`` over Streamable HTTP on 127.0.0.1:``port``, 401 without the bearer."""
    import uvicorn

    app = srv.streamable_http_app()

    async def guarded(scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] == "http":
            headers = dict(scope.get("headers") or [])
            if headers.get(b"authorization") != f"Bearer {token}".encode():
                await send({"type": "http.response.start", "status": 401, "headers": []})
                await send({"type": "http.response.body", "body": b""})
                return
        await app(scope, receive, send)

    uvicorn.run(guarded, host="127.0.0.1", port=port, log_level="warning", lifespan="on")


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("transport", choices=("stdio", "http"))
    parser.add_argument("rest", nargs="*")
    parser.add_argument("--note-description", default=NOTE_DESCRIPTION)
    args = parser.parse_args()
    if args.transport == "stdio":
        run_stdio(args.note_description)
    else:
        port, token = args.rest
        run_http(int(port), token, args.note_description)


if __name__ == "__main__":
    main()
