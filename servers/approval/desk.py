"""The approval desk: what waits for a decision, and the decisions, with no aiohttp in sight.

Each pending call gets a ``pendingId`` that is opaque and stable for the pending call: a keyed
BLAKE3 digest (the key derived from the runner approval credential, so replicas of the approval
server agree, and no one without it can forge or predict one) of the call's contextRef, tool,
callId and canonical arguments. A call asked again with other arguments is another pending call,
with another id: an approver's click approves exactly what the approver was shown, and the
approval server forwards the runtime's own entry for it, never arguments from the browser.

A decision is looked up afresh in the runtime's list. Not listed: ``409 ALREADY_DECIDED`` when
this server decided it (or forwarded a decision of it that the runtime refused as decided),
``404 PENDING_EXPIRED`` when its window ran out, ``404 PENDING_UNKNOWN`` otherwise. Listed: it
is forwarded, and the runtime, which decides one call at a time, is the arbiter between two
approvers (or two approval servers): the second gets ``409 ALREADY_DECIDED``.
"""

from __future__ import annotations

import asyncio
import datetime as dt
import json
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import blake3

from policy.canonical import EncodingError, canonical_json_bytes
from servers.approval.upstream import Answer, Upstream
from servers.runtime.errors import HttpError
from servers.runtime.events import iso
from servers.support.visible import escape_invisible, has_visible

Clock = Callable[[], int]
KEY_CONTEXT = "seif 2026 approval-server pendingId v1"
REMEMBERED = 10_000
"""Pending calls and decisions remembered, each, the least recent forgotten first."""
MAX_REASON = 500
FIELDS = ("contextRef", "tool", "callId", "arguments", "reason", "coordinates")
TIMES = ("requestedAt", "expiresAt")


@dataclass(frozen=True, slots=True)
class Decided:
    state: str
    approver: str | None
    expires_at: str | None = None

    def body(self) -> dict[str, Any]:
        out: dict[str, Any] = {"state": self.state, "approver": self.approver}
        if self.expires_at is not None:
            out["expiresAt"] = self.expires_at
        return out


def check_reason(body: dict[str, Any]) -> str:
    """The decision's reason: required, 1..500 characters, with a visible character (one made
    only of spaces, controls, zero-width or blank characters is no reason)."""
    unknown = sorted(set(body) - {"reason"})
    if unknown:
        raise HttpError(400, "UNKNOWN_FIELD", f"unknown field `{unknown[0][:64]}`")
    reason = body.get("reason")
    if isinstance(reason, str) and len(reason) > MAX_REASON:
        raise HttpError(400, "REASON_TOO_LONG", f"`reason` is longer than {MAX_REASON} characters")
    if not isinstance(reason, str) or not has_visible(reason):
        raise HttpError(400, "REASON_REQUIRED", "`reason` is required: say why, visibly")
    return reason


def _ms(text: object) -> int | None:
    if not isinstance(text, str):
        return None
    try:
        moment = dt.datetime.fromisoformat(text.replace("Z", "+00:00"))
    except ValueError:
        return None
    return int(moment.timestamp() * 1000)


