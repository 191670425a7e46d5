"""What the runtime writes to the decision log and returns on the wire, built in one place.

Records carry ids, digests, fingerprints, reason codes and explanations; never raw arguments,
outputs, approval reasons or secrets (``decision_log.record_fields_allowed`` guards that).
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Callable, Mapping
from typing import Any

import cbor2

from policy.engine.decision import DENY, Decision
from policy.engine.disclosure import Disclosure, Omission
from policy.explain import Explanation
from policy.json.strict import dump_bytes
from policy.offline import recorded
from servers.log.encoding import Fragment, fragment
from servers.runtime import redact
from servers.runtime.held import HeldCalls, arguments_of
from servers.store.rows import HeldCall
from servers.support.memo import remembered
from servers.wire import paging
from servers.wire.answers import (
    Coordinates,
    PendingCall,
    Receipt,
    ReceiptStatus,
    Resolved,
    UpstreamError,
)
from servers.wire.answers import (
    Omission as OmissionBody,
)

_ISO_SECOND: list[tuple[int, str]] = [(-1, "")]


def iso(ms: int) -> str:
    """RFC 3339 UTC with milliseconds, as the HTTP API writes instants."""
    second = ms // 1000
    cached, prefix = _ISO_SECOND[0]  # the last second formatted (one tuple: thread-safe)
    if cached != second:
        moment = dt.datetime.fromtimestamp(ms / 1000, tz=dt.UTC)
        prefix = moment.strftime("%Y-%m-%dT%H:%M:%S.")
        _ISO_SECOND[0] = (second, prefix)
    return prefix + f"{ms % 1000:03d}Z"


def _omission(o: Omission) -> OmissionBody:
    explanation: Any = o.explanation.to_json()
    return {"id": o.id, "kind": o.kind, "reason": o.reason, "explanation": explanation}


def disclosure_summary(d: Disclosure) -> dict[str, Any]:
    """The ``disclosure`` of a ``DISCLOSED`` record: the one definition replay compares with."""
    return recorded.disclosure_summary(d)


def resolve_payload(d: Disclosure, *, context_ref: str, build: str, expires_at: int) -> Resolved:
    contracts: Any = d.contracts()  # each a Contract, the disclosure's own JSON
    tokens: Any = d.tokens.to_json()
    tools: Any = [dict(t.model_schema) for t in d.tools]
    return {
        "contextRef": context_ref,
        "build": build,
        "objective": d.objective,
        "expiresAt": iso(expires_at),
        "messages": [{"id": m.id, "role": m.role, "text": m.text} for m in d.messages],
        "tools": tools,
        "contracts": contracts,
        "omitted": [_omission(o) for o in d.omitted],
        "tokens": tokens,
    }


def blocked_causes(d: Disclosure) -> tuple[list[OmissionBody], list[OmissionBody]]:
    """The ``causes`` and ``omitted`` a ``RESOLUTION_BLOCKED`` answer adds to its error
    (``answers.Blocked``)."""
    return [_omission(o) for o in d.causes], [_omission(o) for o in d.omitted]


_FINAL: dict[str, ReceiptStatus] = {"SUCCEEDED": "SUCCEEDED", "FAILED": "FAILED"}


def receipt_status(intent_status: str) -> ReceiptStatus:
    """A stored intent's status as a receipt says it: one still running is ``UNKNOWN``."""
    return _FINAL.get(intent_status, "UNKNOWN")


def receipt(
    call_id: str,
    tool: str,
    status: ReceiptStatus,
    *,
    reason: str | None = None,
    duplicate: bool = False,
    output: Any = None,
    output_available: bool = False,
    decision: Decision | None = None,
    executor_error: str | None = None,
    error: UpstreamError | None = None,
) -> Receipt:
    body: Receipt = {
        "callId": call_id,
        "tool": tool,
        "status": status,
        "reason": reason,
        "duplicate": duplicate,
        "outputAvailable": output_available,
    }
    if output_available:
        body["output"] = output
    if executor_error is not None:
        body["executorError"] = executor_error  # the executor's own error code, no message
    if error:
        body["error"] = error  # an upstream's own error: this answer only, never stored
    if decision is not None and decision.outcome == DENY:
        body["decision"] = decision.to_json()  # type: ignore[typeddict-item]  # its own JSON
    return body


_explained: dict[Explanation, Fragment] = {}
_placed: dict[tuple[str, ...], Fragment] = {}
"""Encoded coordinates without the trace, by value (:mod:`servers.support.memo`: LRU)."""


def _explanation(explanation: Explanation | None) -> Fragment | None:
    """The ``explanation`` field, checked and encoded once per explanation (the engine's are
    a few, built with the IR)."""
    if explanation is None:
        return None
    return remembered(_explained, explanation, lambda e: fragment("explanation", e.to_json()))


def decision_fields(
    decision: Decision, parameters: Mapping[str, Any] | None, secret: bytes
) -> dict[str, Any]:
    """A decision for the log: no argument values (error messages can quote them) and no
    argument keys (error pointers keep only what the tool's ``parameters`` declare, and
    fingerprint the rest with ``secret``: :mod:`servers.runtime.redact`)."""
    out: dict[str, Any] = {
        "tool": decision.tool,
        "callId": decision.call_id,
        "outcome": decision.outcome,
        "reason": decision.reason,
        "approvalRequired": decision.approval_required,
        "explanation": _explanation(decision.explanation),
    }
    if decision.fingerprint is not None:
        out["fingerprint"] = decision.fingerprint
    if decision.errors:
        out.update(redact.errors_field(decision.errors, parameters, secret))
    return out


