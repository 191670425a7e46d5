"""The runtime's one cache helper (``servers.support.memo``: least recently used dropped
first), caches keyed on what their values depend on (never a ``traceId``), and the pending
calls' structure on its own (bounds, and arguments released once dropped)."""

from __future__ import annotations

import gc
import tracemalloc
import weakref
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from policy.engine.decision import Decision
from policy.engine.state import Call
from policy.json.canonical import canonical_cbor
from policy.json.strict import loads
from servers.runtime import events
from servers.runtime.held import MAX_ONE_BYTES, HeldCalls, arguments_of, waiting
from servers.runtime.redact import error_pointer, key_token, names_field, shortened
from servers.runtime.service import Runtime
from servers.store.rows import HeldCall
from servers.support import memo
from servers.support.bounded import Owned
from servers.wire.paging import Page
from tests.support.runtime_harness import FakeClock, Stack, run_on_fake_clock


def test_the_least_recently_used_entry_goes_first() -> None:
    cache: dict[str, int] = {}
    made: list[str] = []

    def make(key: str) -> int:
        made.append(key)
        return len(made)

    for key in "abc":
        memo.remembered(cache, key, make, limit=3)
    assert memo.remembered(cache, "a", make, limit=3) == 1  # a hit: now the newest
    memo.remembered(cache, "d", make, limit=3)  # full: b, the least recently used, goes
    assert list(cache) == ["c", "a", "d"]
    assert made == ["a", "b", "c", "d"]
    memo.remembered(cache, "b", make, limit=3)  # computed again
    assert made[-1] == "b" and list(cache) == ["a", "d", "b"]
    assert memo.cached(cache, "zz") is None and len(cache) == 3


def test_keep_refreshes_and_bounds() -> None:
    cache: dict[int, int] = {}
    for i in range(10):
        memo.keep(cache, i, i, limit=4)
    assert list(cache) == [6, 7, 8, 9]
    memo.keep(cache, 7, 70, limit=4)
    assert list(cache) == [6, 8, 9, 7] and cache[7] == 70
    memo.keep(cache, 1, 1, limit=0)  # a cache of size 0 keeps nothing
    assert 1 not in cache


@pytest.mark.parametrize(
    "coords",
    [
        {
            "objective": "authoring",
            "consumer": "c",
            "environment": "",
            "deployment": "d",
            "trace": "",
        },
        {
            "objective": "o",
            "consumer": "ü" * 200,
            "environment": "e",
            "deployment": "",
            "trace": "t" * 256,
        },
        {
            "objective": "o",
            "consumer": "c",
            "environment": "e",
            "deployment": "x",
            "trace": "00f0" * 8,
        },
    ],
)
def test_the_coordinates_fragment_is_their_canonical_cbor(coords: dict[str, str]) -> None:
    found = events.coordinates_field(coords)
    assert not isinstance(found, dict)
    assert found.cbor == canonical_cbor(coords) and found.value == coords


def test_the_coordinates_cache_is_not_keyed_by_trace() -> None:
    events._placed.clear()
    for i in range(500):
        coords = {"objective": "o", "consumer": "c", "environment": "e", "deployment": "d"}
        events.coordinates_field({**coords, "trace": f"{i:032x}"})
    assert len(events._placed) == 1


def test_resolves_with_distinct_trace_ids_share_one_cache_entry(tmp_path: Path) -> None:
    async def scenario(s: Stack, runtime: Runtime, _clock: FakeClock) -> None:
        events._placed.clear()
        bodies = []
        for i in range(30):
            found = await s.resolve(objective="learner", traceId=f"{i:032x}")
            bodies.append({k: v for k, v in found.items() if k != "contextRef"})
        assert len(runtime.contexts._resolved) == 1
        assert len(events._placed) == 1
        assert all(b == bodies[0] for b in bodies)

    run_on_fake_clock(tmp_path, scenario)


# ------------------------------------------------------------------ redaction units

PARAMS: dict[str, Any] = {
    "type": "object",
    "properties": {
        "a/b": {"type": "array", "items": {"type": "object", "properties": {"x": {}}}},
        "free": {"type": "object", "additionalProperties": True},
    },
}


def test_pointers_keep_declared_tokens_and_hide_the_rest() -> None:
    key = b"k" * 32
    assert error_pointer("", PARAMS, key) == ""
    assert error_pointer("/a~1b/3/x", PARAMS, key) == "/a~1b/3/x"
    hidden = error_pointer("/a~1b/3/secret-key/deeper", PARAMS, key)
    assert hidden == "/a~1b/3/" + key_token("secret-key/deeper", key)
    assert "secret" not in hidden and len(hidden) == len("/a~1b/3/") + 21
    assert error_pointer("/free/anything", PARAMS, key).startswith("/free/…key:")
    assert error_pointer("/a~1b/x", PARAMS, key).startswith("/a~1b/…key:")  # not an index
    assert error_pointer("/u", None, key) == "/" + key_token("u", key)
    assert key_token("u", key) != key_token("u", b"j" * 32)  # keyed


