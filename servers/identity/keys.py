"""An issuer's signing keys: its ``jwksFile``'s, or its ``jwksUri``'s fetched and cached.

- A fetch is one ``GET`` (aiohttp; ``https://`` with the system trust store, or loopback
  ``http://``), bounded to :data:`FETCH_TIMEOUT_S` in all and :data:`MAX_JWKS_BYTES`, never
  redirected. One fetch runs at a time; whoever needs keys meanwhile waits for that one.
- A fetch that fails, hangs, or answers what is not a key set with a usable key leaves the
  cached keys in force, and is logged (the issuer's id and why, never a URL or a token).
- A token whose key is not in the cache (an unknown ``kid``) refetches, at most once every
  :data:`REFETCH_INTERVAL_S` (a request that finds a fetch under way joins it instead); keys
  older than :data:`MAX_AGE_S` are refetched in the background while they stay in force, so a
  key removed from the set stops verifying, and after a failed attempt not again within
  :data:`REFETCH_INTERVAL_S`.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import ssl
import time
from collections.abc import Callable
from http import HTTPStatus

import aiohttp

from policy.json.strict import JsonError, loads
from servers.config.issuers import Issuer
from servers.config.jwks import MAX_JWKS_BYTES, PublicKey, fits, public_keys
from servers.config.tls import client_context

__all__ = ["FETCH_TIMEOUT_S", "MAX_AGE_S", "REFETCH_INTERVAL_S", "IssuerKeys"]

LOG = logging.getLogger("seif.identity")
FETCH_TIMEOUT_S = 5.0
"""The longest one fetch of a key set may take, connecting included."""
REFETCH_INTERVAL_S = 60.0
"""An unknown ``kid`` refetches at most once in this time."""
MAX_AGE_S = 600.0
"""Keys fetched longer ago than this are refetched in the background on their next use."""


class _FetchFailed(Exception):
    """Why a fetch gave no key set (a message naming no URL and no content)."""


class IssuerKeys:
    """The keys one issuer's tokens are verified with."""

    __slots__ = (
        "_attempted_at",
        "_fetched_at",
        "_inflight",
        "_issuer",
        "_keys",
        "_monotonic",
        "_refetched_at",
        "_tls",
        "fetches",
    )

    def __init__(self, issuer: Issuer, *, monotonic: Callable[[], float] = time.monotonic) -> None:
        self._issuer = issuer
        self._keys: tuple[PublicKey, ...] = issuer.file_keys
        self._monotonic = monotonic
        self._fetched_at: float | None = None
        self._attempted_at: float | None = None
        """When the last fetch began, whatever its end."""
        self._refetched_at: float | None = None
        self._inflight: asyncio.Future[None] | None = None
        self._tls: ssl.SSLContext | None = None
        self.fetches = 0
        """Fetches begun (what the tests count)."""

    @property
    def keys(self) -> tuple[PublicKey, ...]:
        return self._keys

    @property
    def fetching(self) -> bool:
        """Whether a fetch is under way."""
        return self._running()

    async def load(self) -> None:
        """The first fetch (at start): bounded, and a failure only logged."""
        if self._issuer.jwks_uri is not None:
            await self._refresh()

    async def candidates(self, kid: str | None, alg: str) -> tuple[PublicKey, ...]:
        """The cached keys that may verify a token signed with ``alg`` under ``kid``; none in
        the cache refetches the set (at most once per :data:`REFETCH_INTERVAL_S`)."""
        found = self._match(kid, alg)
        if found or self._issuer.jwks_uri is None:
            self._refresh_if_stale()
            return found
        if self._running():  # the fetch under way is as fresh as one begun now: no second
            await self._refresh()
            return self._match(kid, alg)
        now = self._monotonic()
        if self._refetched_at is not None and now - self._refetched_at < REFETCH_INTERVAL_S:
            return ()
        self._refetched_at = now
        await self._refresh()
        return self._match(kid, alg)

    async def aclose(self) -> None:
        if self._inflight is not None and not self._inflight.done():
            self._inflight.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._inflight

    def _match(self, kid: str | None, alg: str) -> tuple[PublicKey, ...]:
        return tuple(k for k in self._keys if fits(k, alg, kid))

    def _running(self) -> bool:
        return self._inflight is not None and not self._inflight.done()

    def _refresh_if_stale(self) -> None:
        fetched, attempted, now = self._fetched_at, self._attempted_at, self._monotonic()
        if fetched is None or self._running() or now - fetched < MAX_AGE_S:
            return
        if attempted is not None and now - attempted < REFETCH_INTERVAL_S:
            return  # the last attempt failed: not again before the interval (any caller can
            # make keys stale ones' refresh run, so a failing endpoint is not hammered)
        self._inflight = asyncio.ensure_future(self._fetch_and_keep())

    async def _refresh(self) -> None:
        """Run a fetch (or join the one under way) to its end: bounded by its own timeout."""
        if not self._running():
            self._inflight = asyncio.ensure_future(self._fetch_and_keep())
        assert self._inflight is not None
        await asyncio.shield(self._inflight)  # a request that leaves does not end the fetch

    async def _fetch_and_keep(self) -> None:
        self.fetches += 1
        self._attempted_at = self._monotonic()
        try:
            found = await asyncio.wait_for(self._fetch(), FETCH_TIMEOUT_S)
        except TimeoutError:
            reason = f"no answer within {FETCH_TIMEOUT_S:g} s"
        except _FetchFailed as exc:
            reason = str(exc)
        except (aiohttp.ClientError, OSError) as exc:
            reason = f"the connection failed ({type(exc).__name__})"
        except Exception as exc:  # whatever a key set can make a library raise: never a 500
            reason = f"the answer could not be read ({type(exc).__name__})"
        else:
            self._keys = found
            self._fetched_at = self._monotonic()
            return
        LOG.warning(
            "the key set of issuer `%s` could not be fetched: %s; the %d cached keys stay in force",
            self._issuer.id,
            reason,
            len(self._keys),
        )

    async def _fetch(self) -> tuple[PublicKey, ...]:
        uri = self._issuer.jwks_uri
        assert uri is not None
        tls: ssl.SSLContext | bool = True
        if uri.startswith("https:"):
            if self._tls is None:
                self._tls = client_context()
            tls = self._tls
        timeout = aiohttp.ClientTimeout(total=FETCH_TIMEOUT_S)
        headers = {"Accept": "application/jwk-set+json, application/json"}
        async with (
            aiohttp.ClientSession(timeout=timeout) as session,
            session.get(uri, ssl=tls, allow_redirects=False, headers=headers) as answer,
        ):
            if answer.status != HTTPStatus.OK:
                raise _FetchFailed(f"the answer was HTTP {answer.status}")
            body = bytearray()
            async for chunk in answer.content.iter_chunked(1 << 16):
                body += chunk
                if len(body) > MAX_JWKS_BYTES:
                    raise _FetchFailed(f"the answer is larger than {MAX_JWKS_BYTES} bytes")
        try:
            keys = public_keys(loads(bytes(body)))
        except JsonError:
            raise _FetchFailed("the answer is not strict JSON") from None
        except ValueError as exc:
            raise _FetchFailed(str(exc)) from None
        if keys.skipped:
            LOG.info("issuer `%s`'s key set: %s", self._issuer.id, "; ".join(keys.skipped[:4]))
        if not keys.keys:
            raise _FetchFailed("the key set holds no usable key")
        return keys.keys
