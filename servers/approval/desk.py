"""The approval desk: what waits for a decision, and the decisions, with no aiohttp in sight.

Each pending call gets a ``pendingId`` that is opaque and stable for the pending call: a keyed
BLAKE3 digest (the key derived from the runner approval credential, so replicas of the approval
server agree, and no one without it can forge or predict one) of the call's contextRef, tool,
callId and canonical arguments. A call asked again with other arguments is another pending call,
with another id: an approver's click approves exactly what the approver was shown, and the
approval server forwards the runtime's own entry for it, never arguments from the browser.

The list is paged (``servers.wire.paging``): each listing reads one page of the runtime's.

An approver narrowed to some objectives or applications (:class:`Narrowing`) is listed only the
calls within both, and decides only those: any other answers ``404 PENDING_UNKNOWN``, as a call
never asked does, whatever this server knows of it. Its listing reads the runtime's pages, up to
:data:`MAX_PAGES_READ` of them, until its page is full; ``next`` then follows the last call read.

A decision is looked up afresh in the runtime: its one call, by the contextRef and callId this
server listed it with (a pendingId it never listed is looked for page by page). Not listed:
``409 ALREADY_DECIDED`` when this server decided it (or forwarded a decision of it that the
runtime refused as decided), ``404 PENDING_EXPIRED`` when its window ran out,
``404 PENDING_UNKNOWN`` otherwise. Listed: it is forwarded, and the runtime, which decides one
call at a time, is the arbiter between two approvers (or two approval servers): the second gets
``409 ALREADY_DECIDED``.
"""

from __future__ import annotations

import asyncio
import datetime as dt
import re
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass
from http import HTTPStatus
from typing import Any, cast

import blake3

from policy.json.canonical import EncodingError, canonical_json_bytes
from policy.json.strict import dump_bytes
from servers.approval.upstream import Answer, Upstream
from servers.approval.view import arguments_view, exact_text
from servers.config.approvers import EVERYTHING, Narrowing
from servers.runtime.events import iso
from servers.support.visible import has_visible
from servers.wire import paging
from servers.wire.approving import ApproverPendingCall
from servers.wire.errors import ErrorCode as E
from servers.wire.errors import Refused
from servers.wire.paging import MAX_LIMIT, Listed, Page

Clock = Callable[[], int]
KEY_CONTEXT = "seif 2026 approval-server pendingId v1"
REMEMBERED = 10_000
"""Pending calls and decisions remembered, each, the least recent forgotten first."""
MAX_REASON = 500
FIELDS = ("contextRef", "tool", "callId", "arguments", "reason", "coordinates")
TIMES = ("requestedAt", "expiresAt")
PENDING_ID = re.compile(r"pnd_[0-9a-f]{32}")
MAX_PAGES_READ = 20
"""The runtime's pages a narrowed approver's listing reads at most (then its page may hold
fewer calls, even none, and ``next`` goes on from the last call read)."""
Where = tuple[str, str]
"""A pending call's objective and application (what an approver's :class:`Narrowing` admits)."""


@dataclass(frozen=True, slots=True)
class Decided:
    state: str
    approver: str | None
    where: Where
    expires_at: str | None = None

    def body(self) -> dict[str, Any]:
        out: dict[str, Any] = {"state": self.state, "approver": self.approver}
        if self.expires_at is not None:
            out["expiresAt"] = self.expires_at
        return out


@dataclass(frozen=True, slots=True)
class Known:
    """A pending call as this server listed it: when it expires, and its call."""

    expires_at: int
    call: tuple[str, str]
    """Its ``(contextRef, callId)``."""
    where: Where


def check_reason(body: dict[str, Any]) -> str:
    """The decision's reason: required, 1..500 characters, with a visible character (one made
    only of spaces, controls, zero-width or blank characters is no reason)."""
    unknown = sorted(set(body) - {"reason"})
    if unknown:
        raise Refused(E.UNKNOWN_FIELD, f"unknown field `{unknown[0][:64]}`")
    reason = body.get("reason")
    if isinstance(reason, str) and len(reason) > MAX_REASON:
        raise Refused(E.REASON_TOO_LONG, f"`reason` is longer than {MAX_REASON} characters")
    if not isinstance(reason, str) or not has_visible(reason):
        raise Refused(E.REASON_REQUIRED, "`reason` is required: say why, visibly")
    return reason