def test_names_are_shortened_deduplicated_and_counted() -> None:
    assert shortened("x" * 64) == "x" * 64
    assert shortened("x" * 70) == "x" * 64 + "…(+6)"
    out = names_field("tools", ["a", "a", *(f"n{i}" for i in range(100))])
    assert out["tools"][:2] == ["a", "n0"] and len(out["tools"]) == 64
    assert out["toolsOmitted"] == 101 - 64
    assert names_field("tools", []) == {"tools": []}


# ------------------------------------------------------------------ pending calls


class Args(dict[str, Any]):
    """Arguments that can be watched (a ``dict`` subclass takes a weak reference)."""


def item(ctx: str, call: str, expires_at: int, size: int = 10, tool: str = "t") -> HeldCall:
    return HeldCall(
        ctx, tool, call, Args(v=call), "APPROVAL_REQUIRED", 0, "fp", expires_at, 0, size
    )


def test_dropped_calls_release_their_arguments() -> None:
    held = HeldCalls(per_context=2, in_all=3)
    refs = []
    for i in range(5):
        new = item("c", f"p{i}", expires_at=100)
        refs.append(weakref.ref(new.arguments))
        held.add(new, now=0)
        del new
    expiring = item("d", "soon", expires_at=10)
    refs.append(weakref.ref(expiring.arguments))
    held.add(expiring, now=0)
    del expiring
    assert [p.call_id for p in held.listed(0)] == ["p3", "p4", "soon"]
    held.sweep(10)  # expired: dropped, its heap entry keeps nothing alive
    held.approved("c", "p3", "t", "fp")
    held.discard(("c", "p4"))
    gc.collect()
    assert len(held) == 0 and held.bytes == 0
    assert [r() for r in refs] == [None] * 6


def test_the_byte_budget_drops_the_oldest() -> None:
    held = HeldCalls(max_bytes=100)
    for i in range(5):
        held.add(item(f"c{i}", "p", expires_at=100, size=30), now=0)
    assert [p.context_ref for p in held.listed(0)] == ["c2", "c3", "c4"] and held.bytes == 90
    held.add(item("big", "p", expires_at=100, size=MAX_ONE_BYTES + 1), now=0)
    assert held.get("big", "p") is None  # larger than any budget: never held


def test_the_expiry_heap_stays_bounded() -> None:
    held = HeldCalls()
    for i in range(5_000):
        held.add(item("c", "same", expires_at=10_000 + i), now=i)  # one call, asked again
    assert len(held) == 1 and len(held._due) <= 2 * len(held) + 65
    held.discard_tool("c", "other")
    assert len(held) == 1
    held.discard_tool("c", "t")
    assert len(held) == 0


# ------------------------------------------------------------------ held arguments' memory


