"""The calls held for approval on a shared PostgreSQL store, and how their waits ended.

Every replica holds the calls it denied for approval in memory (``servers.runtime.held``,
with its bounds, waiters and sweep) and writes each through to ``held_calls`` here (a
:class:`~servers.store.interface.HeldStore`), so that an approver reaching any replica lists,
approves and rejects any of them. A held call's arguments
are stored only sealed (``servers.store.postgres.sealing``: AES-256-GCM, the key derived from the
trace key) and only while the call is approvable: a row is deleted when its call is approved with
its arguments, dispatched, rejected or expired, or its tool exhausted. ``held_outcomes`` keeps
how a wait ended (``REJECTED``, never replaced; ``EXPIRED``) for the approval status. A row's
``requester_gone`` is the mark of a call whose requester left (set by the replica holding it,
cleared by a new request of the call): every replica lists it and refuses to approve the call.

Each statement is one autocommit transaction on the calling thread's connection (the store's
reads' connection): durable once it returns, and seen by every replica's next read. None is on
the dispatch path of a call that needs no approval.
"""

from __future__ import annotations

import base64
import binascii
from collections.abc import Iterator
from dataclasses import replace
from typing import Any

from policy.json.strict import dump_bytes, loads
from servers.store.interface import HeldPage
from servers.store.postgres.sealing import Sealer, SealError
from servers.store.postgres.store import PgStore
from servers.store.rows import HeldCall
from servers.wire.paging import CursorInvalid

OUTCOMES_KEPT_MS = 60 * 60 * 1000
"""How long an ended wait is remembered (a context lives 15 minutes: it is long dead by then)."""
TURNS_KEPT_MS = 60 * 60 * 1000
"""How long a turn is kept past its expiry (then no request can name it any more)."""
EXPIRY_GRACE_MS = 5_000
"""How long past its expiry a held call is left to the replica that holds it (which logs its
``APPROVAL_EXPIRED``) before another replica ends it (its holder died, say)."""

_COLUMNS = (
    "context_ref, call_id, tool, owner, fingerprint, reason, requested_at, expires_at,"
    " context_expires_at, size, sealed, requester_gone"
)
_NOT_RUN = (
    "NOT EXISTS (SELECT 1 FROM intents i WHERE i.context_ref = h.context_ref"
    " AND i.call_id = h.call_id)"
)
PUT = (
    f"INSERT INTO held_calls ({_COLUMNS}, replica_id)"
    " SELECT %(context_ref)s, %(call_id)s, %(tool)s, %(owner)s, %(fingerprint)s, %(reason)s,"
    " %(requested_at)s, %(expires_at)s, %(context_expires_at)s, %(size)s, %(sealed)s,"
    " %(requester_gone)s, %(replica_id)s WHERE NOT EXISTS (SELECT 1 FROM held_outcomes o WHERE"
    " o.context_ref = %(context_ref)s AND o.call_id = %(call_id)s AND o.outcome = 'REJECTED')"
    " ON CONFLICT (context_ref, call_id) DO UPDATE SET tool = EXCLUDED.tool,"
    " owner = EXCLUDED.owner, fingerprint = EXCLUDED.fingerprint, reason = EXCLUDED.reason,"
    " requested_at = EXCLUDED.requested_at, expires_at = EXCLUDED.expires_at,"
    " context_expires_at = EXCLUDED.context_expires_at, size = EXCLUDED.size,"
    " sealed = EXCLUDED.sealed, requester_gone = EXCLUDED.requester_gone,"
    " replica_id = EXCLUDED.replica_id"
)
_KEY = "context_ref = %(context_ref)s AND call_id = %(call_id)s"
_OWN = _KEY + " AND replica_id = %(replica_id)s AND requested_at = %(requested_at)s"
DROP = "DELETE FROM held_calls WHERE context_ref = %s AND call_id = %s"
DROP_OWN = f"DELETE FROM held_calls WHERE {_OWN}"
DROP_MATCHING = DROP + " AND tool = %s AND fingerprint = %s"
MARK_GONE = f"UPDATE held_calls SET requester_gone = true WHERE {_OWN}"
DROP_TOOL = "DELETE FROM held_calls WHERE context_ref = %s AND tool = %s"
_OUTCOME = (
    " INSERT INTO held_outcomes (context_ref, call_id, outcome, decided_at)"
    " {values} ON CONFLICT (context_ref, call_id) DO UPDATE SET outcome = EXCLUDED.outcome,"
    " decided_at = EXCLUDED.decided_at WHERE held_outcomes.outcome <> 'REJECTED'"
)
NOTE = _OUTCOME.format(values="VALUES (%(context_ref)s, %(call_id)s, %(outcome)s, %(now)s)")
REJECT = f"WITH gone AS (DELETE FROM held_calls WHERE {_KEY})" + NOTE
EXPIRE_OWN = (
    f"WITH gone AS (DELETE FROM held_calls WHERE {_OWN} RETURNING context_ref, call_id),"
    " noted AS ("
    + _OUTCOME.format(values="SELECT context_ref, call_id, 'EXPIRED', %(now)s FROM gone")
    + ") SELECT count(*) FROM gone"
)
OUTCOME = "SELECT outcome FROM held_outcomes WHERE context_ref = %s AND call_id = %s"
_NOT_REJECTED = (
    "NOT EXISTS (SELECT 1 FROM held_outcomes o WHERE o.context_ref = h.context_ref"
    " AND o.call_id = h.call_id AND o.outcome = 'REJECTED')"
)
_LIVE = (
    f"SELECT {_COLUMNS} FROM held_calls h WHERE h.expires_at > %s AND {_NOT_RUN}"
    f" AND {_NOT_REJECTED}"
)
ONE = _LIVE + " AND h.context_ref = %s AND h.call_id = %s"
OF_CONTEXT = f"SELECT EXISTS ({_LIVE} AND h.context_ref = %s)"
PAGE = (
    f"SELECT {_COLUMNS}, total FROM (SELECT *, sum(size) OVER w - size AS before,"
    " row_number() OVER w AS n, count(*) OVER () AS total"
    f" FROM ({_LIVE} AND (h.requested_at, h.context_ref, h.call_id) > (%s, %s, %s)) h"
    " WINDOW w AS (ORDER BY requested_at, context_ref, call_id)) t"
    " WHERE before < %s AND n <= %s ORDER BY requested_at, context_ref, call_id"
)
Place = tuple[int, str, str]
"""Where a held call is in the pending list: its ``(requested_at, context_ref, call_id)``."""
FIRST: Place = (-(1 << 63), "", "")
"""Before every held call."""
EXPIRE = (
    "WITH gone AS (DELETE FROM held_calls WHERE expires_at <= %(before)s"
    " RETURNING context_ref, call_id)"
    " INSERT INTO held_outcomes (context_ref, call_id, outcome, decided_at)"
    " SELECT context_ref, call_id, 'EXPIRED', %(now)s FROM gone ON CONFLICT DO NOTHING"
)
FORGET_ENDED = f"DELETE FROM held_calls h WHERE NOT ({_NOT_RUN}) OR NOT ({_NOT_REJECTED})"
FORGET_OUTCOMES = "DELETE FROM held_outcomes WHERE decided_at < %s"
FORGET_TURNS = "DELETE FROM turns WHERE expires_at < %s"


