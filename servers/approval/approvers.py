"""Who an approver is, from the bearer token of a request to the approval server.

- A static approver's token (``approvers`` of the approvers file, compared in constant time with
  every one): that approver, by its id, with its ``objectives`` and ``applications``.
- An access token of an approvers' issuer (``issuers``), validated as the runtime validates an
  application's (``servers.identity``: the issuer's key set fetched and cached, the algorithm
  allowlist, ``iss``, ``aud`` against the issuer's ``audience``, the times, ``typ``): an
  approver when its claims hold every one of the issuer's ``requireClaims`` and it names a
  subject. Its id is ``<issuer id>:<subject fingerprint>``
  (:func:`~servers.identity.principal.subject_fingerprint`), under a key derived from the
  runner approval credential (:data:`KEY_CONTEXT`): every approval server of one runtime gives
  one person one id, the subject is never sent to the runtime or recorded in clear, and a new
  runner credential gives new ids. The page shows the issuer's ``nameClaim``.

No token, claim value or subject is logged; a refusal is logged with the issuer's id and why.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass

import blake3

from servers.config.approvers import EVERYTHING, ApproverIssuer, Approvers, Narrowing
from servers.config.files import Credentials
from servers.identity import Identities, TokenRefused
from servers.identity.principal import subject_fingerprint
from servers.support.visible import escape_invisible
from servers.wire.errors import ErrorCode, Refused

LOG = logging.getLogger("seif.approval")
KEY_CONTEXT = "seif 2026 approval-server approver subject fingerprint v1"
MAX_NAME = 128
"""The characters of a name claim shown, at most."""
CHALLENGE = {"WWW-Authenticate": 'Bearer realm="seif-approvals"'}
INVALID_TOKEN = {"WWW-Authenticate": 'Bearer error="invalid_token"'}


@dataclass(frozen=True, slots=True)
class Approver:
    """A signed-in approver: ``id`` (what the runtime records), ``name`` (what the page
    shows) and what it sees and decides."""

    id: str
    name: str
    narrowing: Narrowing = EVERYTHING


def fingerprint_key(runner_token: str) -> bytes:
    """The key of approvers' subject fingerprints: derived from the runner approval
    credential (BLAKE3 ``derive_key``, its own context)."""
    material = runner_token.encode("utf-8", "surrogatepass")
    key: bytes = blake3.blake3(material, derive_key_context=KEY_CONTEXT).digest()
    return key


class Gate:
    """The approvers of one approvers file, and the key sets of its issuers."""

    def __init__(self, approvers: Approvers, runner_token: str, clock: Callable[[], int]) -> None:
        self._narrowing = approvers.narrowing
        self._issuers: dict[str, ApproverIssuer] = {a.issuer.id: a for a in approvers.issuers}
        credentials = Credentials(approvers.static, [a.issuer for a in approvers.issuers])
        self._identities = Identities(credentials, clock)
        self._key = fingerprint_key(runner_token)

    async def start(self) -> None:
        """Fetch every issuer's key set once (bounded; a failure is only logged)."""
        await self._identities.start()

    async def aclose(self) -> None:
        await self._identities.aclose()

    async def approver(self, token: str | None) -> Approver:
        """The approver ``token`` signs in: 401 ``UNAUTHENTICATED`` for none (or a token no
        approver has), 401 ``TOKEN_INVALID`` for an issuer's token failing a check, 403
        ``FORBIDDEN`` for a valid token whose holder is no approver (a required claim missing,
        or no subject)."""
        try:
            found = await self._identities.authenticate(token)
        except TokenRefused:  # logged with the failed check by `Identities`
            raise Refused(ErrorCode.TOKEN_INVALID, headers=INVALID_TOKEN) from None
        if found is None:
            message = "an approver's bearer token is required"
            raise Refused(ErrorCode.UNAUTHENTICATED, message, headers=CHALLENGE)
        principal = found.principal
        if principal.issuer is None:
            return Approver(found.id, found.id, self._narrowing.get(found.id, EVERYTHING))
        admitting = self._issuers[principal.issuer]
        subject = principal.subject
        if subject is None or not admitting.admits(principal.claims):
            why = "it names no subject" if subject is None else "a required claim is missing"
            LOG.info("approver token refused (issuer `%s`): %s", principal.issuer, why)
            message = "the token is valid, but its holder is not an approver here"
            raise Refused(ErrorCode.FORBIDDEN, message)
        ident = f"{principal.issuer}:{subject_fingerprint(self._key, principal.issuer, subject)}"
        name = principal.claims.get(admitting.name_claim) if admitting.name_claim else None
        shown = escape_invisible(name[:MAX_NAME]) if isinstance(name, str) and name else ident
        return Approver(ident, shown, admitting.narrowing)
