"""The pending list in pages, on its own (``servers.wire.paging`` and
``HeldCalls.page``): a walk by cursor while calls are added, dropped and asked again visits
every call held all along once, nothing twice and nothing that was not held (a hypothesis
property); a page's limit and bytes, a call larger than a page alone; a cursor of an earlier
process starts over; a cursor that is none is refused."""

from __future__ import annotations

from dataclasses import dataclass, field

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from policy.json.strict import loads
from servers.runtime.held import HeldCalls
from servers.store.rows import HeldCall
from servers.wire import paging
from servers.wire.paging import CursorInvalid, Listed

FAR = 10**12


def held_call(n: int, call_id: str, size: int) -> HeldCall:
    return HeldCall("ctx", "t", call_id, b"{}", "APPROVAL_REQUIRED", n, "fp", FAR, FAR, size)


@dataclass
class Walk:
    """A walk through the pages of ``held`` and what it saw."""

    held: HeldCalls
    after: str | None = None
    done: bool = False
    seen: list[int] = field(default_factory=list)  # id() of each call listed, in order

    def page(self, limit: int, max_bytes: int, cut_bytes: int) -> None:
        found, more = self.held.page(0, self.after, limit, max_bytes)
        live = {id(p) for p in self.held.listed(0)}
        assert all(id(item) in live for item, _ in found)  # only what is held now
        by_mark = {f"{id(item)}".encode(): item for item, _ in found if item is not None}
        entries = [(f"{id(item)}".encode().ljust(item.size), c) for item, c in found if item]
        listed = paging.cut(entries, limit, more, cut_bytes)
        assert 1 <= len(listed.items) <= limit or not entries
        self.seen += [id(by_mark[item.rstrip()]) for item in listed.items]
        self.after, self.done = listed.next, listed.next is None


OPERATIONS = st.lists(
    st.one_of(
        st.tuples(st.just("add"), st.integers(1, 40)),
        st.tuples(st.just("drop"), st.integers(0, 10**6)),
        st.tuples(st.just("again"), st.integers(0, 10**6)),
        st.tuples(st.just("page"), st.integers(1, 4), st.integers(1, 120), st.integers(1, 120)),
    ),
    max_size=80,
)


@settings(max_examples=300, deadline=None)
@given(start=st.integers(0, 30), operations=OPERATIONS)
def test_a_walk_by_cursor_lists_every_call_held_all_along_once(
    start: int, operations: list[tuple[int | str, ...]]
) -> None:
    held = HeldCalls(in_all=10**6, per_context=10**6, per_credential=10**6)
    made: list[HeldCall] = []  # every call made, kept: no id() is used twice

    def add(call_id: str, size: int) -> None:
        made.append(held_call(len(made), call_id, size))
        held.add(made[-1], now=0)

    for n in range(start):
        add(f"p{n}", 10)
    all_along = {id(p) for p in held.listed(0)}
    order = [id(p) for p in held.listed(0)]
    walk = Walk(held)
    for operation in operations:
        kind, *args = operation
        live = held.listed(0)
        if kind == "add":
            add(f"new{len(order)}", int(args[0]))
        elif kind in ("drop", "again") and live:
            victim = live[int(args[0]) % len(live)]
            held.discard((victim.context_ref, victim.call_id))
            if kind == "again":  # asked again: a new hold of the same call, listed last
                add(victim.call_id, victim.size)
        elif kind == "page" and not walk.done:
            walk.page(*map(int, args))
        all_along &= {id(p) for p in held.listed(0)}
        order += [id(p) for p in held.listed(0) if id(p) not in order]
    for _ in range(len(made) + 1):  # each page lists a call at least: an end in sight
        if not walk.done:
            walk.page(3, 50, 50)
    assert walk.done
    assert len(walk.seen) == len(set(walk.seen))  # nothing twice
    assert all_along <= set(walk.seen)  # everything held all along
    assert walk.seen == sorted(walk.seen, key=order.index)  # oldest first


def test_a_page_holds_its_limit_and_its_bytes_and_a_large_call_alone() -> None:
    calls = [(b"x" * 100, f"c{n}") for n in range(10)]
    assert paging.cut(calls, 4, more=False) == Listed([b"x" * 100] * 4, "c3")
    assert paging.cut(calls, 50, more=False, max_bytes=350) == Listed([b"x" * 100] * 3, "c2")
    assert paging.cut(calls[:3], 50, more=False, max_bytes=350) == Listed([b"x" * 100] * 3, None)
    assert paging.cut(calls[:3], 50, more=True).next == "c2"  # more follow what was read
    huge = [(b"y" * (paging.MAX_PAGE_BYTES + 1), "big"), *calls]
    assert paging.cut(huge, 50, more=False) == Listed([huge[0][0]], "big")  # alone
    left_out = [(None, "gone"), *calls[:2], (None, "gone too")]
    assert paging.cut(left_out, 50, more=False) == Listed([b"x" * 100] * 2, None)
    assert paging.cut(left_out, 50, more=True).next == "gone too"  # past what was left out
    assert paging.cut([(None, "gone")], 50, more=True) == Listed([], "gone")
    assert paging.taken([100] * 10, 4) == 4 and paging.taken([100] * 10, 50, 350) == 3
    assert paging.taken([paging.MAX_PAGE_BYTES + 1, 1], 50) == 1


def test_an_answer_is_within_its_bytes_with_the_longest_cursor() -> None:
    one = b'{"a":"' + b"x" * 1000 + b'"}'
    entries = [(one, "c") for _ in range(10_000)]
    listed = paging.cut(entries, 10_000, more=True)
    body = paging.body(Listed(listed.items, "~" * paging.MAX_CURSOR), now="2026-01-01T00:00:00Z")
    assert len(body) <= paging.MAX_PAGE_BYTES  # and full, but for the envelope's room:
    assert paging.MAX_PAGE_BYTES - len(body) < len(one) + 1024
    assert loads(body)["next"] == "~" * paging.MAX_CURSOR and len(loads(body)["pending"]) > 1


def test_a_cursor_of_an_earlier_process_starts_over_and_a_cursor_that_is_none_is_refused() -> None:
    earlier, held = HeldCalls(), HeldCalls()
    for n in range(3):
        earlier.add(held_call(n, f"p{n}", 10), now=0)
        held.add(held_call(n, f"p{n}", 10), now=0)
    [(_, cursor)], more = earlier.page(0, None, 1, 100)
    assert more and [p and p.call_id for p, _ in held.page(0, cursor, 5, 100)[0]] == [
        "p0",
        "p1",
        "p2",
    ]
    for bad in ("", "abc", "x.", "x.-1", "x.1e3", "x.٣", "x." + "9" * 19):
        with pytest.raises(CursorInvalid):
            held.page(0, bad, 5, 100)
