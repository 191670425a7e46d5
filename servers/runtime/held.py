"""The calls held for a human approval, with their raw arguments, bounded: one home for a held
call (:class:`~servers.store.rows.HeldCall`).

The runtime that holds a call keeps it in memory (the bounds below, the waiters, the sweep and
its ``APPROVAL_EXPIRED`` records) and writes it through to its backend's
:class:`~servers.store.interface.HeldStore`: one runtime's keeps nothing more
(:class:`~servers.store.memory.LocalHeld`); replicas share theirs (``held_calls`` in PostgreSQL,
arguments sealed), so the pending list, a call's held state and how its wait ended are every
replica's, and a wait reads the status again every :attr:`HeldStore.poll_s` seconds, since a
decision made on another replica does not wake it.

A call denied for approval (``APPROVAL_REQUIRED``, ``APPROVAL_INVALID``, ``APPROVAL_EXPIRED``)
is held so that ``GET /v1/context/tools/pending`` can show the approver its exact arguments.
Its arguments are held as their compact JSON encoding (bytes, decoded again only to be listed),
so the memory they take is their counted length, whatever their shape. A call is held only
while it is approvable, and never beyond these bounds, each call counted against the
credential that resolved its context (its *owner*, stored with the context; a context that names
none is owned by no credential, so no call of it can be made, nor held):

- :data:`PER_CONTEXT` calls per context, that context's oldest request dropped first (a repeat
  of a call counts as a new request);
- :data:`PER_CREDENTIAL` calls and :data:`PER_CREDENTIAL_BYTES` of arguments per owner, that
  owner's oldest dropped first: one application filling its share drops only its own calls;
- :data:`IN_ALL` calls and :data:`MAX_BYTES` of arguments in all, a last resort when many
  owners are busy: the oldest call of the owner holding the most (calls, or bytes) is dropped;
- a call whose arguments alone exceed :data:`MAX_ONE_BYTES` is not held at all;
- until its :attr:`~servers.store.rows.HeldCall.expires_at`: expired calls are dropped on
  every insertion, on every listing and by the runtime's periodic sweep, whichever comes first.

A call also leaves when it is approved with exactly its arguments, or dispatched, or when its
tool has used its ``maxCalls`` in the context (nothing more of it can run there), or when it
is rejected: a rejected call is remembered (:data:`OUTCOMES` at most, with the calls whose
wait ran out, for the approval status) and never held again. An expiry is told to
:attr:`HeldCalls.on_expired` (the runtime logs ``APPROVAL_EXPIRED``), and so is the expiry
of an approval watched with :meth:`HeldCalls.watch_approval`. Dropping a
call forgets its arguments; it refuses nothing (an approval is by exact arguments, which the
runner holds): the call is simply no longer listed, and asking again lists it again.
"""

from __future__ import annotations

import asyncio
import bisect
import heapq
import itertools
import secrets
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass, field, replace

from policy.engine.decision import Decision
from policy.engine.state import APPROVAL_TTL_MS, Call
from policy.json.strict import dump_bytes, loads
from policy.json.value import JsonValue
from servers.store.interface import HeldPage, HeldStore
from servers.store.memory import LocalHeld
from servers.store.rows import HeldCall
from servers.wire.paging import CursorInvalid

PER_CONTEXT = 32
PER_CREDENTIAL = 1_000
PER_CREDENTIAL_BYTES = 16 << 20
IN_ALL = 10_000
OUTCOMES = 100_000
"""Calls whose rejection or expiry is remembered (in memory) for the approval status at most,
the oldest forgotten first (a context lives 15 minutes, so they are long dead by then)."""
MAX_BYTES = 64 << 20
MAX_ONE_BYTES = 1 << 20
SWEEP_EVERY_S = 1.0
"""How often the runtime drops expired calls when nothing else does (wall time; the expiry
itself is judged by the runtime's injected clock)."""

Key = tuple[str, str]
_Due = tuple[int, int, Key]
"""An expiry, the serial of the hold it belongs to, and the call: never the arguments, so a
stale entry keeps nothing private alive."""


