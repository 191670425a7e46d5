"""The reference MCP servers nobody here wrote, pinned in ``tests/node/package.json`` and
installed by ``make test`` (``npm ci``): ``@modelcontextprotocol/server-filesystem`` (stdio, on a
directory the test gives) and ``@modelcontextprotocol/server-everything`` (Streamable HTTP on a
free loopback port). Without them a test skips, saying how to install them; with ``CI`` set, it
fails instead (:func:`tests.support.node_support.missing`)."""

from __future__ import annotations

import contextlib
import os
import select
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

from tests.support.guide_examples import free_port
from tests.support.node_support import MODULES, check_installed, node

SCOPE = MODULES / "@modelcontextprotocol"
LISTENING = "MCP Streamable HTTP Server listening on port"


def filesystem_command(root: Path) -> list[str]:
    """The command that starts the filesystem server over stdio, allowed only ``root``."""
    check_installed()
    return [node(), str(SCOPE / "server-filesystem" / "dist" / "index.js"), str(root)]


@contextlib.contextmanager
def everything_over_http() -> Iterator[str]:
    """The everything server over Streamable HTTP; its MCP URL, once it listens."""
    check_installed()
    port = free_port()
    script = SCOPE / "server-everything" / "dist" / "index.js"
    env = {"PATH": os.environ.get("PATH", ""), "PORT": str(port)}
    proc = subprocess.Popen(  # it prints where it listens on stderr
        [node(), str(script), "streamableHttp"], env=env, stderr=subprocess.PIPE, text=True
    )
    try:
        assert proc.stderr is not None
        deadline, seen = time.monotonic() + 30, ""
        while LISTENING not in seen:
            left = deadline - time.monotonic()
            assert left > 0 and proc.poll() is None, f"the everything server did not start: {seen}"
            if select.select([proc.stderr], [], [], left)[0]:
                seen += proc.stderr.readline()
        yield f"http://127.0.0.1:{port}/mcp"
    finally:
        proc.terminate()
        proc.wait(timeout=10)
