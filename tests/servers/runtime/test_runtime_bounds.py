"""Bounded runtime memory and what reaches the disk (issue 10), against a real runtime and the
synthetic executor on loopback, time through the injected clock.

- Pending approvals: at most 32 per context and 10,000 in all (the oldest dropped), dropped on
  expiry by time (at an insertion, a listing or the periodic sweep, whichever comes first), and
  their arguments forgotten once approved, dispatched, expired or dropped; each listed with the
  time it stops being approvable.
- Turns: expired and completed ones dropped, at most ``MAX_TURNS`` in all.
- Quotas per credential: one application filling its share of turns or of pending calls drops
  only its own, never another application's (two credentials on one runtime).
- Argument keys and reported names: bounded, and an unknown key's text never on disk.
"""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import cbor2
import pytest
from jsonschema import Draft202012Validator, FormatChecker

from servers.http.app import RUNTIME
from servers.log.decision_log import read_records
from servers.runtime import held as held_module
from servers.runtime import turns as turns_module
from servers.runtime.events import iso
from servers.runtime.held import HeldCalls
from servers.runtime.service import Runtime
from servers.store.memory import MemoryTurns
from servers.store.rows import TurnRow
from servers.support import bounded
from tests.support.runtime_harness import (
    APPROVAL,
    OTHER_APP_TOKEN,
    PROPOSAL,
    READ_ARGS,
    READER_TOKEN,
    FakeClock,
    RuntimeScenario,
    Stack,
    run_async,
    run_on_fake_clock,
    running_stack,
)

MINUTE = 60_000
APPROVAL_TTL = 5 * MINUTE
CONTEXT_TTL = 15 * MINUTE
KEY_SENTINEL = "unknown-key-sentinel-5c1e9a7b"
NAME_SENTINEL = "reported-name-sentinel-2d8f6b0c"


def proposal(i: int) -> dict[str, Any]:
    return {**PROPOSAL, "summary": f"proposal number {i}"}


async def ask(s: Stack, ctx: str, call_id: str, arguments: dict[str, Any]) -> None:
    asked = await s.execute(ctx, "propose-change", call_id, arguments)
    assert asked["reason"] == "APPROVAL_REQUIRED", asked


async def listed(s: Stack) -> list[dict[str, Any]]:
    reply = await s.call("GET", "/v1/context/tools/pending", headers=APPROVAL)
    assert reply.status == 200
    found: list[dict[str, Any]] = reply.body["pending"]
    return found


# ------------------------------------------------------------------ pending approvals


def test_pending_calls_per_context_keep_the_newest_32(tmp_path: Path) -> None:
    async def scenario(s: Stack, runtime: Runtime, clock: FakeClock) -> None:
        ctx = (await s.resolve())["contextRef"]
        other = (await s.resolve())["contextRef"]
        await ask(s, other, "o1", proposal(-1))
        for i in range(40):
            clock.advance(1)
            await ask(s, ctx, f"p{i}", proposal(i))
        assert len(runtime.held) == 33  # held in memory: 32 of ctx, 1 of the other
        calls = [(p["contextRef"], p["callId"]) for p in await listed(s)]
        assert calls == [(other, "o1")] + [(ctx, f"p{i}") for i in range(8, 40)]
        assert runtime.held.get(ctx, "p0") is None  # its arguments are gone
        # asking again lists a call again, as the newest
        await ask(s, ctx, "p8", proposal(8))
        assert [p["callId"] for p in await listed(s)][-1] == "p8"

        # dropped only from the list: an approval is by exact arguments, as before it was
        # ever listed, and the call dispatches once
        approval = await s.approval_id(ctx, "propose-change", "p0", proposal(0))
        done = await s.execute(ctx, "propose-change", "p0", proposal(0), approval)
        assert done["status"] == "SUCCEEDED"
        assert (await s.stats())["byCallId"] == {"p0": 1}
        # propose-change allows one call per context: the others can never run now
        assert [(p["contextRef"], p["callId"]) for p in await listed(s)] == [(other, "o1")]
        assert len(runtime.held) == 1

    run_on_fake_clock(tmp_path, scenario)


