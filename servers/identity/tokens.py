"""One JWT access token, validated against the issuer its ``iss`` names (docs/identity.md).

The checks, in order, each failure a :class:`TokenRefused` whose ``reason`` names the check
(logged; never the token, a claim's value or the ``kid``):

1. at most :data:`MAX_TOKEN_BYTES`;
2. the header (strict JSON) names an algorithm of the issuer's allowlist (never ``none`` or an
   HMAC: the allowlist cannot hold one), a ``typ``, when present, of ``at+jwt`` or ``JWT``, and
   no ``crit`` or ``b64`` (no extension is understood);
3. the signature, by ``joserfc``, with a key of the issuer's set whose type, curve and ``alg``
   fit the algorithm (and whose ``kid`` is the token's, when it names one);
4. ``iss`` exact, ``aud`` holding an accepted audience, ``exp`` required, ``nbf`` and ``iat``
   when present, each with the issuer's leeway (``joserfc``'s claims registry);
5. ``sub``, ``client_id``/``azp``, the scopes (``scope``, space-separated, or ``scp``) and the
   allowlisted claims of the right types.

Which issuer a token is checked against is read from its ``iss`` before the signature is; every
claim used is checked under that issuer's key.
"""

from __future__ import annotations

import base64
import binascii
import math
import re
from collections.abc import Awaitable, Callable, Collection, Mapping
from dataclasses import dataclass
from types import MappingProxyType
from typing import Any

from joserfc import jws
from joserfc.errors import (
    BadSignatureError,
    ClaimError,
    ExpiredTokenError,
    JoseError,
    MissingClaimError,
)
from joserfc.jws import JWSRegistry
from joserfc.jwt import JWTClaimsRegistry

from policy.json.strict import JsonError, loads
from servers.config.issuers import Issuer
from servers.config.jwks import PublicKey
from servers.identity.principal import Authenticated, ClaimValue, Principal

__all__ = ["MAX_TOKEN_BYTES", "TokenRefused", "Unverified", "unverified", "validate"]

MAX_TOKEN_BYTES = 16 << 10
"""A bearer token longer than this is refused unread."""
MAX_KEYS_WITHOUT_KID = 8
"""A token that names no ``kid`` is tried against at most this many keys of its algorithm (the
first in the set): an unauthenticated request never costs more signature checks."""
MAX_NAME_CHARS = 512
"""The longest ``sub`` and client id accepted."""
TYPES = frozenset({"at+jwt", "application/at+jwt", "jwt", "application/jwt"})
_SEGMENT = re.compile(r"[A-Za-z0-9_-]*")

Candidates = Callable[[str | None, str], Awaitable[tuple[PublicKey, ...]]]
"""The keys of an issuer that may verify (kid, alg): ``IssuerKeys.candidates``."""


class TokenRefused(Exception):
    """A JWT that failed a check: ``reason`` says which; ``issuer``, the issuer's id, once
    known."""

    def __init__(self, reason: str, issuer: str | None = None) -> None:
        super().__init__(reason)
        self.reason = reason
        self.issuer = issuer


@dataclass(frozen=True, slots=True)
class Unverified:
    """A JWS compact token's header and claims, read but not yet verified."""

    token: str
    header: Mapping[str, Any]
    claims: Any


def unverified(token: str) -> Unverified | None:
    """The token as a JWT (three base64url segments, the first a JSON object naming ``alg``),
    or None when it is not one (it may be a static credential's). Raises :class:`TokenRefused`
    for a JWT whose claims are not a JSON object."""
    parts = token.split(".")
    if len(parts) != 3 or not all(_SEGMENT.fullmatch(p) for p in parts):
        return None
    header = _segment(parts[0])
    if not isinstance(header, dict) or not isinstance(header.get("alg"), str):
        return None
    claims = _segment(parts[1])
    if not isinstance(claims, dict):
        raise TokenRefused("the claims are not a JSON object")
    return Unverified(token, MappingProxyType(header), claims)


def _segment(text: str) -> Any:
    try:
        return loads(base64.urlsafe_b64decode(text + "=" * (-len(text) % 4)))
    except (binascii.Error, JsonError, ValueError):
        return None