def where(entry: dict[str, Any]) -> Where:
    """The objective and the application of the runtime's entry (``""`` for one it lacks: no
    narrowed approver's)."""
    coordinates = entry.get("coordinates")
    objective = coordinates.get("objective") if isinstance(coordinates, dict) else None
    application = entry.get("application")
    return (
        objective if isinstance(objective, str) else "",
        application if isinstance(application, str) else "",
    )


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
        self._seen: OrderedDict[str, Known] = OrderedDict()
        self._decided: OrderedDict[str, Decided] = OrderedDict()
        self._inflight: dict[str, asyncio.Future[None]] = {}

    def pending_id(self, entry: dict[str, Any]) -> str:
        identity = {k: entry.get(k) for k in ("contextRef", "tool", "callId", "arguments")}
        digest = blake3.blake3(canonical_json_bytes(identity), key=self._key).hexdigest()
        return "pnd_" + digest[:32]

    async def listed(
        self, limit: int, after: str | None = None, call: tuple[str, str] | None = None
    ) -> tuple[list[tuple[str, dict[str, Any]]], str | None]:
        """A page of the runtime's list (``Upstream.pending``): ``(pendingId, the runtime's
        entry)`` of its calls, oldest first (an entry that is not the runtime's shape is left
        out: fail closed), and the cursor of the next page."""
        entries, after_them = await self.upstream.pending(limit, after, call)
        return [found for entry in entries if (found := self._identified(entry))], after_them

    async def _read(
        self, limit: int, after: str | None
    ) -> tuple[list[tuple[int, str, dict[str, Any]]], int, str | None]:
        """:meth:`listed`, each call with its place in the runtime's page, and how many
        entries that page had."""
        entries, after_them = await self.upstream.pending(limit, after)
        found = [(i, *one) for i, entry in enumerate(entries) if (one := self._identified(entry))]
        return found, len(entries), after_them

    def _identified(self, entry: dict[str, Any]) -> tuple[str, dict[str, Any]] | None:
        ref, call_id = entry.get("contextRef"), entry.get("callId")
        shaped = all(k in entry for k in (*FIELDS[:4], "expiresAt"))
        if not (shaped and isinstance(ref, str) and isinstance(call_id, str)):
            return None
        try:
            pending_id = self.pending_id(entry)
        except EncodingError:
            return None
        known = Known(_ms(entry.get("expiresAt")) or 0, (ref, call_id), where(entry))
        self._remember(self._seen, pending_id, known)
        return pending_id, entry

    async def pending(self, page: Page, within: Narrowing = EVERYTHING) -> bytes:
        """The body of ``GET /v1/pending``: the runtime's page of ``page.limit`` calls, cut to
        what fits in 4 MiB here (``argumentsText`` makes an entry larger than the runtime's).
        When fewer fit, the runtime is asked again for the calls up to the last that fits, so
        that ``next`` follows exactly the last call shown. An approver narrowed (``within``)
        is shown only its calls: the runtime's pages are read on (each of up to
        :data:`~servers.wire.paging.MAX_LIMIT` calls, again cut at the last call shown when
        more are found than fit) until the page is full, the list ends, or
        :data:`MAX_PAGES_READ` were read."""
        shown: list[bytes] = []
        after = page.after
        for _ in range(1 if within.everything else MAX_PAGES_READ):
            limit = page.limit - len(shown) if within.everything else MAX_LIMIT
            cut = False
            while True:
                read, count, after_them = await self._read(limit, after)
                admitted = [
                    (i, dump_bytes(_shown(pending_id, entry)))
                    for i, pending_id, entry in read
                    if within.admits(*where(entry))
                ]
                sizes = [*map(len, shown), *(len(b) for _, b in admitted)]
                fit = paging.taken(sizes, page.limit) - len(shown)
                if fit == len(admitted):
                    break
                if fit == 0:  # the page is full: `next` follows the last call shown
                    return paging.body(Listed(shown, after), now=iso(self.clock()))
                limit, cut = admitted[fit - 1][0] + 1, True  # again, up to the last that fits
            shown += [b for _, b in admitted]
            after = after_them
            if cut or after is None or len(shown) >= page.limit or count < limit:
                break  # a full page, the list's end, or a page the runtime cut by its size
        return paging.body(Listed(shown, after), now=iso(self.clock()))

    async def decide(
        self,
        kind: str,
        pending_id: str,
        approver: str,
        reason: str,
        within: Narrowing = EVERYTHING,
    ) -> Any:
        """Approve (``kind`` ``approve``) or reject the pending call ``pending_id``. A decision
        of the same call already on its way through this server is waited for first: the
        later one then answers ``409 ALREADY_DECIDED`` with who decided (or, if the first
        failed, goes ahead). A call outside ``within`` is ``404 PENDING_UNKNOWN``, whatever
        its state."""
        earlier = self._inflight.get(pending_id)
        if earlier is not None:
            await asyncio.wait([earlier])
            decided = self._decided.get(pending_id)
            if decided is not None and within.admits(*decided.where):
                raise _already(decided)
        done: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._inflight[pending_id] = done
        try:
            found = await self._find(pending_id)
            if found is None or not within.admits(*where(found)):
                raise self._not_pending(pending_id, within)
            answer = await self.upstream.decide(kind, found, approver, reason)
            return self._decided_by(kind, pending_id, approver, answer, where(found))
        finally:
            if self._inflight.get(pending_id) is done:
                del self._inflight[pending_id]
            done.set_result(None)

    async def _find(self, pending_id: str) -> dict[str, Any] | None:
        """The runtime's entry of the call ``pending_id``, if it is still pending: asked for by
        its contextRef and callId when this server listed it, else looked for page by page
        (listed through another approval server, or before a restart)."""
        seen = self._seen.get(pending_id)
        if seen is not None:
            return dict((await self.listed(1, call=seen.call))[0]).get(pending_id)
        if not PENDING_ID.fullmatch(pending_id):
            return None
        after: str | None = None
        while True:
            listed, after = await self.listed(MAX_LIMIT, after)
            found = dict(listed).get(pending_id)
            if found is not None or after is None:
                return found

    def _decided_by(
        self, kind: str, pending_id: str, approver: str, answer: Answer, at: Where
    ) -> Any:
        if answer.status == HTTPStatus.OK and isinstance(answer.body, dict):
            if kind == "approve":
                expires = answer.body.get("expiresAt")
                until = expires if isinstance(expires, str) else None
                self._remember(self._decided, pending_id, Decided("APPROVED", approver, at, until))
                return {**answer.body, "approver": approver}
            self._remember(self._decided, pending_id, Decided("REJECTED", approver, at))
            return {"state": "REJECTED", "approver": approver}
        if answer.code in (E.CALL_REJECTED.code, E.CALL_DECIDED.code):
            if pending_id not in self._decided:  # never forget who decided, when known
                state = "REJECTED" if answer.code == E.CALL_REJECTED.code else "DECIDED"
                self._remember(self._decided, pending_id, Decided(state, None, at))
            raise _already(self._decided[pending_id])
        if answer.code == E.REQUESTER_GONE.code:
            raise Refused(E.REQUESTER_GONE, "the request that asked for this call has gone")
        if answer.code == E.CONTEXT_EXPIRED.code:
            raise Refused(E.PENDING_EXPIRED, "the call's context has expired")
        if answer.code in (E.CONTEXT_UNKNOWN.code, E.TOOL_NOT_DISCLOSED.code):
            raise Refused(E.PENDING_UNKNOWN, "the runtime no longer knows this call")
        refused = answer.code or answer.status
        raise Refused(E.RUNTIME_ERROR, f"the runtime refused the decision: {refused}")

    def _not_pending(self, pending_id: str, within: Narrowing) -> Refused:
        """Why ``pending_id`` cannot be decided, as far as ``within`` may know."""
        decided = self._decided.get(pending_id)
        if decided is not None and within.admits(*decided.where):
            return _already(decided)
        seen = self._seen.get(pending_id)
        if seen is not None and not within.admits(*seen.where):
            seen = None
        if decided is None and seen is not None and seen.expires_at <= self.clock():
            return Refused(E.PENDING_EXPIRED)
        message = "no such pending call: decided elsewhere, gone, or never asked"
        return Refused(E.PENDING_UNKNOWN, message)

    @staticmethod
    def _remember(table: OrderedDict[str, Any], key: str, value: Any) -> None:
        table[key] = value
        table.move_to_end(key)
        while len(table) > REMEMBERED:
            table.popitem(last=False)


def _already(decided: Decided) -> Refused:
    who = f" by `{decided.approver}`" if decided.approver else ""
    what = {"APPROVED": "approved", "REJECTED": "rejected"}.get(decided.state, "decided")
    message = f"the call was already {what}{who}"
    return Refused(E.ALREADY_DECIDED, message, decided=decided.body())


def _shown(pending_id: str, entry: dict[str, Any]) -> ApproverPendingCall:
    """The runtime's entry as approvers see it: the fields of the runtime's list (an older
    runtime's missing ones as empty), its ``pendingId``, and its arguments as text and as a
    view."""
    arguments = entry.get("arguments")
    out: dict[str, Any] = {"pendingId": pending_id}
    out.update({k: entry.get(k) for k in FIELDS})
    out.update({k: entry.get(k) for k in TIMES})
    out["toolDescription"] = _text(entry.get("toolDescription"))
    out["application"] = _text(entry.get("application"))
    out["requesterGone"] = entry.get("requesterGone") is True
    out["argumentsText"] = exact_text(arguments)
    out["argumentsView"] = arguments_view(arguments)
    return cast(ApproverPendingCall, out)


def _text(value: object) -> str:
    return value if isinstance(value, str) else ""