def test_pending_calls_in_all_drop_the_oldest(tmp_path: Path) -> None:
    async def scenario(s: Stack, runtime: Runtime, _clock: FakeClock) -> None:
        assert runtime.held.in_all == 10_000 and runtime.held.per_context == 32
        runtime.approvals.held = HeldCalls(in_all=30)  # the bound in all, made reachable
        first = (await s.resolve())["contextRef"]
        second = (await s.resolve())["contextRef"]
        for i in range(20):
            await ask(s, first, f"a{i}", proposal(i))
        for i in range(20):
            await ask(s, second, f"b{i}", proposal(i))
        calls = [p["callId"] for p in await listed(s)]
        assert calls == [f"a{i}" for i in range(10, 20)] + [f"b{i}" for i in range(20)]
        assert len(runtime.held) == 30

    run_on_fake_clock(tmp_path, scenario)


def test_pending_calls_expire_by_time_without_being_listed(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(held_module, "SWEEP_EVERY_S", 0.05)

    async def scenario(s: Stack, runtime: Runtime, clock: FakeClock) -> None:
        ctx = (await s.resolve())["contextRef"]
        await ask(s, ctx, "p1", proposal(1))
        clock.advance(APPROVAL_TTL - 1)
        await asyncio.sleep(0.2)  # sweeps run meanwhile: not yet expired
        assert runtime.held.get(ctx, "p1") is not None
        assert [p["callId"] for p in await listed(s)] == ["p1"]

        clock.advance(1)  # the approval window is over: the sweep drops it, unasked
        for _ in range(100):
            if len(runtime.held) == 0:
                break
            await asyncio.sleep(0.02)
        assert len(runtime.held) == 0 and runtime.held.bytes == 0

        # an insertion drops what expired too, sweep or no sweep
        runtime.held.stop_sweeping()
        await ask(s, ctx, "p2", proposal(2))
        runtime.held.stop_sweeping()
        clock.advance(APPROVAL_TTL)
        await ask(s, ctx, "p3", proposal(3))
        assert runtime.held.get(ctx, "p2") is None
        assert [p["callId"] for p in await listed(s)] == ["p3"]

    run_on_fake_clock(tmp_path, scenario)


def test_a_pending_call_expires_with_its_context(tmp_path: Path) -> None:
    async def scenario(s: Stack, runtime: Runtime, clock: FakeClock) -> None:
        ctx = (await s.resolve())["contextRef"]
        clock.advance(CONTEXT_TTL - MINUTE)
        await ask(s, ctx, "late", proposal(1))
        held = runtime.held.get(ctx, "late")
        assert held is not None and held.expires_at == clock.now + MINUTE
        clock.advance(MINUTE)
        assert await listed(s) == []
        assert len(runtime.held) == 0

    run_on_fake_clock(tmp_path, scenario)


def test_approving_or_dispatching_forgets_the_arguments(tmp_path: Path) -> None:
    async def scenario(s: Stack, runtime: Runtime, _clock: FakeClock) -> None:
        ctx = (await s.resolve())["contextRef"]
        await ask(s, ctx, "p1", proposal(1))
        other = await s.approve(ctx, "propose-change", "p1", proposal(2))
        assert other.status == 200
        assert runtime.held.get(ctx, "p1") is not None  # other arguments: still waiting
        approval = await s.approval_id(ctx, "propose-change", "p1", proposal(1))
        assert runtime.held.get(ctx, "p1") is None  # approved exactly: forgotten
        assert await listed(s) == []

        # a denial of the approved call's repeat holds it again; the dispatch forgets it
        invalid = await s.execute(
            ctx, "propose-change", "p1", proposal(1), other.body["approvalId"]
        )
        assert invalid["reason"] == "APPROVAL_INVALID"
        assert runtime.held.get(ctx, "p1") is not None
        done = await s.execute(ctx, "propose-change", "p1", proposal(1), approval)
        assert done["status"] == "SUCCEEDED"
        assert runtime.held.get(ctx, "p1") is None and runtime.held.bytes == 0

    run_on_fake_clock(tmp_path, scenario)


# ------------------------------------------------------------------ turns


def _memory(s: Stack) -> MemoryTurns:
    store = s.runtime_app[RUNTIME].turns.store
    assert isinstance(store, MemoryTurns)
    return store


def _turns(s: Stack) -> bounded.Owned[str, TurnRow]:
    """The turns one runtime keeps, oldest first (``held_by`` counts a credential's)."""
    return _memory(s).kept


def test_turns_are_pruned_and_bounded(tmp_path: Path) -> None:
    async def start(s: Stack) -> str:
        reply = await s.call("POST", "/v1/turns")
        assert reply.status == 200
        turn: str = reply.body["turnId"]
        return turn

    async def scenario(s: Stack, _runtime: Runtime, clock: FakeClock) -> None:
        turns = _turns(s)
        done = await start(s)
        complete = await s.call("POST", f"/v1/turns/{done}/complete", {"outcome": "COMPLETED"})
        assert complete.status == 200
        old = [await start(s) for _ in range(3)]
        assert done not in turns  # completed: dropped at the next start
        clock.advance(CONTEXT_TTL)  # the three expire
        fresh = await start(s)
        assert list(turns) == [fresh]

        _memory(s).limit = 4
        live = [await start(s) for _ in range(6)]
        assert list(turns) == live[-4:]  # the oldest live ones went first
        gone = await s.call(
            "POST", "/v1/context/resolve", {"objective": "learner", "turnId": live[0]}
        )
        assert gone.status == 403 and gone.body["error"]["code"] == "TURN_REQUIRED"
        kept = await s.call(
            "POST", "/v1/context/resolve", {"objective": "learner", "turnId": live[-1]}
        )
        assert kept.status == 200
        assert not set(old) & set(turns)

    run_on_fake_clock(tmp_path, scenario)


def test_the_pending_list_says_when_each_call_stops_being_approvable(tmp_path: Path) -> None:
    async def scenario(s: Stack, _runtime: Runtime, clock: FakeClock) -> None:
        ctx = (await s.resolve())["contextRef"]
        asked_at = clock.now
        await ask(s, ctx, "p1", proposal(1))
        reply = await s.call("GET", "/v1/context/tools/pending", headers=APPROVAL)
        served = (await s.call("GET", "/v1/openapi.json", headers={})).body
        declared = served["components"]["schemas"]["PendingList"]
        assert "expiresAt" in declared["properties"]["pending"]["items"]["required"]
        Draft202012Validator(declared, format_checker=FormatChecker()).validate(reply.body)
        [entry] = reply.body["pending"]
        assert entry["requestedAt"] == iso(asked_at)
        assert entry["expiresAt"] == iso(asked_at + APPROVAL_TTL)  # not the context's expiry
        assert entry["contextExpiresAt"] == iso(asked_at + CONTEXT_TTL)
        clock.advance(APPROVAL_TTL - 1)
        assert [p["callId"] for p in await listed(s)] == ["p1"]
        clock.advance(1)  # at expiresAt it leaves the list, the context still live
        assert await listed(s) == []

        clock.advance(CONTEXT_TTL - APPROVAL_TTL - MINUTE)  # a minute of the context left
        await ask(s, ctx, "late", proposal(2))
        [late] = await listed(s)
        assert late["expiresAt"] == late["contextExpiresAt"] == iso(asked_at + CONTEXT_TTL)

    run_on_fake_clock(tmp_path, scenario)


def test_the_runtime_s_pending_list_is_paged(tmp_path: Path) -> None:
    """One application filling its share made every listing carry all its calls (16 MiB); the
    runtime's list is paged as the approval server's: 50 calls by default, ``next`` to follow
    (null on the last page), ``limit`` 1..200 (else 400), a cursor that is none 400; and one
    call by ``contextRef`` and ``callId``, which is how the approval server finds what it
    decides."""

    async def scenario(s: Stack, _runtime: Runtime, clock: FakeClock) -> None:
        contexts = [(await s.resolve())["contextRef"] for _ in range(3)]
        for n in range(60):
            clock.advance(1)
            await ask(s, contexts[n % 3], f"p{n}", proposal(n))
        first = (await s.call("GET", "/v1/context/tools/pending", headers=APPROVAL)).body
        assert [p["callId"] for p in first["pending"]] == [f"p{n}" for n in range(50)]
        path = f"/v1/context/tools/pending?limit=200&after={first['next']}"
        rest = (await s.call("GET", path, headers=APPROVAL)).body
        assert [p["callId"] for p in rest["pending"]] == [f"p{n}" for n in range(50, 60)]
        assert rest["next"] is None
        for query in (
            *("limit=0", "limit=201", "limit=x", "after=zz", "after=", "contextRef=a"),
            *("contextRef=a&callId=b&after=c.1", f"contextRef=a&callId={'b' * 257}"),
        ):
            bad = await s.call("GET", f"/v1/context/tools/pending?{query}", headers=APPROVAL)
            assert (bad.status, bad.body["error"]["code"]) == (400, "BAD_REQUEST"), query
        one = f"/v1/context/tools/pending?contextRef={contexts[1]}&callId=p7"
        assert (await s.call("GET", one, headers=APPROVAL)).body == {
            "pending": [first["pending"][7]],
            "next": None,
        }
        none = (await s.call("GET", one + "0", headers=APPROVAL)).body
        assert none == {"pending": [], "next": None}
        earlier = "/v1/context/tools/pending?limit=1&after=0badc0de.59"  # another process's
        assert (await s.call("GET", earlier, headers=APPROVAL)).body["pending"] == [
            first["pending"][0]
        ]

    run_on_fake_clock(tmp_path, scenario)


# ------------------------------------------------------------------ quotas per credential

OTHER = {"Authorization": f"Bearer {OTHER_APP_TOKEN}"}
READER = {"Authorization": f"Bearer {READER_TOKEN}"}


def run_two_apps(root: Path, scenario: RuntimeScenario, *, require_turn: bool = False) -> None:
    """:func:`run_on_fake_clock` as ``other-app`` (``OTHER``) sees it: the harness's second
    application credential, beside ``tutor-app`` (the default) and ``reader``."""
    clock = FakeClock()

    async def on_stack() -> None:
        async with running_stack(root, clock=clock, require_turn=require_turn) as s:
            await scenario(s, s.runtime_app[RUNTIME], clock)

    run_async(on_stack())


async def start_turn(s: Stack, headers: dict[str, str] | None = None) -> str:
    reply = await s.call("POST", "/v1/turns", headers=headers)
    assert reply.status == 200, reply
    turn: str = reply.body["turnId"]
    return turn


async def resolve_in(s: Stack, turn: str, headers: dict[str, str] | None = None) -> int:
    """The status of a resolution in ``turn``."""
    body = {"objective": "learner", "turnId": turn}
    return (await s.call("POST", "/v1/context/resolve", body, headers=headers)).status


def test_one_credential_filling_its_turns_never_drops_another_s(tmp_path: Path) -> None:
    async def scenario(s: Stack, _runtime: Runtime, _clock: FakeClock) -> None:
        mine = await start_turn(s)
        readers = await start_turn(s, READER)
        # the attack as found: one credential starts 10,001 turns (the bound in all, and more)
        theirs = [await start_turn(s, OTHER) for _ in range(10_001)]
        assert await resolve_in(s, mine) == 200  # other applications' turns stay live
        assert await resolve_in(s, readers, READER) == 200
        assert await resolve_in(s, theirs[-1], OTHER) == 200
        assert await resolve_in(s, theirs[-1_001], OTHER) == 403  # its own oldest went
        assert await resolve_in(s, theirs[-1_000], OTHER) == 200
        turns = _turns(s)
        assert turns_module.MAX_TURNS_PER_CREDENTIAL == 1_000
        assert len(turns) == 1_002 and turns.held_by("other-app") == 1_000

    run_two_apps(tmp_path, scenario, require_turn=True)


def test_the_turns_in_all_drop_the_busiest_credential_s_oldest(tmp_path: Path) -> None:
    async def scenario(s: Stack, _runtime: Runtime, _clock: FakeClock) -> None:
        _memory(s).limit = 8  # the bound in all, made reachable
        mine = [await start_turn(s) for _ in range(2)]
        readers = [await start_turn(s, READER) for _ in range(2)]
        theirs = [await start_turn(s, OTHER) for _ in range(30)]
        assert [await resolve_in(s, t) for t in mine] == [200, 200]
        assert [await resolve_in(s, t, READER) for t in readers] == [200, 200]
        turns = _turns(s)
        assert len(turns) == 8 and turns.held_by("other-app") == 4
        assert set(mine + readers + theirs[-4:]) == set(turns)

    run_two_apps(tmp_path, scenario, require_turn=True)


async def ask_as(s: Stack, headers: dict[str, str], ctx: str, call_id: str, i: int) -> None:
    body = {
        "contextRef": ctx,
        "tool": "propose-change",
        "callId": call_id,
        "arguments": proposal(i),
    }
    reply = await s.call("POST", "/v1/context/tools/execute", body, headers=headers)
    assert reply.status == 200 and reply.body["reason"] == "APPROVAL_REQUIRED", reply


async def flood(s: Stack, contexts: int, per_context: int) -> list[tuple[str, str]]:
    """``other-app`` asks for approvals over contexts of its own: the calls, oldest first."""
    asked = []
    for _ in range(contexts):
        ctx = (
            await s.call("POST", "/v1/context/resolve", {"objective": "authoring"}, headers=OTHER)
        ).body["contextRef"]
        for j in range(per_context):
            await ask_as(s, OTHER, ctx, f"x{j}", j)
            asked.append((ctx, f"x{j}"))
    return asked


def test_one_credential_filling_its_pending_quota_never_drops_another_s(tmp_path: Path) -> None:
    async def scenario(s: Stack, runtime: Runtime, _clock: FakeClock) -> None:
        assert runtime.held.per_credential == 1_000
        runtime.approvals.held = HeldCalls(per_credential=10)  # the quota, made reachable
        ctx = (await s.resolve())["contextRef"]
        for i in range(3):
            await ask(s, ctx, f"p{i}", proposal(i))
        theirs = await flood(s, contexts=15, per_context=2)
        calls = [(p["contextRef"], p["callId"]) for p in await listed(s)]
        assert calls == [(ctx, f"p{i}") for i in range(3)] + theirs[-10:]
        assert runtime.held.held_by("tutor-app")[0] == 3
        assert runtime.held.held_by("other-app")[0] == 10

    run_two_apps(tmp_path, scenario)


def test_the_pending_bounds_in_all_drop_the_busiest_credential_s_oldest(tmp_path: Path) -> None:
    async def scenario(s: Stack, runtime: Runtime, _clock: FakeClock) -> None:
        runtime.approvals.held = HeldCalls(in_all=12)  # the bound in all, made reachable
        ctx = (await s.resolve())["contextRef"]
        for i in range(3):
            await ask(s, ctx, f"p{i}", proposal(i))
        theirs = await flood(s, contexts=10, per_context=2)
        calls = [(p["contextRef"], p["callId"]) for p in await listed(s)]
        assert calls == [(ctx, f"p{i}") for i in range(3)] + theirs[-9:]

    run_two_apps(tmp_path, scenario)


# ------------------------------------------------------------------ what reaches the disk


def data_files(s: Stack) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in s.config.data.rglob("*") if p.is_file()}


