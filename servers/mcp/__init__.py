"""MCP server mode (``seif serve --mcp``): Streamable HTTP at ``/mcp/{objective}``, through the
runtime's one engine, store, approvals, decision log and executor client."""
