"""The principal as the policy reads it: CEL's ``principal`` at both stages.

``{issuer, subject, clientId, claims}``: who a request is (docs/identity.md). The runtime gives
the principal of the request's bearer token; a project test gives its own (``"principal":
{"subject", "claims"}``); a replay gives the recorded one (whose ``subject`` is a keyed
fingerprint). A static credential's principal is ``{issuer: null, subject: null, clientId:
<credential id>, claims: {}}``; with nothing given, ``clientId`` is null too. Pure: the principal
is an argument of :func:`policy.disclose` and :func:`policy.decide`, never looked up.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from policy.json.value import EMPTY_MAP, FrozenMap, freeze

__all__ = ["NO_PRINCIPAL", "PrincipalValue", "principal_value", "static_principal"]


class PrincipalValue(FrozenMap):
    """A principal as :func:`principal_value` made it (a read-only map, as CEL reads it)."""

    __slots__ = ()

    def __reduce__(self) -> tuple[type[FrozenMap], tuple[dict[str, Any]]]:
        return (PrincipalValue, (dict(self),))


def principal_value(given: Mapping[str, Any] | None = None) -> PrincipalValue:
    """The CEL value of a principal given as JSON (``issuer``, ``subject``, ``clientId``,
    ``claims``; each optional): every field present, an absent one ``null`` (``claims``:
    ``{}``); a claim's value as given (a list of strings is a CEL list). A value this function
    made is returned as it is."""
    if type(given) is PrincipalValue:
        return given
    found = given or {}
    claims = found.get("claims")
    return PrincipalValue(
        issuer=found.get("issuer"),
        subject=found.get("subject"),
        clientId=found.get("clientId"),
        claims=freeze(dict(claims)) if isinstance(claims, Mapping) and claims else EMPTY_MAP,
    )


def static_principal(client_id: str | None) -> PrincipalValue:
    """A static credential's principal: the application alone."""
    return principal_value({"clientId": client_id})


NO_PRINCIPAL = principal_value()
"""The principal of a decision no one is known to make: every field null, no claims (a project
test without ``principal``, ``seif eval`` without ``--subject`` or ``--claims``)."""
