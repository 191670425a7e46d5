"""The MCP endpoint's transport security: which ``Origin`` and ``Host`` it answers (DNS rebinding).

A page a browser loaded from a name its author controls can point that name at the runtime's
address (DNS rebinding) and make requests to it; the browser sends them with the page's
``Origin``, and with the name as their ``Host``. The MCP endpoint refuses, before it looks at
the token (403 ``ORIGIN_REFUSED``):

- an ``Origin`` that is not allowed: allowed are the origins given with ``seif serve
  --mcp-allowed-origin`` and, when the runtime listens on a loopback address, the loopback
  origins ``http://localhost``, ``http://127.0.0.1`` and ``http://[::1]`` on any port. A request
  without ``Origin`` (a client that is not a browser) is not refused for it;
- when the runtime listens on a loopback address, a ``Host`` other than ``localhost``,
  ``127.0.0.1`` or ``[::1]`` (any port).

Standard library only: ``seif serve``'s argument parser checks ``--mcp-allowed-origin`` with
:func:`origin` without loading the MCP SDK.
"""

from __future__ import annotations

import ipaddress
import re
from collections.abc import Collection, Sequence
from urllib.parse import urlsplit

LOOPBACK_NAMES = frozenset({"localhost", "127.0.0.1", "[::1]"})
"""The loopback names, as in a ``Host`` header or an origin (an IPv6 address in brackets)."""
DEFAULT_PORTS = {"http": 80, "https": 443}
ORIGIN_MESSAGE = "this Origin may not call the MCP endpoint (see `seif serve --mcp-allowed-origin`)"
HOST_MESSAGE = "a runtime listening on loopback answers MCP only at localhost, 127.0.0.1 or [::1]"
_SCHEME = re.compile(r"[a-z][a-z0-9+.-]*")
_HOST = re.compile(r"(\[[0-9a-f:.]+\]|[^:@\[\]/]+)(?::[0-9]{1,5})?")


def is_loopback(host: str) -> bool:
    """Whether a listening address (``seif serve --host``) is a loopback one: ``localhost`` or
    a loopback IP address (``0.0.0.0`` and ``::`` are every address, not loopback ones)."""
    if host.lower() == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.removeprefix("[").removesuffix("]")).is_loopback
    except ValueError:
        return False


def origin(text: str) -> str:
    """``text`` as an origin in one form (``scheme://host[:port]``, lowercase, without the
    scheme's default port); ValueError if it is no origin (a path, query, fragment or user
    is not part of one, nor is ``null``)."""
    try:
        parts = urlsplit(text)
        port = parts.port
    except ValueError:
        raise ValueError("not an origin: a bad host or port") from None
    scheme, host = parts.scheme.lower(), parts.hostname
    if not _SCHEME.fullmatch(scheme) or not host or parts.username is not None:
        raise ValueError("not an origin (scheme://host[:port])")
    if parts.path or parts.query or parts.fragment or "#" in text or "?" in text:
        raise ValueError("not an origin: it has a path, query or fragment")
    host = f"[{host}]" if ":" in host else host
    shown = "" if port is None or DEFAULT_PORTS.get(scheme) == port else f":{port}"
    return f"{scheme}://{host}{shown}"


def refusal(
    origins: Sequence[str], hosts: Sequence[str], allowed: Collection[str], loopback: bool
) -> str | None:
    """Why a request whose ``Origin`` and ``Host`` headers are ``origins`` and ``hosts`` is
    refused (the message of its ``ORIGIN_REFUSED``), or None. ``allowed``: the origins given
    (each in :func:`origin`'s form); ``loopback``: whether the runtime listens on a loopback
    address. A header sent twice is refused."""
    if origins and not (len(origins) == 1 and _allowed(origins[0], allowed, loopback)):
        return ORIGIN_MESSAGE
    if loopback and (len(hosts) != 1 or _host_name(hosts[0]) not in LOOPBACK_NAMES):
        return HOST_MESSAGE
    return None


def _allowed(sent: str, allowed: Collection[str], loopback: bool) -> bool:
    try:
        canonical = origin(sent)
    except ValueError:
        return False
    if canonical in allowed:
        return True
    scheme, _, authority = canonical.partition("://")
    return loopback and scheme == "http" and _host_name(authority) in LOOPBACK_NAMES


def _host_name(authority: str) -> str | None:
    """The name of a ``host[:port]`` (lowercase), None if it is not one."""
    found = _HOST.fullmatch(authority.strip().lower())
    return found.group(1) if found else None
