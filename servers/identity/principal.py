"""Who a request is: the :class:`Principal` (the person or agent, and the application acting for
it) and what authenticating its bearer token established (:class:`Authenticated`).

A static credential names an application alone: its principal is ``{issuer: null, subject:
null, clientId: <credential id>, claims: {}}``. A token of an issuer names the issuer (its
configured id), the subject (``sub``), the client (``client_id`` or ``azp``) and the claims the
issuer's ``claims`` allowlist names (docs/identity.md).
"""

from __future__ import annotations

import hashlib
import hmac
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from types import MappingProxyType

__all__ = ["Authenticated", "ClaimValue", "Principal", "subject_fingerprint"]

FINGERPRINT_PREFIX = "hmac-sha256:"

ClaimValue = str | int | float | bool | tuple[str, ...]
"""An allowlisted claim: a string, a number, a boolean or a list of strings."""

_NO_CLAIMS: Mapping[str, ClaimValue] = MappingProxyType({})


@dataclass(frozen=True, slots=True)
class Principal:
    """``{issuer, subject, clientId, claims}``; ``issuer`` is an issuer's configured id (None
    for a static credential)."""

    issuer: str | None
    subject: str | None
    client_id: str | None
    claims: Mapping[str, ClaimValue] = field(default_factory=lambda: _NO_CLAIMS)

    def to_json(self) -> dict[str, object]:
        """The principal as the JSON object docs/identity.md shows (a list claim as a list)."""
        claims = {k: list(v) if isinstance(v, tuple) else v for k, v in self.claims.items()}
        return {
            "issuer": self.issuer,
            "subject": self.subject,
            "clientId": self.client_id,
            "claims": claims,
        }


@dataclass(frozen=True, slots=True)
class Authenticated:
    """A request's bearer token, accepted.

    ``id`` is what the runtime keys what a caller owns by (contexts, turns, held calls): a
    static credential's id, or ``<issuer id>:<client id>`` for a token (a colon no credential
    id holds). ``granting`` is, for a token, each seif scope with the token scope values that
    grant it (what a 403 ``insufficient_scope`` names); None for a static credential.
    ``objectives``: the objectives it may resolve (the credential's or the issuer's
    ``objectives``); None: every one."""

    id: str
    scopes: frozenset[str]
    principal: Principal
    granting: Mapping[str, tuple[str, ...]] | None = None
    objectives: frozenset[str] | None = None

    @property
    def owner(self) -> tuple[str, str | None, str | None]:
        """Whose what a request resolves is, as a key held in memory: the credential (or
        issuer and client) and the subject (never stored: the store keeps its keyed
        fingerprint, ``servers.runtime.callers``)."""
        return (self.id, self.principal.issuer, self.principal.subject)

    @staticmethod
    def static(
        credential_id: str, scopes: frozenset[str], objectives: Iterable[str] | None = None
    ) -> Authenticated:
        """A static credential's: the principal of an application alone."""
        allowed = None if objectives is None else frozenset(objectives)
        principal = Principal(None, None, credential_id)
        return Authenticated(credential_id, scopes, principal, objectives=allowed)

    def may_resolve(self, objective: str) -> bool:
        """Whether it may resolve ``objective`` (``servers.http.app.resolvable`` refuses
        the others)."""
        return self.objectives is None or objective in self.objectives


def subject_fingerprint(key: bytes, issuer: str, subject: str) -> str:
    """What records and approver ids keep of a subject: an HMAC-SHA256 under ``key`` (the
    store's fingerprint key) of the issuer's id and the subject, so the subject is never on
    disk in clear and the same subject of two issuers is two fingerprints."""
    message = issuer.encode() + b"\x00" + subject.encode()
    return FINGERPRINT_PREFIX + hmac.new(key, message, hashlib.sha256).hexdigest()[:32]
