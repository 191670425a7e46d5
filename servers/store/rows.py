"""The dispatch store's schema, its rows and the checks on what goes into them.

Nothing here holds raw arguments, outputs, approval reasons or secrets: an intent or an approval
carries the keyed argument fingerprint, and the columns that take text from outside are checked
(fingerprints are 64 lowercase hex digits, reasons are reason codes) by Python and by SQL
``CHECK`` constraints alike.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, NamedTuple

from policy.json.value import EMPTY_MAP, freeze
from servers.wire import reasons

PENDING, SUCCEEDED, FAILED, UNKNOWN = "PENDING", "SUCCEEDED", "FAILED", "UNKNOWN"
FINAL_STATUSES = frozenset({SUCCEEDED, FAILED, UNKNOWN})
TURN_OUTCOMES = frozenset({"COMPLETED", "FAILED"})
INTERRUPTED = reasons.INTERRUPTED
"""The reason of an intent that was still ``PENDING`` when the store was opened."""
RECONCILED = reasons.RECONCILED
"""The reason of an intent the decision log recorded and the store had lost (a lost WAL tail,
a store restored from an older backup), put back as ``UNKNOWN`` at start."""

MAX_ID_CHARS = 1024
_FINGERPRINT = re.compile(r"[0-9a-f]{64}")
_REASON = re.compile(r"[A-Z][A-Z0-9_]{0,63}")


class StoreError(Exception):
    """A store that cannot be used, or a request that names something the store lacks."""


class StoreUnanswered(StoreError):
    """A write sent to a shared store whose answer never came (a connection lost mid-way):
    it may or may not have taken effect. Every other ``StoreError`` of a write means it did
    not."""


class IntentUnknown(StoreError):
    """A completion of a call id the context has no intent of."""


class StoreDamaged(StoreError):
    """A store file that is not a SQLite database, or one that fails ``PRAGMA quick_check``."""


def check_id(name: str, value: object) -> None:
    if not isinstance(value, str) or not value or len(value) > MAX_ID_CHARS:
        raise ValueError(f"{name} must be a non-empty string of at most {MAX_ID_CHARS} chars")


def check_fingerprint(value: object) -> None:
    if not isinstance(value, str) or _FINGERPRINT.fullmatch(value) is None:
        raise ValueError("fingerprint must be 64 lowercase hex digits (a keyed BLAKE3 digest)")


def check_reason(value: object) -> None:
    if value is not None and (not isinstance(value, str) or _REASON.fullmatch(value) is None):
        raise ValueError("reason must be a reason code such as `RESULT_INVALID`, or None")


def check_ms(name: str, value: object) -> None:
    if type(value) is not int:
        raise TypeError(f"{name} must be integer milliseconds")


@dataclass(frozen=True, slots=True, kw_only=True)
class ContextRow:
    """One resolved context: its coordinates (a JSON map, frozen) and the availability
    observations it used, as canonical CBOR bytes (``policy.json.canonical.canonical_cbor``)."""

    context_ref: str
    build: str
    objective: str
    coordinates: Mapping[str, Any] = EMPTY_MAP
    observations: bytes = b"\xa0"  # the empty map
    resolved_at: int
    expires_at: int
    binding_revision: int | None = None
    turn_id: str | None = None
    credential_id: str | None = None
    """The credential that resolved the context: to any other it does not exist."""
    principal: Mapping[str, Any] | None = None
    """Who resolved it, for a token of an issuer, as records carry it (``{issuer, clientId,
    subject, claims}``, the subject a keyed fingerprint, never in clear); None for a static
    credential (its principal is the credential's alone)."""

    def __post_init__(self) -> None:
        object.__setattr__(self, "coordinates", freeze(self.coordinates))
        if self.principal is not None:
            object.__setattr__(self, "principal", freeze(self.principal))

    @property
    def subject(self) -> str | None:
        """The keyed fingerprint of the subject that resolved it (None: none, or a static
        credential)."""
        found = self.principal.get("subject") if self.principal is not None else None
        return found if isinstance(found, str) else None

    def owned_by(self, credential: str, subject: str | None = None) -> bool:
        """Whether ``credential`` resolved this context, for the subject whose keyed
        fingerprint is ``subject`` (None: a static credential, or a token without one); one
        that names no owner has none."""
        if self.credential_id is None or self.credential_id != credential:
            return False
        return self.subject == subject


@dataclass(frozen=True, slots=True, kw_only=True)
class IntentRow:
    """A dispatch intent: committed ``PENDING`` before any I/O, then made final once."""

    context_ref: str
    call_id: str
    tool: str
    fingerprint: str
    status: str
    reason: str | None = None
    created_at: int
    completed_at: int | None = None

    @property
    def final(self) -> bool:
        return self.status in FINAL_STATUSES


@dataclass(frozen=True, slots=True, kw_only=True)
class ApprovalRow:
    """An approval of exactly one call (the approval's reason is never stored)."""

    approval_id: str
    context_ref: str
    tool: str
    call_id: str
    fingerprint: str
    expires_at: int
    approver_id: str | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class TurnRow:
    turn_id: str
    credential_id: str
    expires_at: int
    outcome: str | None = None


@dataclass(frozen=True, slots=True)
class HeldCall:
    """A call denied for want of an approval, held (its arguments included, as their compact
    JSON bytes) while it is approvable, so that an approver sees exactly what will run: in the
    memory of the runtime that holds it (``servers.runtime.held``) and, for replicas, sealed in
    the shared store (``servers.store.postgres.held``)."""

    context_ref: str
    tool: str
    call_id: str
    arguments: Any = field(repr=False)  # never in a log line by accident
    reason: str
    requested_at: int
    fingerprint: str
    """The keyed fingerprint of ``arguments``: an approval of exactly these ends the wait."""
    expires_at: int
    """When the call stops being approvable: the approval window after ``requested_at``, or
    the context's expiry if sooner."""
    context_expires_at: int = 0
    size: int = 0
    """The JSON length of ``arguments`` in bytes, counted against the memory budget."""
    owner: str = ""
    """The credential that resolved its context: the call counts against its share."""
    requester_gone: bool = False
    """Whether the request that asked for it ended unanswered and no later request can name
    the call (``servers.runtime.held.HeldCalls.left``): listed so, and not approvable."""

    def identity(self) -> tuple[str, ...]:
        """What sealed arguments are bound to."""
        return (self.context_ref, self.call_id, self.tool, self.fingerprint)


@dataclass(frozen=True, slots=True)
class Reconciled:
    """What the start-up reconciliation of a data directory put back into its store from its
    decision log (nothing for a shared store, which keeps both in one database)."""

    calls: int = 0
    contexts: int = 0


class Claim(NamedTuple):
    """What :meth:`Store.begin_intent` decided; unpacks as ``(dispatch, intent)``.

    - ``(True, row)``: the ``PENDING`` intent ``row`` is committed; the caller dispatches.
    - ``(False, row)``: an intent with this callId already exists (``row``, any status);
      nothing was inserted, whatever ``decide`` said. The caller must not dispatch.
    - ``(False, None)``: ``decide`` refused; nothing was inserted.
    """

    dispatch: bool
    intent: IntentRow | None

    @property
    def existing(self) -> bool:
        return not self.dispatch and self.intent is not None

    @property
    def refused(self) -> bool:
        return not self.dispatch and self.intent is None


def pending_intent(
    context_ref: str, call_id: str, tool: str, fingerprint: str, now: int
) -> IntentRow:
    """A new ``PENDING`` intent, every value checked (a ``ValueError`` or ``TypeError``)."""
    check_id("context_ref", context_ref)
    check_id("call_id", call_id)
    check_id("tool", tool)
    check_fingerprint(fingerprint)
    check_ms("now_ms", now)
    return IntentRow(
        context_ref=context_ref,
        call_id=call_id,
        tool=tool,
        fingerprint=fingerprint,
        status=PENDING,
        created_at=now,
    )