def assert_nowhere(s: Stack, text: str) -> None:
    raw = text.encode()
    for name, data in data_files(s).items():
        assert raw not in data and raw.hex().encode() not in data, name
        assert text.encode("utf-16-le") not in data, name


def records_of(s: Stack, event: str) -> list[tuple[dict[str, Any], int]]:
    """The records of ``event`` with the size of each one's encoding."""
    found = []
    for record in read_records(s.config.data / "decisions.cbor"):
        if record["event"] == event:
            found.append((record, len(cbor2.dumps(record, canonical=True))))
    return found


def test_an_unknown_argument_key_never_reaches_the_disk(tmp_path: Path) -> None:
    huge = KEY_SENTINEL + "k" * 300_000

    async def scenario(s: Stack, _runtime: Runtime, _clock: FakeClock) -> None:
        ctx = (await s.resolve(objective="learner"))["contextRef"]
        one = await s.execute(ctx, "inspect-context", "c1", {**READ_ARGS, huge: 1})
        assert one["reason"] == "ARGUMENTS_INVALID"
        assert huge in str(one["decision"])  # the caller is told, the disk is not
        nested = {
            "query": "median",
            "limit": 2,
            "filters": {"tags": [{"key": "k", "value": "v", KEY_SENTINEL: {"x": 1}}]},
        }
        two = await s.execute(ctx, "search-knowledge", "s1", nested)
        assert two["reason"] == "ARGUMENTS_INVALID"
        many = {**READ_ARGS, **{f"{KEY_SENTINEL}-{i}": i for i in range(1000)}}
        three = await s.execute(ctx, "inspect-context", "c2", many)
        assert three["reason"] == "ARGUMENTS_INVALID"
        assert len(three["decision"]["errors"]) == 1000

        denied = {r["callId"]: (r, size) for r, size in records_of(s, "DENIED")}
        record, size = denied["c1"]
        assert size < 2_000
        [error] = record["errors"]
        assert error["keyword"] == "additionalProperties"
        assert error["pointer"].startswith("/…key:") and len(error["pointer"]) == 22
        [inner] = denied["s1"][0]["errors"]
        assert inner["pointer"].startswith("/filters/tags/0/…key:")
        record, size = denied["c2"]
        assert len(record["errors"]) == 64 and record["errorsOmitted"] == 936
        assert size < 8_000
        assert len({e["pointer"] for e in record["errors"]}) == 64  # distinct keys, distinct
        assert (s.config.data / "decisions.cbor").stat().st_size < 30_000
        assert_nowhere(s, KEY_SENTINEL)

    run_on_fake_clock(tmp_path, scenario)


def test_long_reported_names_are_shortened_and_counted(tmp_path: Path) -> None:
    long_name = NAME_SENTINEL + "n" * 300_000

    async def scenario(s: Stack, _runtime: Runtime, _clock: FakeClock) -> None:
        ctx = (await s.resolve(objective="learner"))["contextRef"]
        names = ["inspect_context", long_name, *(f"tool_{i}" for i in range(200))]
        reply = await s.call(
            "POST",
            "/v1/context/disclosures",
            {"contextRef": ctx, "tools": [*names, "inspect_context"]},
        )
        assert reply.status == 202
        [(record, size)] = records_of(s, "REPORTED")
        assert size < 8_000
        assert record["tools"][0] == "inspect_context"
        assert record["tools"][1] == long_name[:64] + f"…(+{len(long_name) - 64})"
        assert len(record["tools"]) == 64 and record["toolsOmitted"] == len(names) - 64
        assert len(record["undisclosed"]) == 64
        assert record["undisclosedOmitted"] == len(names) - 1 - 64
        assert (s.config.data / "decisions.cbor").stat().st_size < 30_000
        assert_nowhere(s, long_name[:100])

    run_on_fake_clock(tmp_path, scenario)