def waiting(
    context_ref: str, call: Call, decision: Decision, now: int, context_expires_at: int
) -> HeldCall | None:
    """The call to hold for ``decision`` (an approval denial), its arguments encoded:
    approvable for the approval window, or until its context expires if sooner; None for
    arguments that are not JSON."""
    try:
        encoded = dump_bytes(call.arguments)
    except ValueError:  # never approvable (it has no fingerprint), so never held
        return None
    return HeldCall(
        context_ref,
        call.tool,
        call.call_id,
        encoded,
        decision.reason or "",
        now,
        decision.fingerprint or "",
        min(now + APPROVAL_TTL_MS, context_expires_at),
        context_expires_at,
        len(encoded),
    )


def arguments_of(item: HeldCall) -> JsonValue:
    """The held call's arguments, decoded (a :class:`~policy.json.strict.JsonError` for bytes
    that are not strict JSON, which :func:`waiting` never makes)."""
    return loads(item.arguments)


@dataclass(slots=True)
class _Account:
    """One owner's held calls, oldest first, and the bytes of their arguments."""

    calls: OrderedDict[Key, None] = field(default_factory=OrderedDict)
    bytes: int = 0


@dataclass(frozen=True, slots=True)
class _Held:
    item: HeldCall
    owner: str
    serial: int