def many_empty_objects(size: int) -> bytes:
    """``[{},{},...]`` of ``size`` bytes or one less: the JSON that decodes to the most
    Python objects per byte (a 1 MiB one is some 25 MB of dicts)."""
    return b"[" + b",".join([b"{}"] * ((size - 1) // 3)) + b"]"


def decision_for(call_id: str) -> Decision:
    return Decision(
        outcome="DENY",
        reason="APPROVAL_REQUIRED",
        tool="propose-change",
        call_id=call_id,
        fingerprint="f" * 64,
        approval_required=True,
    )


def test_held_arguments_are_their_encoding_and_the_budget_is_exact() -> None:
    budget = 1 << 20  # small sizes keep the test quick under tracemalloc
    held = HeldCalls(max_bytes=budget, per_credential_bytes=budget)
    encoded = many_empty_objects(64 << 10)
    count = (len(encoded) - 1) // 3
    gc.collect()
    tracemalloc.start()
    try:
        before = tracemalloc.get_traced_memory()[0]
        for i in range(48):  # three times the budget asked; the oldest are dropped
            arguments = [{} for _ in range(count)]  # what the wire decodes: ~1.6 MB of objects
            call = Call(tool="propose-change", call_id=f"p{i}", arguments=arguments)
            item = waiting("ctx", call, decision_for(f"p{i}"), 0, 10_000)
            assert item is not None
            held.add(item, now=0, owner="app")
            del arguments, call, item
        gc.collect()
        grown = tracemalloc.get_traced_memory()[0] - before
    finally:
        tracemalloc.stop()
    assert held.bytes == sum(p.size for p in held.listed(0)) <= budget
    assert len(held) == budget // len(encoded) and held.held_by("app") == (len(held), held.bytes)
    first = held.listed(0)[0]
    assert isinstance(first.arguments, bytes) and first.size == len(first.arguments)
    assert first.arguments == encoded and arguments_of(first) == loads(encoded)
    assert grown < budget + (64 << 10), grown  # the bytes held, and a little bookkeeping


def test_the_pending_list_says_when_a_call_stops_being_approvable() -> None:
    call = Call(tool="propose-change", call_id="p1", arguments={"a": [1.5, "x", None]})
    now = 1_800_000_000_000
    soon = waiting("ctx", call, decision_for("p1"), now, now + 15 * 60_000)
    late = waiting("ctx", call, decision_for("p1"), now, now + 60_000)
    assert soon is not None and late is not None
    listed = events.pending_call(soon, {})
    assert listed["arguments"] == {"a": [1.5, "x", None]}
    assert listed["requestedAt"] == events.iso(now)
    assert listed["expiresAt"] == events.iso(now + 5 * 60_000)  # the approval window
    assert listed["contextExpiresAt"] == events.iso(now + 15 * 60_000)
    assert events.pending_call(late, {})["expiresAt"] == events.iso(now + 60_000)  # the context's


# ------------------------------------------------------------------ per-credential quotas


def test_one_owner_over_its_quota_drops_only_its_own_calls() -> None:
    held = HeldCalls(per_credential=10)
    for i in range(5):
        held.add(item(f"victim-{i}", "p", expires_at=100), now=0, owner="victim")
    for i in range(50):
        held.add(item(f"attacker-{i}", "p", expires_at=100), now=0, owner="attacker")
    assert held.held_by("victim") == (5, 50) and held.held_by("attacker") == (10, 100)
    assert [p.context_ref for p in held.listed(0)] == [f"victim-{i}" for i in range(5)] + [
        f"attacker-{i}" for i in range(40, 50)
    ]
    assert held.owner_of("victim-0", "p") == "victim"


def test_one_owner_over_its_byte_quota_drops_only_its_own_calls() -> None:
    held = HeldCalls(per_credential_bytes=100)
    held.add(item("victim", "p", expires_at=100, size=90), now=0, owner="victim")
    for i in range(20):
        held.add(item(f"attacker-{i}", "p", expires_at=100, size=30), now=0, owner="attacker")
    assert held.held_by("victim") == (1, 90) and held.held_by("attacker") == (3, 90)
    held.add(item("huge", "p", expires_at=100, size=101), now=0, owner="attacker")
    assert held.get("huge", "p") is None and held.held_by("attacker") == (3, 90)


def test_the_bounds_in_all_drop_the_oldest_of_the_owner_holding_the_most() -> None:
    held = HeldCalls(in_all=20)
    for i in range(5):
        held.add(item(f"victim-{i}", "p", expires_at=100), now=0, owner="victim")
    for i in range(50):
        held.add(item(f"attacker-{i}", "p", expires_at=100), now=0, owner="attacker")
    assert held.held_by("victim") == (5, 50) and held.held_by("attacker") == (15, 150)
    by_bytes = HeldCalls(max_bytes=200)
    by_bytes.add(item("victim", "p", expires_at=100, size=60), now=0, owner="victim")
    for i in range(10):
        by_bytes.add(item(f"attacker-{i}", "p", expires_at=100, size=30), now=0, owner="b")
    assert by_bytes.held_by("victim") == (1, 60) and by_bytes.held_by("b") == (4, 120)
    assert by_bytes.bytes == 180


def test_a_full_owned_map_drops_its_owner_s_oldest_without_a_scan() -> None:
    owned: Owned[int, int] = Owned()
    looked = [0]

    def finished(expiry: int) -> bool:
        looked[0] += 1
        return expiry <= 0

    for i in range(3):
        owned.admit(-i - 1, 1, owner="victim", limit=10_000, per_owner=1_000, finished=finished)
    for i in range(20_000):  # the attacker's live entries, its quota long full
        owned.admit(i, 1, owner="attacker", limit=10_000, per_owner=1_000, finished=finished)
    assert [k for k in owned if owned.owner_of(k) == "victim"] == [-1, -2, -3]
    assert owned.held_by("attacker") == 1_000 and list(owned)[-1] == 19_999
    assert looked[0] <= 3 * 20_003  # a few looks per insertion, never one per entry

    # the bound in all, a last resort: the owner holding the most loses its oldest
    for base, owner in ((100_000, "a"), (200_000, "b")):
        for i in range(base, base + 6):
            owned.admit(i, 1, owner=owner, limit=1_010, per_owner=1_000, finished=finished)
    assert owned.held_by("victim") == 3 and owned.held_by("a") == 6 and owned.held_by("b") == 6
    assert owned.held_by("attacker") == 1_010 - 15 and len(owned) == 1_010

    # finished entries go first, from the oldest end
    expired: Owned[str, int] = Owned()
    for i in range(5):
        expired.admit(f"e{i}", 0, owner="x", limit=10, per_owner=10, finished=finished)
    expired.admit("live", 1, owner="y", limit=10, per_owner=10, finished=finished)
    assert list(expired) == ["live"]


def test_held_bytes_that_do_not_decode_are_dropped_not_listed() -> None:
    held = HeldCalls()
    good = waiting("ctx", Call(tool="t", call_id="ok", arguments=[1]), decision_for("ok"), 0, 99)
    assert good is not None
    held.add(good, now=0)
    held.add(replace(good, call_id="bad", arguments=b'{"a":1,"a":2}'), now=0)
    listed = events.pending_page(held, 0, lambda _ref: {}, Page())  # no exception
    assert [loads(p)["callId"] for p in listed.items] == ["ok"]
    assert held.get("ctx", "bad") is None and len(held) == 1
