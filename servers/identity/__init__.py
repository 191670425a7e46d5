"""Who sent a request: its bearer token, a static credential's or an issuer's access token.

:class:`Identities` holds the credentials file's static credentials and its issuers (each with
its keys, :mod:`servers.identity.keys`). ``authenticate(token)``:

1. no token: None;
2. a token over :data:`~servers.identity.tokens.MAX_TOKEN_BYTES`: refused
   (:class:`~servers.identity.tokens.TokenRefused`);
3. a static credential's token (compared in constant time with every one): its
   :class:`~servers.identity.principal.Authenticated`;
4. with issuers, a JWT: validated against the issuer its ``iss`` names
   (:mod:`servers.identity.tokens`), else refused;
5. anything else: None.

``authenticate(token, resource="mcp/learner")`` also accepts, for each issuer, a token whose
``aud`` is that resource's URL under the issuer's ``audience`` (the MCP endpoint of an
objective, :mod:`servers.identity.resource`); ``protected(path)`` is that resource's metadata.

A refusal is logged with the check that failed and the issuer's id, never the token. The HTTP
layer answers None with 401 ``UNAUTHENTICATED`` and a refusal with 401 ``TOKEN_INVALID``.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable, Collection

from servers.config.files import Credentials
from servers.config.issuers import Issuer
from servers.identity.keys import IssuerKeys
from servers.identity.principal import Authenticated, ClaimValue, Principal
from servers.identity.resource import ProtectedResource, describe, resource_url
from servers.identity.tokens import MAX_TOKEN_BYTES, TokenRefused, unverified, validate

__all__ = [
    "MAX_TOKEN_BYTES",
    "Authenticated",
    "ClaimValue",
    "Identities",
    "Principal",
    "ProtectedResource",
    "TokenRefused",
]

LOG = logging.getLogger("seif.identity")


class Identities:
    """The static credentials and the issuers of one credentials file."""

    __slots__ = ("_by_iss", "_clock", "_credentials", "issuers", "keys")

    def __init__(
        self,
        credentials: Credentials,
        clock: Callable[[], int],
        *,
        monotonic: Callable[[], float] = time.monotonic,
    ) -> None:
        """``clock``: milliseconds since the epoch (the runtime's clock: ``exp``, ``nbf``,
        ``iat`` are compared with it); ``monotonic``: seconds, for the key sets' ages."""
        self._credentials = credentials
        self._clock = clock
        self.issuers: tuple[Issuer, ...] = tuple(credentials.issuers)
        """The issuers, in the file's order."""
        self._by_iss: dict[str, Issuer] = {i.issuer: i for i in credentials.issuers}
        self.keys: dict[str, IssuerKeys] = {
            i.id: IssuerKeys(i, monotonic=monotonic) for i in credentials.issuers
        }
        """Each issuer's keys, by issuer id."""

    async def start(self) -> None:
        """Fetch every issuer's key set once, together; each fetch is bounded and a failure
        only logged (a token then refetches): start-up never waits longer than one fetch."""
        await asyncio.gather(*(keys.load() for keys in self.keys.values()))

    async def aclose(self) -> None:
        await asyncio.gather(*(keys.aclose() for keys in self.keys.values()))

    def protected(
        self, path: str = "", scopes: Collection[str] | None = None
    ) -> ProtectedResource | None:
        """The RFC 9728 metadata of the resource at ``path`` (``mcp/{objective}``; empty: the
        runtime as a whole), None without issuers (:func:`servers.identity.resource.describe`)."""
        return describe(self.issuers, path, scopes)

    async def authenticate(
        self, token: str | None, audiences: Collection[str] = (), *, resource: str | None = None
    ) -> Authenticated | None:
        """Who ``token`` is: None for no token or an unknown one; raises
        :class:`TokenRefused` for a JWT of an issuer that fails a check (logged).
        ``audiences``: accepted besides each issuer's ``audience``; ``resource``: a path
        (``mcp/learner``) whose URL under the token's issuer's ``audience`` is accepted too."""
        if not token:
            return None
        try:
            return await self._authenticate(token, audiences, resource)
        except TokenRefused as refused:
            where = f"issuer `{refused.issuer}`" if refused.issuer else "no issuer"
            LOG.info("bearer token refused (%s): %s", where, refused.reason)
            raise

    async def _authenticate(
        self, token: str, audiences: Collection[str], resource: str | None
    ) -> Authenticated | None:
        if (
            len(token) > MAX_TOKEN_BYTES
            or len(token.encode("utf-8", "surrogatepass")) > MAX_TOKEN_BYTES
        ):
            raise TokenRefused(f"it is longer than {MAX_TOKEN_BYTES} bytes")
        credential = self._credentials.authenticate(token)
        if credential is not None:
            return Authenticated.static(credential.id, credential.scopes, credential.objectives)
        if not self._by_iss:
            return None
        found = unverified(token)
        if found is None:
            return None
        iss = found.claims.get("iss")
        issuer = self._by_iss.get(iss) if isinstance(iss, str) else None
        if issuer is None:
            raise TokenRefused("its `iss` is not a configured issuer")
        if resource:
            audiences = (*audiences, resource_url(issuer.audience, resource))
        now_s = self._clock() // 1000
        return await validate(found, issuer, self.keys[issuer.id].candidates, now_s, audiences)
