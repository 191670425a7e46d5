"""An upstream MCP server over stdio written without the SDK: JSON-RPC lines exactly as below,
so a test can see that a descriptor digest covers members the SDK's models would drop (an
unknown annotation, a vendor member of the tool). ``python raw_upstream.py``."""

from __future__ import annotations

import json
import sys
from typing import Any

TOOL: dict[str, Any] = {
    "name": "lookup",
    "description": "Look a word up.",
    "inputSchema": {"type": "object", "properties": {"word": {"type": "string"}}},
    "annotations": {"readOnlyHint": True, "vendorHint": "only on the wire"},
    "x-vendor": [1],
}


def answer(message: dict[str, Any]) -> dict[str, Any]:
    method = message.get("method")
    if method == "initialize":
        info = {"name": "raw-upstream", "version": "not-semver"}
        version = message["params"]["protocolVersion"]
        result = {"protocolVersion": version, "capabilities": {"tools": {}}, "serverInfo": info}
    elif method == "tools/list":
        result = {"tools": [TOOL]}
    else:
        error = {"code": -32601, "message": f"no method {method}"}
        return {"jsonrpc": "2.0", "id": message["id"], "error": error}
    return {"jsonrpc": "2.0", "id": message["id"], "result": result}


def main() -> None:
    for line in sys.stdin:
        message = json.loads(line)
        if "id" in message and "method" in message:
            sys.stdout.write(json.dumps(answer(message)) + "\n")
            sys.stdout.flush()


if __name__ == "__main__":
    main()