class HeldCalls:
    """The held calls: oldest first in all, per context and per owner, and a heap of their
    expiries (entries of calls dropped otherwise are skipped when they come up, and the heap
    is rebuilt when such entries outnumber the live ones). Every bound drops from an oldest
    end, so an insertion costs O(log n) amortised, plus one look over the owners when a
    bound in all is reached.

    Each hold has a serial, greater than every earlier one's: the list's order. A page's cursor
    is ``EPOCH.SERIAL`` (the serial of its last call; ``EPOCH`` is this object's, so a cursor of
    an earlier process starts from the first call, all of them newer); the serials in order
    (:attr:`_order`, those of dropped calls skipped, and removed when they outnumber the live
    ones) find where a page starts in O(log n)."""

    def __init__(
        self,
        per_context: int = PER_CONTEXT,
        in_all: int = IN_ALL,
        max_bytes: int = MAX_BYTES,
        *,
        per_credential: int = PER_CREDENTIAL,
        per_credential_bytes: int = PER_CREDENTIAL_BYTES,
        store: HeldStore | None = None,
        clock: Callable[[], int] = lambda: 0,
        approval_tools: frozenset[str] | None = None,
    ) -> None:
        self._store: HeldStore = store if store is not None else LocalHeld()
        """Where the holds are shared (written through; with others' read back)."""
        self._clock = clock
        """The time of what the store is asked (an expiry others' holds are judged by)."""
        self._approval_tools = approval_tools
        """The tools that may be held at all (None: any): a dispatch of another tells the
        store nothing."""
        self.per_context = per_context
        self.in_all = in_all
        self.max_bytes = max_bytes
        self.per_credential = per_credential
        self.per_credential_bytes = per_credential_bytes
        self._all: OrderedDict[Key, _Held] = OrderedDict()
        self._by_context: dict[str, OrderedDict[str, None]] = {}
        self._by_owner: dict[str, _Account] = {}
        self._due: list[_Due] = []
        self._serial = itertools.count()
        self._sweeper: asyncio.Task[None] | None = None
        self.bytes = 0
        self._outcomes: OrderedDict[Key, str] = OrderedDict()
        self._approvals: list[tuple[int, str, Key]] = []
        self.on_expired: Callable[[HeldCall], None] | None = None
        """Told of every held call dropped because its time ran out (never of one dropped
        for a bound, approved, dispatched or exhausted)."""
        self.on_approval_expired: Callable[[str, Key], None] | None = None
        """Told of every watched approval (:meth:`watch_approval`) whose time ran out."""
        self._waiters: dict[Key, set[asyncio.Event]] = {}
        self._epoch = secrets.token_hex(4)
        self._order: list[int] = []
        self._at: dict[int, Key] = {}  # serial -> the call it holds, while held

    @property
    def poll_s(self) -> float | None:
        """How often a wait reads the approval status again unwoken (:class:`HeldStore`)."""
        return self._store.poll_s

    def __len__(self) -> int:
        return len(self._all)

    def holds(self, context_ref: str) -> bool:
        """Whether any call of the context is held (here, or by another process)."""
        return context_ref in self._by_context or self._store.holds(context_ref, self._clock())

    def get(self, context_ref: str, call_id: str) -> HeldCall | None:
        """The held call (held here, else by another process)."""
        held = self._all.get((context_ref, call_id))
        if held is not None:
            return held.item
        return self._store.get(context_ref, call_id, self._clock())

    def owner_of(self, context_ref: str, call_id: str) -> str | None:
        found = self.get(context_ref, call_id)
        return found.owner if found is not None else None

    def held_by(self, owner: str) -> tuple[int, int]:
        """How many calls ``owner`` holds, and the bytes of their arguments."""
        account = self._by_owner.get(owner)
        return (len(account.calls), account.bytes) if account is not None else (0, 0)

    def add(self, item: HeldCall, now: int, owner: str = "") -> None:
        """Hold ``item`` for ``owner`` (replacing an earlier request of the same call), then
        enforce the bounds, dropping the oldest of the context, of the owner, then of the
        owner holding the most."""
        key = (item.context_ref, item.call_id)
        if self.outcome(key) == "REJECTED":
            return  # a rejected call (by any process) is never approvable again, so never held
        self.discard(key)
        self.sweep(now)
        most = min(self.max_bytes, self.per_credential_bytes, MAX_ONE_BYTES)
        if item.expires_at <= now or item.size > most or min(self.in_all, self.per_context) < 1:
            return
        calls = self._by_context.get(item.context_ref)
        while calls and len(calls) >= self.per_context:
            self.discard((item.context_ref, next(iter(calls))))
        account = self._by_owner.get(owner)
        while account is not None and self._over_quota(account, item.size):
            self.discard(next(iter(account.calls)))
        while self._all and len(self._all) >= self.in_all:
            self.discard(next(iter(self._largest(lambda a: len(a.calls)).calls)))
        while self._all and self.bytes + item.size > self.max_bytes:
            self.discard(next(iter(self._largest(lambda a: a.bytes).calls)))
        self._keep(key, item if item.owner == owner else replace(item, owner=owner), owner)

    def waiter(self, key: Key) -> asyncio.Event:
        """An event set whenever the call's wait may have ended (it was approved, rejected,
        dropped or its time ran out): the waiter reads the approval status again. Register
        it before reading the status, so no decision falls between; :meth:`unwait` it."""
        event = asyncio.Event()
        self._waiters.setdefault(key, set()).add(event)
        return event

    def unwait(self, key: Key, event: asyncio.Event) -> None:
        waiting_here = self._waiters.get(key)
        if waiting_here is not None:
            waiting_here.discard(event)
            if not waiting_here:
                del self._waiters[key]

    def _wake(self, key: Key) -> None:
        for event in self._waiters.get(key, ()):
            event.set()

    def discard(self, key: Key) -> HeldCall | None:
        """Forget one call (and its arguments), here and in the store (unless a newer request
        of it, held by another process, replaced it there); the one forgotten, if any."""
        item = self._forget(key)
        if item is not None:
            self._store.drop_own(item)
        return item

    def left(self, key: Key) -> None:
        """The request that asked for the held call ``key`` ended before its answer reached
        its client, and no later request can name the call: its requester is gone. The call
        stays listed, so marked (:attr:`~servers.store.rows.HeldCall.requester_gone`, in the
        store too, for every process), until it expires or is rejected; it is not approvable.
        A new request of the call holds it anew, with a requester (the mark goes, in the
        store too; a newer request held by another process is never marked from here)."""
        held = self._all.get(key)
        if held is not None and not held.item.requester_gone:
            self._all[key] = replace(held, item=replace(held.item, requester_gone=True))
            self._store.mark_gone(held.item)

    def requester_gone(self, key: Key) -> bool:
        """Whether the call held now has no requester any more (:meth:`left`), as the store
        says when it is shared (the mark of another process's hold, or a newer request that
        cleared this process's)."""
        found = self._store.get(*key, self._clock()) if self._store.shared else self.get(*key)
        return found is not None and found.requester_gone

    def _forget(self, key: Key) -> HeldCall | None:
        """Forget one call here; the one forgotten, if any."""
        self._wake(key)
        held = self._all.pop(key, None)
        if held is None:
            return None
        self.bytes -= held.item.size
        calls = self._by_context[key[0]]
        del calls[key[1]]
        if not calls:
            del self._by_context[key[0]]
        account = self._by_owner[held.owner]
        del account.calls[key]
        account.bytes -= held.item.size
        if not account.calls:
            del self._by_owner[held.owner]
        del self._at[held.serial]
        if len(self._due) > 2 * len(self._all) + 64:
            self._rebuild()
        if len(self._order) > 2 * len(self._all) + 64:
            self._order = [serial for serial in self._order if serial in self._at]
        return held.item

    def ran(self, key: Key, tool: str) -> None:
        """The call was dispatched: it is no longer held (``tool`` is its tool), by any
        process."""
        self.discard(key)
        if self._approval_tools is None or tool in self._approval_tools:
            self._store.drop(*key)

    def approved(self, context_ref: str, call_id: str, tool: str, fingerprint: str) -> None:
        """An approval of exactly the held call ends its wait; one of other arguments does
        not (the held call stays approvable)."""
        item = self.get(context_ref, call_id)
        if item is not None and (item.tool, item.fingerprint) == (tool, fingerprint):
            self.discard((context_ref, call_id))
        self._store.drop_matching(context_ref, call_id, tool, fingerprint)

    def discard_tool(self, context_ref: str, tool: str) -> None:
        """Forget a context's calls of ``tool`` (it can run no more there), by any process."""
        for call_id in list(self._by_context.get(context_ref, ())):
            item = self.get(context_ref, call_id)
            if item is not None and item.tool == tool:
                self.discard((context_ref, call_id))
        self._store.drop_tool(context_ref, tool)

    def sweep(self, now: int) -> int:
        """Drop every call expired at ``now`` (each remembered as ``EXPIRED`` and told to
        :attr:`on_expired`), and tell :attr:`on_approval_expired` of every watched approval
        expired at ``now``; how many calls were dropped."""
        dropped = 0
        while self._due and self._due[0][0] <= now:  # (a discard may rebuild the heap)
            _at, serial, key = heapq.heappop(self._due)
            held = self._all.get(key)
            if held is not None and held.serial == serial and self._expire(key, held.item):
                dropped += 1
                if self.on_expired is not None:
                    self.on_expired(held.item)
        while self._approvals and self._approvals[0][0] <= now:
            _at, approval_id, key = heapq.heappop(self._approvals)
            if self.on_approval_expired is not None:
                self.on_approval_expired(approval_id, key)
        return dropped

    def _expire(self, key: Key, item: HeldCall) -> bool:
        """Forget a call whose time ran out, remembered as ``EXPIRED``; whether to tell
        :attr:`on_expired`: only if this hold was still stored (not approved, run, rejected
        or asked again through another process meanwhile)."""
        self._forget(key)
        if not self._store.expire_own(item, self._clock()):
            return False
        self._remember_here(key, "EXPIRED")
        return True

    def watch_approval(self, approval_id: str, key: Key, expires_at: int) -> None:
        """Have the sweep tell :attr:`on_approval_expired` when this approval runs out (at
        most :data:`IN_ALL` watched: past that an approval is not watched)."""
        if len(self._approvals) < self.in_all:
            heapq.heappush(self._approvals, (expires_at, approval_id, key))

    def remember(self, key: Key, outcome: str) -> None:
        """Remember how a call's wait ended (``REJECTED`` or ``EXPIRED``), here and in the
        store (a rejection is every process's; an approval that ran out unused leaves a hold
        of other arguments be)."""
        self._remember_here(key, outcome)
        if outcome == "REJECTED":
            self._store.reject(*key, self._clock())
        else:
            self._store.note(*key, outcome, self._clock())

    def _remember_here(self, key: Key, outcome: str) -> None:
        """Remember it in memory: at most :data:`OUTCOMES` calls, the oldest forgotten first;
        a rejection is never replaced."""
        self._wake(key)
        if self._outcomes.get(key) == "REJECTED":
            return
        self._outcomes[key] = outcome
        self._outcomes.move_to_end(key)
        while len(self._outcomes) > OUTCOMES:
            self._outcomes.popitem(last=False)

    def outcome(self, key: Key) -> str | None:
        """``REJECTED``, ``EXPIRED`` or None (:meth:`remember`), as any process remembers it
        (a rejection anywhere wins)."""
        here = self._outcomes.get(key)
        if here == "REJECTED":
            return here
        stored = self._store.outcome(*key)
        return "REJECTED" if stored == "REJECTED" else here or stored

    def rejected(self, key: Key) -> HeldCall | None:
        """The call is rejected: remembered so, no longer held (its arguments forgotten);
        the one held, if any."""
        self.remember(key, "REJECTED")
        return self.discard(key)

    def listed(self, now: int) -> list[HeldCall]:
        """The calls this process holds, still approvable at ``now``, oldest first (their
        arguments encoded: :func:`arguments_of`)."""
        self.sweep(now)
        return [held.item for held in self._all.values()]

    def page(self, now: int, after: str | None, limit: int, max_bytes: int) -> HeldPage:
        """The calls approvable at ``now`` after the cursor ``after`` (from the first without),
        oldest first: ``limit`` at most, the last the one that brings their arguments to
        ``max_bytes`` (:data:`Paged`; :class:`~servers.wire.paging.CursorInvalid` for an
        ``after`` that is no cursor of this list). A shared store lists every process's."""
        self.sweep(now)
        if self._store.shared:
            return self._store.page(now, after, limit, max_bytes)
        out: list[tuple[HeldCall | None, str]] = []
        size = 0
        for at in range(self._resume(after), len(self._order)):
            key = self._at.get(self._order[at])
            if key is None:
                continue  # dropped
            if len(out) == limit or (out and size >= max_bytes):
                return out, True
            held = self._all[key]
            out.append((held.item, f"{self._epoch}.{held.serial}"))
            size += held.item.size
        return out, False

    def _resume(self, after: str | None) -> int:
        """Where in :attr:`_order` the page after the cursor ``after`` starts."""
        if after is None:
            return 0
        epoch, dot, serial = after.partition(".")
        if not dot or not serial.isascii() or not serial.isdigit() or len(serial) > 18:
            raise CursorInvalid(after)
        return bisect.bisect_right(self._order, int(serial)) if epoch == self._epoch else 0

    def approvable(self, context_ref: str, call_id: str, now: int) -> HeldCall | None:
        """The call, if it is held and approvable at ``now`` (as the store says, when it is
        shared: a decision elsewhere may have ended a hold of this process's)."""
        self.sweep(now)
        if self._store.shared:
            return self._store.get(context_ref, call_id, now)
        return self.get(context_ref, call_id)

    def keep_swept(self, clock: Callable[[], int]) -> None:
        """Sweep every :data:`SWEEP_EVERY_S` seconds while calls are held (a task of the
        running loop, started when needed), judging expiry by ``clock``."""
        if (self._all or self._approvals) and (self._sweeper is None or self._sweeper.done()):
            self._sweeper = asyncio.ensure_future(self._sweeping(clock))

    def stop_sweeping(self) -> None:
        if self._sweeper is not None:
            self._sweeper.cancel()
            self._sweeper = None

    async def _sweeping(self, clock: Callable[[], int]) -> None:
        while self._all or self._approvals:
            await asyncio.sleep(SWEEP_EVERY_S)
            self.sweep(clock())

    def _keep(self, key: Key, item: HeldCall, owner: str) -> None:
        self._keep_here(key, item, owner)
        if not self._store.put(item):  # rejected meanwhile, through another process
            self._forget(key)

    def _keep_here(self, key: Key, item: HeldCall, owner: str) -> None:
        serial = next(self._serial)
        self._all[key] = _Held(item, owner, serial)
        self._order.append(serial)
        self._at[serial] = key
        self._by_context.setdefault(item.context_ref, OrderedDict())[item.call_id] = None
        account = self._by_owner.setdefault(owner, _Account())
        account.calls[key] = None
        account.bytes += item.size
        self.bytes += item.size
        heapq.heappush(self._due, (item.expires_at, serial, key))

    def _over_quota(self, account: _Account, size: int) -> bool:
        """Whether the owner must drop a call before holding one of ``size`` bytes more."""
        return bool(account.calls) and (
            len(account.calls) >= self.per_credential
            or account.bytes + size > self.per_credential_bytes
        )

    def _largest(self, measure: Callable[[_Account], int]) -> _Account:
        """The account of the owner holding the most (one look per owner, never per call)."""
        return max(self._by_owner.values(), key=measure)

    def _rebuild(self) -> None:
        self._due = [(h.item.expires_at, h.serial, k) for k, h in self._all.items()]
        heapq.heapify(self._due)
