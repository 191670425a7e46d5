"""This runtime as an OAuth 2.0 protected resource: its resource URLs (RFC 8707) and the metadata
that lets a client discover which authorization servers issue tokens for them (RFC 9728).

- The runtime as a whole is the resource its issuers' ``audience`` names; the MCP endpoint of an
  objective is the resource ``audience`` joined with ``mcp/{objective}`` (:func:`resource_url`),
  which is what an MCP client asks its provider for, and a token for it is accepted there.
- :func:`describe`: the metadata of one of them, from the issuers. A resource has one identifier:
  the first issuer's ``audience`` gives it, and ``authorization_servers`` lists every issuer with
  that same ``audience`` (an issuer with another one is not advertised: its tokens still work,
  for the clients configured to ask for its audience); an objective's endpoint leaves out the
  issuers whose ``objectives`` do not hold it.
- :func:`metadata_url`: where that metadata is published (RFC 9728 section 3.1, the well-known
  path inserted between the host and the path), which a 401 names in ``resource_metadata``.
"""

from __future__ import annotations

import re
from collections.abc import Collection, Sequence
from dataclasses import dataclass
from urllib.parse import urlsplit, urlunsplit

from servers.config.issuers import Issuer

__all__ = ["WELL_KNOWN", "ProtectedResource", "describe", "metadata_url", "resource_url"]

WELL_KNOWN = "/.well-known/oauth-protected-resource"
"""RFC 9728's well-known path."""
BEARER_METHODS = ("header",)
"""How a token may be presented: the ``Authorization`` header only (never a query or body)."""
_UNSAFE = re.compile(r'[^\x21-\x7e]|["\\]')
"""What a URL quoted in a ``WWW-Authenticate`` parameter may not hold."""
MCP_PREFIX = "mcp/"
"""The path of an objective's MCP endpoint, before the objective."""


def resource_url(audience: str, path: str) -> str:
    """``audience`` joined with ``path`` (``mcp/learner``; empty: ``audience`` itself), one
    ``/`` between them whether or not ``audience`` ends with one."""
    return audience.rstrip("/") + "/" + path if path else audience


def metadata_url(resource: str) -> str | None:
    """Where the metadata of ``resource`` is published: its origin, the well-known path, then
    its path (a lone ``/`` dropped); None when ``resource`` is no ``http(s)`` URL (an audience
    such as ``api://seif``, which an MCP client cannot discover) or when it holds anything but
    printable ASCII, or a quote or a backslash (it is quoted in a header)."""
    if _UNSAFE.search(resource):
        return None
    try:
        parts = urlsplit(resource)
    except ValueError:
        return None
    if parts.scheme not in ("http", "https") or not parts.netloc or parts.fragment:
        return None
    path = "" if parts.path == "/" else parts.path
    return urlunsplit((parts.scheme, parts.netloc, WELL_KNOWN + path, parts.query, ""))


@dataclass(frozen=True, slots=True)
class ProtectedResource:
    """The RFC 9728 metadata of one resource of this runtime."""

    resource: str
    authorization_servers: tuple[str, ...]
    scopes_supported: tuple[str, ...]
    """Token-side scope values (what a client asks its provider for), never seif's."""

    @property
    def metadata_url(self) -> str | None:
        return metadata_url(self.resource)

    def to_json(self) -> dict[str, object]:
        return {
            "resource": self.resource,
            "authorization_servers": list(self.authorization_servers),
            "scopes_supported": list(self.scopes_supported),
            "bearer_methods_supported": list(BEARER_METHODS),
        }


def describe(
    issuers: Sequence[Issuer], path: str = "", scopes: Collection[str] | None = None
) -> ProtectedResource | None:
    """The metadata of the resource at ``path`` (empty: the runtime as a whole), None without
    issuers. At the MCP endpoint of an objective (``mcp/{objective}``), an issuer whose
    ``objectives`` leave it out is not advertised (its tokens would be refused there, 403
    ``OBJECTIVE_FORBIDDEN``); with none left, there is no metadata. ``scopes``: the seif
    scopes the resource needs; ``scopes_supported`` then lists the token scope values the
    advertised issuers map to them (None: every mapped value)."""
    objective = path.removeprefix(MCP_PREFIX) if path.startswith(MCP_PREFIX) else None
    if objective is not None:  # an issuer narrowed to other objectives has no token for it
        issuers = [i for i in issuers if i.objectives is None or objective in i.objectives]
    if not issuers:
        return None
    audience = issuers[0].audience
    advertised = [i for i in issuers if i.audience == audience]
    values = (
        value
        for issuer in advertised
        for value, scope in issuer.scopes.items()
        if scopes is None or scope in scopes
    )
    return ProtectedResource(
        resource=resource_url(audience, path),
        authorization_servers=tuple(dict.fromkeys(i.issuer for i in advertised)),
        scopes_supported=tuple(dict.fromkeys(values)),
    )
