"""Which credential resolved each live context, in memory only, for the pending calls'
per-credential accounting (:mod:`servers.runtime.pending`).

The store's context rows do not record the resolving credential (no schema change for it), so
the runtime remembers it from the resolution until the context expires, bounded as turns are
(:class:`servers.support.bounded.Owned`): at most :data:`PER_CREDENTIAL` contexts of one
credential (resolving more forgets that credential's oldest) and :data:`IN_ALL` in all (the
credential remembered most often loses its oldest). A context whose owner is not remembered
(resolved before a restart, or forgotten so) is accounted to :data:`UNKNOWN`, one owner of its
own: only such contexts share that owner's quota.
"""

from __future__ import annotations

from servers.support.bounded import Owned

PER_CREDENTIAL = 50_000
IN_ALL = 100_000
UNKNOWN = ""
"""The owner of a context whose resolving credential is not remembered (credential ids are
never empty)."""


class Owners:
    """Context ref -> the id of the credential that resolved it, while the context lives."""

    def __init__(self, per_credential: int = PER_CREDENTIAL, in_all: int = IN_ALL) -> None:
        self.per_credential = per_credential
        self.in_all = in_all
        self._expiries: Owned[str, int] = Owned()

    def __len__(self) -> int:
        return len(self._expiries)

    def resolved(self, context_ref: str, credential: str, expires_at: int, now: int) -> None:
        """Remember that ``credential`` resolved ``context_ref``, live until ``expires_at``."""
        if not credential:
            return
        self._expiries.admit(
            context_ref,
            expires_at,
            owner=credential,
            limit=self.in_all,
            per_owner=self.per_credential,
            finished=lambda expiry: now >= expiry,
        )

    def of(self, context_ref: str) -> str:
        """The credential that resolved ``context_ref``, or :data:`UNKNOWN`."""
        return self._expiries.owner_of(context_ref) or UNKNOWN
