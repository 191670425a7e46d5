"""Upstream MCP servers as the bindings file names them (``upstreams``), and the bindings of
tools to them (``../shared/spec/upstream-mcp.md``, "Binding a tool to an upstream").

These are the values the bindings loader produces and the upstream executors
(``servers.upstream``) consume: secrets are already read through their references (never shown
in a repr), commands already resolved to an absolute path, and every check of the spec done.
"""

from __future__ import annotations

import ssl
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from types import MappingProxyType

__all__ = ["HttpUpstream", "StdioUpstream", "Upstream", "UpstreamBinding"]


@dataclass(frozen=True, slots=True)
class StdioUpstream:
    """An upstream started as a process (one per upstream, shared by its tools), never through
    a shell."""

    server: str
    """The upstream's id in ``upstreams`` (and in its tools' contracts' ``upstream.server``)."""
    command: tuple[str, ...]
    """The program, resolved to an absolute path at start, then its arguments."""
    env: Mapping[str, str] = field(default_factory=lambda: MappingProxyType({}), repr=False)
    """The variables its ``env`` names, each with the secret its reference gave: the process
    gets only these, ``LANG``, ``TMPDIR`` and the official SDK stdio client's defaults."""
    cwd: Path | None = None


@dataclass(frozen=True, slots=True)
class HttpUpstream:
    """An upstream reached over Streamable HTTP (``https://`` unless loopback; redirects are
    never followed)."""

    server: str
    url: str
    secret: str | None = field(default=None, repr=False)
    """The bearer token its ``secretRef`` gave, if any."""
    ca_file: Path | None = None
    tls: ssl.SSLContext | None = field(default=None, repr=False, compare=False)
    """The trust its ``caFile`` gives (None: the system's), as for executor endpoints."""


Upstream = StdioUpstream | HttpUpstream


@dataclass(frozen=True, slots=True)
class UpstreamBinding:
    """A tool bound to an upstream (its binding names ``upstream``, never ``endpoint``); its
    contract carries ``upstream`` with the same server id."""

    tool: str
    upstream: str
    """The id of the upstream in ``Bindings.upstreams``."""
    timeout_ms: int
    max_bytes: int
