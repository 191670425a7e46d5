"""Upstream MCP servers as tool backends (docs/upstream-mcp.md): reaching one through the
official ``mcp`` SDK's client and reading its tool listing exactly as sent (:mod:`.listing`)."""
