"""The runtime's one cache helper (``servers.support.memo``: least recently used dropped
first), caches keyed on what their values depend on (never a ``traceId``), and the pending
calls' structure on its own (bounds, and arguments released once dropped)."""

from __future__ import annotations

import gc
import weakref
from pathlib import Path
from typing import Any

import pytest
from runtime_harness import FakeClock, Stack, run_on_fake_clock

from policy.canonical import canonical_cbor
from servers.runtime import events
from servers.runtime.pending import MAX_ONE_BYTES, PendingCalls
from servers.runtime.redact import error_pointer, key_token, names_field, shortened
from servers.runtime.service import Runtime
from servers.runtime.values import Pending
from servers.support import memo


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
        assert len(runtime._resolved) == 1
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


def item(ctx: str, call: str, expires_at: int, size: int = 10, tool: str = "t") -> Pending:
    return Pending(ctx, tool, call, Args(v=call), "APPROVAL_REQUIRED", 0, "fp", expires_at, 0, size)


def test_dropped_calls_release_their_arguments() -> None:
    held = PendingCalls(per_context=2, in_all=3)
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
    held = PendingCalls(max_bytes=100)
    for i in range(5):
        held.add(item(f"c{i}", "p", expires_at=100, size=30), now=0)
    assert [p.context_ref for p in held.listed(0)] == ["c2", "c3", "c4"] and held.bytes == 90
    held.add(item("big", "p", expires_at=100, size=MAX_ONE_BYTES + 1), now=0)
    assert held.get("big", "p") is None  # larger than any budget: never held


def test_the_expiry_heap_stays_bounded() -> None:
    held = PendingCalls()
    for i in range(5_000):
        held.add(item("c", "same", expires_at=10_000 + i), now=i)  # one call, asked again
    assert len(held) == 1 and len(held._due) <= 2 * len(held) + 65
    held.discard_tool("c", "other")
    assert len(held) == 1
    held.discard_tool("c", "t")
    assert len(held) == 0