_COORDINATES = ("objective", "consumer", "environment", "deployment", "trace")


def coordinates(row_coordinates: Mapping[str, Any]) -> dict[str, Any]:
    return {k: row_coordinates.get(k, "") for k in _COORDINATES}


def coordinates_field(row_coordinates: Mapping[str, Any]) -> Fragment | dict[str, Any]:
    """The ``coordinates`` field of a record as a fragment, or the plain map when a value is
    not a string (checked, and refused if it must be, with the record).

    The trace differs per request, so it is no part of a cache key: the encoding of the other
    four coordinates is kept per distinct value, and the trace is spliced in before them
    (canonical CBOR sorts keys by length first, and ``trace`` is the shortest)."""
    values = tuple(row_coordinates.get(k, "") for k in _COORDINATES)
    if not all(type(v) is str for v in values):
        return dict(zip(_COORDINATES, values, strict=True))
    *shared, trace = values
    try:
        encoded_trace = cbor2.dumps(trace)
    except (UnicodeEncodeError, cbor2.CBOREncodeError):  # a lone surrogate: the checks refuse it
        return dict(zip(_COORDINATES, values, strict=True))
    rest = remembered(_placed, tuple(shared), _shared_fragment)
    value = {**rest.value, "trace": trace}
    return Fragment("coordinates", value, _MAP5 + _TRACE_KEY + encoded_trace + rest.cbor[1:])


_MAP5 = b"\xa5"  # a CBOR map of five pairs
_TRACE_KEY = cbor2.dumps("trace")


def _shared_fragment(shared: tuple[str, ...]) -> Fragment:
    """The four coordinates but the trace, checked and encoded once (a map of four pairs)."""
    return fragment("coordinates", dict(zip(_COORDINATES[:-1], shared, strict=True)))


Described = Callable[[HeldCall], str]
"""What the runtime knows of a held call besides the call: its tool's description in the
build."""


def undescribed(_item: HeldCall) -> str:
    return ""


def pending_call(
    item: HeldCall, coords: Mapping[str, Any], described: Described = undescribed
) -> PendingCall:
    """One call waiting for approval, as ``GET /v1/context/tools/pending`` lists it: its
    arguments decoded from the held bytes, and ``expiresAt``, when it stops being approvable
    (and leaves the list), besides its context's expiry (a ``JsonError`` for held bytes that
    are not strict JSON); the application that asked (the credential that resolved its
    context), its tool's description and whether its requester is gone (as the held call
    says: :meth:`servers.runtime.held.HeldCalls.left`, every replica's)."""
    return {
        "contextRef": item.context_ref,
        "tool": item.tool,
        "toolDescription": described(item),
        "callId": item.call_id,
        "arguments": arguments_of(item),
        "reason": item.reason,
        "requestedAt": iso(item.requested_at),
        "expiresAt": iso(item.expires_at),
        "contextExpiresAt": iso(item.context_expires_at),
        "coordinates": _shown(coords),
        "application": item.owner,
        "requesterGone": item.requester_gone,
    }


def _shown(coords: Mapping[str, Any]) -> Coordinates:
    """The coordinates an approver is shown of a pending call's context."""
    return {
        "objective": str(coords.get("objective") or ""),
        "consumer": str(coords.get("consumer") or ""),
        "environment": str(coords.get("environment") or ""),
        "deployment": str(coords.get("deployment") or ""),
    }


def pending_page(
    held: HeldCalls,
    now: int,
    coordinates: Callable[[str], Mapping[str, Any]],
    page: paging.Page,
    described: Described = undescribed,
) -> paging.Listed:
    """One page of ``GET /v1/context/tools/pending`` (:mod:`servers.wire.paging`): the
    calls approvable at ``now`` after ``page.after``, oldest first, each encoded; a call whose
    held bytes do not decode (never made so: they are this process's own strict JSON) is
    dropped and left out: fail closed, never a 500."""
    found, more = held.page(now, page.after, page.limit, paging.ITEMS_BYTES)
    listing = _Listing(held, coordinates, described)
    entries = ((listing.encoded(item), cursor) for item, cursor in found)
    return paging.cut(entries, page.limit, more)


def pending_one(
    held: HeldCalls,
    now: int,
    coordinates: Callable[[str], Mapping[str, Any]],
    key: tuple[str, str],
    described: Described = undescribed,
) -> paging.Listed:
    """The page of the one call ``(contextRef, callId)`` if it is approvable at ``now``, else
    an empty one; no next page either way."""
    encoded = _Listing(held, coordinates, described).encoded(held.approvable(*key, now))
    return paging.Listed([] if encoded is None else [encoded], None)


class _Listing:
    def __init__(
        self,
        held: HeldCalls,
        coordinates: Callable[[str], Mapping[str, Any]],
        described: Described,
    ) -> None:
        self.held = held
        self.coordinates = coordinates
        self.described = described

    def encoded(self, item: HeldCall | None) -> bytes | None:
        """The entry of ``item``, encoded; None for none, or for one whose held bytes do not
        decode (then dropped: never made so, they are this process's own strict JSON)."""
        if item is None:
            return None
        try:
            entry = pending_call(item, self.coordinates(item.context_ref), self.described)
        except ValueError:  # a JsonError
            self.held.discard((item.context_ref, item.call_id))
            return None
        return dump_bytes(entry)