class HeldTable:
    """``held_calls`` and ``held_outcomes`` of one store, sealed with one key."""

    shared = True
    poll_s: float | None = 1.0
    """A decision made on another replica wakes no wait here: a wait reads the status again."""

    def __init__(self, store: PgStore, sealer: Sealer) -> None:
        self._store = store
        self._sealer = sealer
        self.unreadable = 0
        """Rows found that did not open (tampered with, or sealed with another trace key):
        never listed, never approvable from here."""

    def put(self, item: HeldCall) -> bool:
        """Hold ``item`` (replacing an earlier request of its call); False for a call rejected
        (by any replica), which is never held again."""
        params: dict[str, Any] = {
            "context_ref": item.context_ref,
            "call_id": item.call_id,
            "tool": item.tool,
            "owner": item.owner,
            "fingerprint": item.fingerprint,
            "reason": item.reason,
            "requested_at": item.requested_at,
            "expires_at": item.expires_at,
            "context_expires_at": item.context_expires_at,
            "size": item.size,
            "sealed": self._sealer.seal(item.arguments, item.identity()),
            "requester_gone": item.requester_gone,
            "replica_id": self._store.replica_id,
        }
        return self._store.execute(PUT, params) > 0

    def drop(self, context_ref: str, call_id: str) -> None:
        """Forget the call, whichever replica holds it (it ran)."""
        self._store.execute(DROP, (context_ref, call_id))

    def drop_own(self, item: HeldCall) -> None:
        """Forget this replica's hold of the call, if it is still this one (not a newer
        request of it, held by another replica)."""
        self._store.execute(DROP_OWN, self._own(item))

    def expire_own(self, item: HeldCall, now: int) -> bool:
        """This replica's hold of the call ran out: forgotten, ``EXPIRED`` noted; False when
        that hold was no longer stored (approved, run, rejected or asked again elsewhere)."""
        return bool(self._store.select(EXPIRE_OWN, {**self._own(item), "now": now})[0][0])

    def _own(self, item: HeldCall) -> dict[str, Any]:
        return {"context_ref": item.context_ref, "call_id": item.call_id,
                "replica_id": self._store.replica_id,
                "requested_at": item.requested_at}  # fmt: skip

    def drop_matching(self, context_ref: str, call_id: str, tool: str, fingerprint: str) -> None:
        """Forget the call only if it is held with exactly this tool and fingerprint."""
        self._store.execute(DROP_MATCHING, (context_ref, call_id, tool, fingerprint))

    def mark_gone(self, item: HeldCall) -> None:
        """This replica's hold of the call has no requester any more: every replica lists it
        so and refuses to approve it, while this hold is the one stored (a newer request of
        the call, held anywhere, replaced it with a requester, unmarked)."""
        self._store.execute(MARK_GONE, self._own(item))

    def drop_tool(self, context_ref: str, tool: str) -> None:
        self._store.execute(DROP_TOOL, (context_ref, tool))

    def reject(self, context_ref: str, call_id: str, now: int) -> None:
        """The call is rejected: forgotten by every replica, and never held again."""
        params = {"context_ref": context_ref, "call_id": call_id, "outcome": "REJECTED"}
        self._store.execute(REJECT, {**params, "now": now})

    def note(self, context_ref: str, call_id: str, outcome: str, now: int) -> None:
        """How the call's wait ended (``EXPIRED``: its approval ran out unused), held or not
        (a rejection is never replaced)."""
        params = {"context_ref": context_ref, "call_id": call_id, "outcome": outcome}
        self._store.execute(NOTE, {**params, "now": now})

    def outcome(self, context_ref: str, call_id: str) -> str | None:
        found = self._store.select(OUTCOME, (context_ref, call_id))
        return str(found[0][0]) if found else None

    def get(self, context_ref: str, call_id: str, now: int) -> HeldCall | None:
        """The call if it is held, unexpired at ``now`` and has not run."""
        return next(self._opened(self._store.select(ONE, (now, context_ref, call_id))), None)

    def holds(self, context_ref: str, now: int) -> bool:
        return bool(self._store.select(OF_CONTEXT, (now, context_ref))[0][0])

    def page(self, now: int, after: str | None, limit: int, max_bytes: int) -> HeldPage:
        """The calls approvable at ``now`` after the cursor ``after`` (from the first without),
        oldest first: ``limit`` at most, the last the one that brings their arguments to
        ``max_bytes``; each with the cursor of its place (None for a row that does not open:
        never listed), and whether more calls follow. Every replica's order is the same
        ``(requested_at, context_ref, call_id)``, so a list paged through any replicas visits
        each call once."""
        place = _place(after) if after is not None else FIRST
        found = self._store.select(PAGE, (now, *place, max_bytes, limit))
        out = [(self._open(row), _cursor((row[6], row[0], row[1]))) for row in found]
        return out, bool(found) and found[0][12] > len(found)

    def tidy(self, now: int) -> None:
        """End the calls left expired past :data:`EXPIRY_GRACE_MS` (their holder is gone),
        forget those that ran or were rejected meanwhile (a request of a call racing its
        rejection or its dispatch on another replica: never listed, see :data:`_LIVE`), and
        old outcomes and turns."""
        self._store.maintain(
            (EXPIRE, {"before": now - EXPIRY_GRACE_MS, "now": now}),
            (FORGET_ENDED, ()),
            (FORGET_OUTCOMES, (now - OUTCOMES_KEPT_MS,)),
            (FORGET_TURNS, (now - TURNS_KEPT_MS,)),
        )

    def _opened(self, rows: list[tuple[Any, ...]]) -> Iterator[HeldCall]:
        for found in rows:
            row = self._open(found)
            if row is not None:
                yield row

    def _open(self, found: tuple[Any, ...]) -> HeldCall | None:
        ref, call_id, tool, owner, fp, reason, requested, expires, context_expires = found[:9]
        row = HeldCall(
            ref, tool, call_id, b"", reason, requested, fp, expires, context_expires,
            size=found[9], owner=owner, requester_gone=found[11],
        )  # fmt: skip
        try:
            plain = self._sealer.open(bytes(found[10]), row.identity())
        except SealError:
            self.unreadable += 1
            return None
        return replace(row, arguments=plain)


def _cursor(place: Place) -> str:
    """A place as a cursor: base64url of its JSON (opaque to a client)."""
    return base64.urlsafe_b64encode(dump_bytes(list(place))).rstrip(b"=").decode()


def _place(cursor: str) -> Place:
    """The place a cursor of :func:`_cursor` names (:class:`CursorInvalid` if it names none
    PostgreSQL can compare: a number beyond its ``bigint``, a text holding NUL)."""
    try:
        value = loads(base64.b64decode(cursor + "=" * (-len(cursor) % 4), b"-_", validate=True))
    except (ValueError, binascii.Error):
        raise CursorInvalid(cursor) from None
    match value:
        case [int(at), str(ref), str(call)] if abs(at) < 1 << 63 and "\x00" not in ref + call:
            return at, ref, call
    raise CursorInvalid(cursor)
