"""An identity provider for the tests, made in the test: signing keys generated with ``joserfc``,
access tokens signed with them, and the provider's JWKS served by a real aiohttp server on
loopback whose behaviour a test changes (rotate the keys, hang, answer garbage) and whose
fetches it counts.
"""

from __future__ import annotations

import asyncio
import base64
import json
from collections.abc import AsyncIterator, Mapping, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from typing import Any

from aiohttp import web
from cryptography.hazmat.primitives import hashes
from cryptography.hazmat.primitives.asymmetric import padding
from joserfc import jwt
from joserfc.jwk import ECKey, RSAKey
from joserfc.jws import JWSRegistry

ISS = "https://idp.example"
AUDIENCE = "https://seif.example/"
SCOPES = {
    "seif.resolve": "context.resolve",
    "seif.execute": "tools.execute",
    "seif.traces": "traces.read",
}
NOW_S = 1_800_000_000
"""The tests' "now" (seconds), which the runtime's clock is set to where a test needs it."""

SigningKey = RSAKey | ECKey


def rsa_key(kid: str) -> RSAKey:
    return RSAKey.generate_key(2048, parameters={"kid": kid, "alg": "RS256", "use": "sig"})


def ec_key(kid: str) -> ECKey:
    return ECKey.generate_key("P-256", parameters={"kid": kid, "alg": "ES256", "use": "sig"})


def jwks(*keys: SigningKey) -> dict[str, Any]:
    """The public key set of ``keys``."""
    return {"keys": [k.as_dict(private=False) for k in keys]}


def claims(now_s: int = NOW_S, **extra: Any) -> dict[str, Any]:
    """A valid access token's claims at ``now_s``; ``extra`` adds or (None) removes claims."""
    base: dict[str, Any] = {
        "iss": ISS,
        "aud": AUDIENCE,
        "sub": "user-7d41",
        "client_id": "tutor-web",
        "scope": "seif.resolve seif.execute openid",
        "iat": now_s - 10,
        "exp": now_s + 300,
        "jti": "j-1",
    }
    base.update(extra)
    return {k: v for k, v in base.items() if v is not None}


def token(key: SigningKey, body: Mapping[str, Any], **header: Any) -> str:
    """``body`` signed with ``key`` (its ``kid`` and ``alg`` in the header unless given)."""
    alg = header.pop("alg", key.alg)
    head = {"alg": alg, "kid": key.kid, "typ": "at+jwt", **header}
    head = {k: v for k, v in head.items() if v is not None}
    registry = JWSRegistry(algorithms=[alg], strict_check_header=False)
    return jwt.encode(head, dict(body), key, registry=registry)


def raw_rs256(key: RSAKey, header: Mapping[str, Any], body: Mapping[str, Any]) -> str:
    """``body`` signed RS256 with ``key`` under exactly ``header``, which ``joserfc`` would not
    write (a ``typ`` that is no string, a ``crit``...): the signature is real, only the header
    is odd."""
    signing_input = f"{b64json(header)}.{b64json(body)}"
    private = key.private_key
    assert private is not None
    signature = private.sign(signing_input.encode(), padding.PKCS1v15(), hashes.SHA256())
    return f"{signing_input}.{b64(signature)}"


def b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


def b64json(value: Any) -> str:
    return b64(json.dumps(value, separators=(",", ":")).encode())


def issuer_entry(jwks_uri: str, **overrides: Any) -> dict[str, Any]:
    """An ``issuers`` entry of the credentials file for the provider at ``jwks_uri``."""
    entry: dict[str, Any] = {
        "id": "corp",
        "issuer": ISS,
        "jwksUri": jwks_uri,
        "audience": AUDIENCE,
        "scopes": dict(SCOPES),
        "claims": ["groups", "tenant"],
        "leewaySeconds": 60,
    }
    entry.update(overrides)
    return entry


@dataclass
class Provider:
    """The JWKS endpoint: ``keys`` is served as ``mode`` says (``ok``, ``hang``: never
    answers until the server stops, ``garbage``: 200 with a body that is not JSON, ``error``:
    503, ``unhashable``: the keys with ``"alg": []``); ``fetches`` counts the requests."""

    keys: list[SigningKey]
    url: str = ""
    mode: str = "ok"
    fetches: int = 0
    released: asyncio.Event = field(default_factory=asyncio.Event)

    def set_keys(self, *keys: SigningKey) -> None:
        self.keys = list(keys)


@asynccontextmanager
async def provider(keys: Sequence[SigningKey]) -> AsyncIterator[Provider]:
    """The JWKS of ``keys`` served on a loopback port, at ``Provider.url``."""
    state = Provider(list(keys))

    async def handle(_request: web.Request) -> web.StreamResponse:
        state.fetches += 1
        if state.mode == "hang":
            await state.released.wait()
        if state.mode == "garbage":
            return web.Response(body=b"<html>not a key set", content_type="application/json")
        if state.mode == "error":
            return web.Response(status=503)
        if state.mode == "unhashable":  # JSON a careless key check would crash on
            entries = [{**k, "alg": []} for k in jwks(*state.keys)["keys"]]
            return web.json_response({"keys": entries})
        return web.json_response(jwks(*state.keys))

    app = web.Application()
    app.router.add_get("/jwks", handle)
    runner = web.AppRunner(app, access_log=None)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    state.url = f"http://127.0.0.1:{runner.addresses[0][1]}/jwks"
    try:
        yield state
    finally:
        state.released.set()
        await runner.cleanup()