class Desk:
    """The pending calls of one runtime as approvers see them, and the decisions made here."""

    def __init__(self, upstream: Upstream, runner_token: str, clock: Clock) -> None:
        self.upstream = upstream
        self.clock = clock
        self._key = blake3.blake3(
            runner_token.encode("utf-8", "surrogatepass"), derive_key_context=KEY_CONTEXT
        ).digest()
        self._seen: OrderedDict[str, int] = OrderedDict()  # pendingId -> expiry (ms)
        self._decided: OrderedDict[str, Decided] = OrderedDict()
        self._inflight: dict[str, asyncio.Future[None]] = {}

    def pending_id(self, entry: dict[str, Any]) -> str:
        identity = {k: entry.get(k) for k in ("contextRef", "tool", "callId", "arguments")}
        digest = blake3.blake3(canonical_json_bytes(identity), key=self._key).hexdigest()
        return "pnd_" + digest[:32]

    async def listed(self) -> list[tuple[str, dict[str, Any]]]:
        """``(pendingId, the runtime's entry)`` of every call the runtime holds, oldest first
        (an entry that is not the runtime's shape is left out: fail closed)."""
        out = []
        for entry in await self.upstream.pending():
            if not all(k in entry for k in (*FIELDS[:4], "expiresAt")):
                continue
            try:
                pending_id = self.pending_id(entry)
            except EncodingError:
                continue
            self._remember(self._seen, pending_id, _ms(entry.get("expiresAt")) or 0)
            out.append((pending_id, entry))
        return out

    async def pending(self) -> dict[str, Any]:
        """The body of ``GET /v1/pending``."""
        shown = [_shown(pending_id, entry) for pending_id, entry in await self.listed()]
        return {"pending": shown, "now": iso(self.clock())}

    async def decide(self, kind: str, pending_id: str, approver: str, reason: str) -> Any:
        """Approve (``kind`` ``approve``) or reject the pending call ``pending_id``. A decision
        of the same call already on its way through this server is waited for first: the
        later one then answers ``409 ALREADY_DECIDED`` with who decided (or, if the first
        failed, goes ahead)."""
        earlier = self._inflight.get(pending_id)
        if earlier is not None:
            await asyncio.wait([earlier])
            if pending_id in self._decided:
                raise _already(self._decided[pending_id])
        done: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._inflight[pending_id] = done
        try:
            found = dict(await self.listed()).get(pending_id)
            if found is None:
                raise self._not_pending(pending_id)
            answer = await self.upstream.decide(kind, found, approver, reason)
            return self._decided_by(kind, pending_id, approver, answer)
        finally:
            if self._inflight.get(pending_id) is done:
                del self._inflight[pending_id]
            done.set_result(None)

    def _decided_by(self, kind: str, pending_id: str, approver: str, answer: Answer) -> Any:
        if answer.status == 200 and isinstance(answer.body, dict):
            if kind == "approve":
                expires = answer.body.get("expiresAt")
                done = Decided("APPROVED", approver, expires if isinstance(expires, str) else None)
                self._remember(self._decided, pending_id, done)
                return {**answer.body, "approver": approver}
            self._remember(self._decided, pending_id, Decided("REJECTED", approver))
            return {"state": "REJECTED", "approver": approver}
        if answer.code in ("CALL_REJECTED", "CALL_DECIDED"):
            if pending_id not in self._decided:  # never forget who decided, when known
                state = "REJECTED" if answer.code == "CALL_REJECTED" else "DECIDED"
                self._remember(self._decided, pending_id, Decided(state, None))
            raise _already(self._decided[pending_id])
        if answer.code == "CONTEXT_EXPIRED":
            raise HttpError(404, "PENDING_EXPIRED", "the call's context has expired")
        if answer.code in ("CONTEXT_UNKNOWN", "TOOL_NOT_DISCLOSED"):
            raise HttpError(404, "PENDING_UNKNOWN", "the runtime no longer knows this call")
        refused = answer.code or answer.status
        raise HttpError(502, "RUNTIME_ERROR", f"the runtime refused the decision: {refused}")

    def _not_pending(self, pending_id: str) -> HttpError:
        decided = self._decided.get(pending_id)
        if decided is not None:
            return _already(decided)
        expiry = self._seen.get(pending_id)
        if expiry is not None and expiry <= self.clock():
            return HttpError(404, "PENDING_EXPIRED", "the call's approval window ran out")
        return HttpError(
            404, "PENDING_UNKNOWN", "no such pending call: decided elsewhere, gone, or never asked"
        )

    @staticmethod
    def _remember(table: OrderedDict[str, Any], key: str, value: Any) -> None:
        table[key] = value
        table.move_to_end(key)
        while len(table) > REMEMBERED:
            table.popitem(last=False)


def _already(decided: Decided) -> HttpError:
    who = f" by `{decided.approver}`" if decided.approver else ""
    what = {"APPROVED": "approved", "REJECTED": "rejected"}.get(decided.state, "decided")
    return HttpError(
        409, "ALREADY_DECIDED", f"the call was already {what}{who}", decided=decided.body()
    )


def _shown(pending_id: str, entry: dict[str, Any]) -> dict[str, Any]:
    out: dict[str, Any] = {"pendingId": pending_id}
    out.update({k: entry.get(k) for k in FIELDS})
    out.update({k: entry.get(k) for k in TIMES})
    out["argumentsText"] = exact_text(entry.get("arguments"))
    return out


def exact_text(value: Any) -> str:
    """The arguments as the approver must read them: JSON text, 2-space indent, numbers as
    they will run (no rounding to a double, ``1.0`` stays ``1.0``), and every character that
    renders as nothing or as a blank (:mod:`servers.support.visible`: controls, bidi and
    zero-width format characters, default-ignorable code points, combining marks, spaces other
    than U+0020, private use) as a visible ``\\uXXXX`` escape. The text is JSON that denotes
    exactly the forwarded arguments."""
    return escape_invisible(json.dumps(value, indent=2, ensure_ascii=False))