async def validate(
    found: Unverified,
    issuer: Issuer,
    candidates: Candidates,
    now_s: int,
    audiences: Collection[str] = (),
) -> Authenticated:
    """The token checked against ``issuer`` (its ``iss`` named it); ``audiences``: accepted
    besides the issuer's ``audience`` (the later MCP resource URLs). Raises
    :class:`TokenRefused`."""
    header, claims = found.header, found.claims
    alg = header["alg"]
    if alg not in issuer.algorithms:
        raise TokenRefused("its algorithm is not in the issuer's allowlist", issuer.id)
    typ = header.get("typ")
    if typ is not None and (not isinstance(typ, str) or typ.lower() not in TYPES):
        raise TokenRefused("its `typ` is neither `at+jwt` nor `JWT`", issuer.id)
    if "crit" in header or "b64" in header:
        raise TokenRefused("its header has an extension (`crit`, `b64`)", issuer.id)
    kid = header.get("kid")
    if kid is not None and not isinstance(kid, str):
        raise TokenRefused("its `kid` is not a string", issuer.id)
    keys = await candidates(kid, alg)
    if kid is None:  # every key of the algorithm could be it: a bounded number are tried
        keys = keys[:MAX_KEYS_WITHOUT_KID]
    _verify(found.token, issuer.algorithms, keys, issuer.id)
    _check_claims(claims, issuer, now_s, audiences)
    return _authenticated(claims, issuer)


def _verify(
    token: str, algorithms: Collection[str], keys: tuple[PublicKey, ...], issuer: str
) -> None:
    if not keys:
        raise TokenRefused("no key of the issuer's set fits its `kid` and algorithm", issuer)
    registry = JWSRegistry(algorithms=list(algorithms), strict_check_header=False)
    for key in keys:
        try:
            jws.deserialize_compact(token, key, registry=registry)
        except BadSignatureError:
            continue
        except (JoseError, ValueError, TypeError) as exc:
            reason = f"its signature cannot be checked ({type(exc).__name__})"
            raise TokenRefused(reason, issuer) from None
        return
    raise TokenRefused("its signature does not verify", issuer)


def _check_claims(
    claims: dict[str, Any], issuer: Issuer, now_s: int, audiences: Collection[str]
) -> None:
    accepted: list[str] = [issuer.audience, *audiences]
    registry = JWTClaimsRegistry(
        now=now_s,
        leeway=issuer.leeway_s,
        iss={"essential": True, "value": issuer.issuer},
        aud={"essential": True, "values": accepted},
        exp={"essential": True},
    )
    try:
        registry.validate(claims)
    except ExpiredTokenError:
        raise TokenRefused("it has expired", issuer.id) from None
    except MissingClaimError as exc:
        raise TokenRefused(f"it lacks `{exc.claim}`", issuer.id) from None
    except ClaimError as exc:
        raise TokenRefused(_claim_reason(exc.claim), issuer.id) from None


def _claim_reason(claim: str) -> str:
    return {
        "nbf": "it is not valid yet (`nbf`)",
        "iat": "it was issued in the future (`iat`)",
        "aud": "it is for another audience (`aud`)",
        "iss": "it is another issuer's (`iss`)",
    }.get(claim, f"its `{claim[:64]}` is invalid")


def _authenticated(claims: dict[str, Any], issuer: Issuer) -> Authenticated:
    subject = _name(claims, "sub", issuer.id)
    client = _name(claims, "client_id", issuer.id)
    if client is None:
        client = _name(claims, "azp", issuer.id)
    kept: dict[str, ClaimValue] = {}
    for name in issuer.claims:
        if name in claims:
            kept[name] = _claim(claims[name], name, issuer.id)
    scopes = frozenset(
        issuer.scopes[s] for s in _token_scopes(claims, issuer.id) if s in issuer.scopes
    )
    granting = {scope: issuer.granting(scope) for scope in set(issuer.scopes.values())}
    return Authenticated(
        id=f"{issuer.id}:{client or ''}",
        scopes=scopes,
        principal=Principal(issuer.id, subject, client, MappingProxyType(kept)),
        granting=MappingProxyType(granting),
        objectives=None if issuer.objectives is None else frozenset(issuer.objectives),
    )


def _name(claims: dict[str, Any], key: str, issuer: str) -> str | None:
    value = claims.get(key)
    if value is None:
        return None
    if not isinstance(value, str) or not 0 < len(value) <= MAX_NAME_CHARS:
        raise TokenRefused(
            f"its `{key}` is not a string of 1 to {MAX_NAME_CHARS} characters", issuer
        )
    return value


def _claim(value: Any, name: str, issuer: str) -> ClaimValue:
    if isinstance(value, str | bool | int):
        return value
    if isinstance(value, float) and math.isfinite(value):
        return value
    if isinstance(value, list) and all(isinstance(v, str) for v in value):
        return tuple(value)
    message = f"its claim `{name}` is not a string, number, boolean or list of strings"
    raise TokenRefused(message, issuer)


def _token_scopes(claims: dict[str, Any], issuer: str) -> list[str]:
    """``scope`` (space-separated) or else ``scp`` (a list, or space-separated)."""
    value = claims.get("scope", claims.get("scp"))
    if value is None:
        return []
    if isinstance(value, str):
        return value.split()
    if isinstance(value, list) and all(isinstance(v, str) for v in value):
        return list(value)
    raise TokenRefused("its `scope` (or `scp`) is not a string or a list of strings", issuer)
