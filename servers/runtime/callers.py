"""Who a request is, as the runtime keys, decides and records by (docs/identity.md).

A :class:`Caller` is made once per request from what authenticating its bearer token
established (:class:`~servers.identity.principal.Authenticated`):

- ``credential`` and ``subject`` own what it resolves (within its ``objectives``: a context of
  an objective its credential was since narrowed away from is no longer its): a context belongs
  to the credential
  (``<issuer id>:<client id>`` for a token) and to the subject, kept as its keyed fingerprint
  (:func:`~servers.identity.principal.subject_fingerprint` under the store's fingerprint key),
  never in clear;
- ``principal`` is what the engine reads as CEL's ``principal``: the subject in clear, in
  memory only;
- ``recorded`` is what ``DISCLOSED`` and decision records and the context's row keep: ``{issuer,
  clientId, subject: fingerprint, claims}`` for a token of an issuer (the claims as given:
  replay reads them), nothing for a static credential (its record's ``credential`` says it all).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from functools import lru_cache
from typing import Any

from policy.engine.principal import PrincipalValue, principal_value, static_principal
from servers.identity.principal import Authenticated, subject_fingerprint
from servers.store.rows import ContextRow


@dataclass(frozen=True, slots=True)
class Caller:
    """A request's caller: its owner key, the principal as the engine reads it, and as it is
    recorded."""

    credential: str
    subject: str | None
    principal: PrincipalValue
    recorded: Mapping[str, Any] | None
    objectives: frozenset[str] | None = None
    """The objectives it may resolve, and so use contexts of (None: every one)."""

    @staticmethod
    def of(found: Authenticated, key: bytes) -> Caller:
        """The caller ``found`` is, its subject fingerprinted with ``key``."""
        who = found.principal
        if who.issuer is None:  # a static credential: the application alone
            return Caller(found.id, None, _static(found.id), None, found.objectives)
        subject = None if who.subject is None else subject_fingerprint(key, who.issuer, who.subject)
        given = who.to_json()
        recorded = {**given, "subject": subject}
        return Caller(found.id, subject, principal_value(given), recorded, found.objectives)

    def fields(self) -> dict[str, Any]:
        """What a record carries of the caller: ``principal`` for a token of an issuer."""
        return {} if self.recorded is None else {"principal": self.recorded}

    def owns(self, row: ContextRow) -> bool:
        """Whether the context ``row`` is this caller's, and of an objective it may still
        resolve (a context resolved before its credential was narrowed is no longer its)."""
        allowed = self.objectives is None or row.objective in self.objectives
        return allowed and row.owned_by(self.credential, self.subject)


@lru_cache(maxsize=256)
def _static(credential_id: str) -> PrincipalValue:
    """A static credential's principal, made once (it is immutable)."""
    return static_principal(credential_id)


def resolver_of(row: ContextRow, subject: str | None = None) -> PrincipalValue:
    """The principal that resolved ``row``, as its disclosure read it: the recorded one (a
    static credential's for a row without one), with the subject in clear when the caller
    gives it (its owner: the fingerprint matched); else the recorded fingerprint stands in."""
    if row.principal is None:
        return static_principal(row.credential_id)
    given = dict(row.principal)
    if subject is not None:
        given["subject"] = subject
    return principal_value(given)
