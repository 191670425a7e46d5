"""A JSON Web Key Set (RFC 7517) as the public signing keys an issuer's tokens may be verified
with: what a ``jwksFile`` holds and what a ``jwksUri`` answers (docs/identity.md).

Only asymmetric public keys are kept: an ``oct`` key (a shared secret) is never one, a key with
a private part is refused (a key set is published; a private key in it is a leak), as is a key
whose ``use`` is not ``sig`` and an RSA key under 2048 bits. The keys are parsed by ``joserfc``;
nothing here verifies a signature.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from joserfc.errors import JoseError
from joserfc.jwk import ECKey, OKPKey, RSAKey, import_key

__all__ = [
    "ALGORITHMS",
    "MAX_JWKS_BYTES",
    "MAX_KEYS",
    "PublicKey",
    "PublicKeys",
    "fits",
    "public_keys",
]

PublicKey = RSAKey | ECKey | OKPKey
MAX_JWKS_BYTES = 256 << 10
"""The largest key set read, from a file or an answer (an identity provider's is a few KiB)."""
MAX_KEYS = 64
"""Keys kept of one set at most (the first ones)."""
MIN_RSA_BITS = 2048

ALGORITHMS: dict[str, tuple[str, str | None]] = {
    "RS256": ("RSA", None),
    "RS384": ("RSA", None),
    "RS512": ("RSA", None),
    "PS256": ("RSA", None),
    "PS384": ("RSA", None),
    "PS512": ("RSA", None),
    "ES256": ("EC", "P-256"),
    "ES384": ("EC", "P-384"),
    "ES512": ("EC", "P-521"),
    "EdDSA": ("OKP", None),
    "Ed25519": ("OKP", "Ed25519"),
    "Ed448": ("OKP", "Ed448"),
}
"""The asymmetric signature algorithms an issuer may allow, each with the key type (and curve)
it verifies with. Neither ``none`` nor an HMAC algorithm is one, nor ever can be."""

_PRIVATE = frozenset({"d", "p", "q", "dp", "dq", "qi", "oth", "k"})


@dataclass(frozen=True, slots=True)
class PublicKeys:
    """The usable keys of a set, and why each other entry was left out (for the log or the
    configuration's refusal: never key material)."""

    keys: tuple[PublicKey, ...]
    skipped: tuple[str, ...]


def public_keys(document: Any) -> PublicKeys:
    """The usable public signing keys of a JWKS document; raises ``ValueError`` (a message
    quoting nothing of the document) when it is not a key set."""
    if not isinstance(document, dict) or not isinstance(document.get("keys"), list):
        raise ValueError("not a JWKS: an object with a `keys` array")
    keys: list[PublicKey] = []
    skipped: list[str] = []
    for i, entry in enumerate(document["keys"]):
        if len(keys) == MAX_KEYS:
            skipped.append(f"keys past the first {MAX_KEYS} usable ones")
            break
        problem = _problem(entry)
        if problem is None:
            try:
                key = import_key(entry)
            except (JoseError, ValueError, TypeError):
                problem = "not a valid key"
            else:
                problem = _weak(key)
                if problem is None:
                    assert isinstance(key, RSAKey | ECKey | OKPKey)  # _problem kept these
                    keys.append(key)
                    continue
        skipped.append(f"key {i}: {problem}")
    return PublicKeys(tuple(keys), tuple(skipped))


def _problem(entry: Any) -> str | None:
    if not isinstance(entry, dict):
        return "not an object"
    kty = entry.get("kty")
    if kty not in ("RSA", "EC", "OKP"):
        return "not an asymmetric key (`kty` RSA, EC or OKP)"
    if _PRIVATE & entry.keys():
        return "holds a private key"
    if entry.get("use", "sig") != "sig":
        return "its `use` is not `sig`"
    kid = entry.get("kid")
    if kid is not None and not isinstance(kid, str):
        return "its `kid` is not a string"
    alg = entry.get("alg")
    if alg is not None and (not isinstance(alg, str) or alg not in ALGORITHMS):
        return "its `alg` is not an asymmetric signature algorithm"
    return None


def _weak(key: Any) -> str | None:
    if isinstance(key, RSAKey) and key.raw_value.key_size < MIN_RSA_BITS:
        return f"an RSA key under {MIN_RSA_BITS} bits"
    if not isinstance(key, RSAKey | ECKey | OKPKey) or key.is_private:
        return "not a public key"
    return None


def fits(key: PublicKey, alg: str, kid: str | None) -> bool:
    """Whether ``key`` may verify a token signed with ``alg`` under ``kid`` (a token without
    one: any key of the set): its type and curve are the algorithm's, its ``alg`` (if it names
    one) is ``alg``."""
    kty, curve = ALGORITHMS.get(alg, ("", None))
    if key.key_type != kty or (kid is not None and key.kid != kid):
        return False
    if key.alg is not None and key.alg != alg:
        return False
    crv = key.get("crv") if kty in ("EC", "OKP") else None
    if curve is not None and crv != curve:
        return False
    return not (alg == "EdDSA" and crv not in ("Ed25519", "Ed448"))


def known_kids(keys: Sequence[PublicKey]) -> frozenset[str]:
    return frozenset(k.kid for k in keys if k.kid is not None)
