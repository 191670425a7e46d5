"""The calls held for approval when replicas share one PostgreSQL store.

:class:`SharedPendingCalls` is :class:`~servers.runtime.pending.PendingCalls` (this replica's
own held calls in memory: the bounds, the waiters, the sweep and its ``APPROVAL_EXPIRED``
records) written through to the store's ``held_calls`` (``servers.store.postgres.held``, arguments
sealed), and read from it: the pending list, a call's held state and how its wait ended are
every replica's. A wait on this replica is not woken by a decision made on another: whoever
waits reads the status again every :attr:`poll_s` seconds.

The pending list's order is every replica's: ``(requested_at, context_ref, call_id)``, and a
page's cursor is that of its last call (base64url of its JSON), so a list paged through any
replicas visits each call once.
"""

from __future__ import annotations

import base64
import binascii
from collections.abc import Callable

from policy.json.strict import dump_bytes, loads
from servers.runtime.pending import IN_ALL, MAX_BYTES, Key, Paged, PendingCalls
from servers.runtime.values import Pending
from servers.store.postgres.held import HeldRow, HeldTable, Place
from servers.wire.paging import CursorInvalid


class SharedPendingCalls(PendingCalls):
    poll_s = 1.0

    def __init__(
        self, table: HeldTable, clock: Callable[[], int], approval_tools: frozenset[str]
    ) -> None:
        super().__init__()
        self._table = table
        self._clock = clock
        self._approval_tools = approval_tools

    def add(self, item: Pending, now: int, owner: str = "") -> None:
        if self.outcome((item.context_ref, item.call_id)) != "REJECTED":
            super().add(item, now, owner)

    def _keep(self, key: Key, item: Pending, owner: str) -> None:
        super()._keep(key, item, owner)
        if not self._table.put(_row(item, owner)):  # rejected meanwhile, on another replica
            super().discard(key)

    def discard(self, key: Key) -> Pending | None:
        item = super().discard(key)
        if item is not None:  # this replica's hold, unless a newer request replaced it
            self._table.drop_own(*key, item.requested_at)
        return item

    def _expire(self, key: Key, item: Pending) -> bool:
        """Its time ran out here: logged only if this replica's hold was still stored (not
        approved, run, rejected or asked again through another replica meanwhile)."""
        PendingCalls.discard(self, key)
        if not self._table.expire_own(*key, item.requested_at, self._clock()):
            return False
        PendingCalls.remember(self, key, "EXPIRED")
        return True

    def ran(self, key: Key, tool: str) -> None:
        super().ran(key, tool)
        if tool in self._approval_tools:  # it may be held by another replica
            self._table.drop(*key)

    def approved(self, context_ref: str, call_id: str, tool: str, fingerprint: str) -> None:
        super().approved(context_ref, call_id, tool, fingerprint)
        self._table.drop_matching(context_ref, call_id, tool, fingerprint)

    def discard_tool(self, context_ref: str, tool: str) -> None:
        super().discard_tool(context_ref, tool)
        self._table.drop_tool(context_ref, tool)

    def remember(self, key: Key, outcome: str) -> None:
        super().remember(key, outcome)
        if outcome == "REJECTED":  # forgotten by every replica
            self._table.reject(*key, self._clock())
        else:  # an approval that ran out unused: a hold of other arguments stays
            self._table.note(*key, outcome, self._clock())

    def outcome(self, key: Key) -> str | None:
        here = super().outcome(key)
        if here == "REJECTED":
            return here
        stored = self._table.outcome(*key)
        return "REJECTED" if stored == "REJECTED" else here or stored

    def holds(self, context_ref: str) -> bool:
        return super().holds(context_ref) or self._table.holds(context_ref, self._clock())

    def get(self, context_ref: str, call_id: str) -> Pending | None:
        found = super().get(context_ref, call_id)
        if found is not None:
            return found
        row = self._table.get(context_ref, call_id, self._clock())
        return _pending(row) if row is not None else None

    def owner_of(self, context_ref: str, call_id: str) -> str | None:
        found = super().owner_of(context_ref, call_id)
        if found is not None:
            return found
        row = self._table.get(context_ref, call_id, self._clock())
        return row.owner if row is not None else None

    def listed(self, now: int) -> list[Pending]:
        self.sweep(now)
        return [_pending(row) for row in self._table.live(now, IN_ALL, MAX_BYTES)]

    def page(self, now: int, after: str | None, limit: int, max_bytes: int) -> Paged:
        self.sweep(now)
        rows, more = self._table.page(now, _place(after), limit, max_bytes)
        return [(None if r is None else _pending(r), _cursor(at)) for r, at in rows], more

    def approvable(self, context_ref: str, call_id: str, now: int) -> Pending | None:
        self.sweep(now)
        row = self._table.get(context_ref, call_id, now)
        return _pending(row) if row is not None else None


def _cursor(place: Place) -> str:
    return base64.urlsafe_b64encode(dump_bytes(list(place))).rstrip(b"=").decode()


def _place(cursor: str | None) -> Place | None:
    """The place a cursor of :func:`_cursor` names (:class:`CursorInvalid` if it names none
    PostgreSQL can compare: a number beyond its ``bigint``, a text holding NUL)."""
    if cursor is None:
        return None
    try:
        value = loads(base64.b64decode(cursor + "=" * (-len(cursor) % 4), b"-_", validate=True))
    except (ValueError, binascii.Error):
        raise CursorInvalid(cursor) from None
    match value:
        case [int(at), str(ref), str(call)] if abs(at) < 1 << 63 and "\x00" not in ref + call:
            return at, ref, call
    raise CursorInvalid(cursor)


def _row(item: Pending, owner: str) -> HeldRow:
    return HeldRow(
        item.context_ref,
        item.call_id,
        item.tool,
        owner,
        item.fingerprint,
        item.reason,
        item.requested_at,
        item.expires_at,
        item.context_expires_at,
        item.size,
        arguments=item.arguments,
    )


def _pending(row: HeldRow) -> Pending:
    return Pending(
        row.context_ref,
        row.tool,
        row.call_id,
        row.arguments,
        row.reason,
        row.requested_at,
        row.fingerprint,
        row.expires_at,
        row.context_expires_at,
        row.size,
    )
