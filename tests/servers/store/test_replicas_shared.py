"""What replicas share besides dispatches: the calls held for approval (their arguments sealed
in the database), how each wait ended, and turns; and what a client sends that PostgreSQL
cannot store is refused, never a 500.

Two runtimes (``tests/servers/store/test_replicas.py``'s ``replicas``) on one fresh database
(``pg_url``)."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import blake3
import psycopg
import pytest

from policy.engine.state import APPROVAL_TTL_MS
from servers.config.files import TRACE_KEY_CONTEXT
from servers.mcp.app import McpOptions
from servers.store.postgres.held import HeldTable
from servers.store.postgres.sealing import Sealer
from servers.store.postgres.store import PgStore
from servers.store.rows import StoreError, StoreUnanswered
from tests.servers.store.test_replicas import TRACE_ENV, replicas
from tests.support.mcp_support import call_meta, mcp_client, receipt_of
from tests.support.runtime_harness import (
    APPROVAL,
    BEARER,
    PROPOSAL,
    READ_ARGS,
    FakeClock,
    Stack,
    run_async,
)

MARKER = "held-marker-5d1c9e"
ASKED = {**PROPOSAL, "summary": f"fix the typo {MARKER}"}
APPROVER = {**APPROVAL, "x-seif-approver": "ops-ana"}


async def _ask(s: Stack, call_id: str = "p1") -> str:
    ctx: str = (await s.resolve())["contextRef"]
    asked = await s.execute(ctx, "propose-change", call_id, ASKED)
    assert (asked["status"], asked["reason"]) == ("DENIED", "APPROVAL_REQUIRED"), asked
    return ctx


async def _pending(s: Stack) -> list[dict[str, Any]]:
    listed = await s.call("GET", "/v1/context/tools/pending", headers=APPROVAL)
    assert listed.status == 200, listed
    found: list[dict[str, Any]] = listed.body["pending"]
    return found


async def _status(s: Stack, ctx: str, call_id: str = "p1") -> str:
    reply = await s.call("GET", f"/v1/context/tools/approvals/{ctx}/{call_id}")
    assert reply.status == 200, reply
    state: str = reply.body["state"]
    return state


def _held_rows(url: str) -> list[tuple[Any, ...]]:
    with psycopg.connect(url) as conn:
        sql = "SELECT context_ref, call_id, tool, fingerprint, sealed FROM held_calls"
        return conn.execute(sql).fetchall()


def test_a_call_held_on_one_replica_is_listed_approved_and_run_through_another(
    tmp_path: Path, pg_url: str
) -> None:
    async def scenario() -> None:
        async with replicas(tmp_path, pg_url) as (a, b):
            ctx = await _ask(a)
            [listed] = await _pending(b)  # held by a, listed by b with its exact arguments
            assert (listed["contextRef"], listed["callId"]) == (ctx, "p1")
            assert listed["arguments"] == ASKED
            assert await _status(b, ctx) == "PENDING"
            approval = await b.approval_id(ctx, "propose-change", "p1", ASKED)
            assert await _status(a, ctx) == "APPROVED"
            assert await _pending(a) == [] and _held_rows(pg_url) == []  # approved: forgotten
            done = await a.execute(ctx, "propose-change", "p1", ASKED, approval)
            assert done["status"] == "SUCCEEDED"
            assert await _status(b, ctx) == "NONE"

    run_async(scenario())


def test_a_rejection_through_one_replica_holds_on_every_replica(
    tmp_path: Path, pg_url: str
) -> None:
    async def scenario() -> None:
        async with replicas(tmp_path, pg_url) as (a, b):
            ctx = await _ask(a)
            body = {"contextRef": ctx, "tool": "propose-change", "callId": "p1",
                    "arguments": ASKED, "reason": "not this one"}  # fmt: skip
            rejected = await b.call("POST", "/v1/context/tools/reject", body, headers=APPROVER)
            assert rejected.status == 200, rejected
            assert await _status(a, ctx) == "REJECTED"
            assert await _pending(a) == [] and await _pending(b) == []
            again = await a.execute(ctx, "propose-change", "p1", ASKED)
            assert again["reason"] == "APPROVAL_REQUIRED"
            assert await _pending(b) == []  # rejected: never held again, on any replica
            refused = await a.approve(ctx, "propose-change", "p1", ASKED)
            assert (refused.status, refused.body["error"]["code"]) == (409, "CALL_REJECTED")
            twice = await a.call("POST", "/v1/context/tools/reject", body, headers=APPROVER)
            assert twice.status == 409

    run_async(scenario())


def test_the_pending_list_paged_through_both_replicas_lists_each_call_once(
    tmp_path: Path, pg_url: str
) -> None:
    """Calls held by two replicas, listed a page at a time through one replica then the other
    (a load balancer's doing), while calls are approved and asked meanwhile: every call held
    all along is listed once, the newly asked last; one call is found by its contextRef and
    callId through either replica; a cursor that is none is 400."""

    async def scenario() -> None:
        async with replicas(tmp_path, pg_url) as (a, b):
            for n in range(12):
                await _ask((a, b)[n % 2], f"p{n}")
            everything = await _pending(a)
            assert len(everything) == 12
            seen: list[str] = []
            query, turn = "?limit=5", 0
            while query:
                page = await (a, b)[turn % 2].call(
                    "GET", "/v1/context/tools/pending" + query, headers=APPROVAL
                )
                assert page.status == 200, page
                seen += [f"{p['contextRef']}/{p['callId']}" for p in page.body["pending"]]
                if turn == 0:  # one not listed yet approved, and one more asked
                    last = everything[-1]
                    await b.approval_id(last["contextRef"], "propose-change", last["callId"], ASKED)
                    await _ask(a, "late")
                after, turn = page.body["next"], turn + 1
                query = f"?limit=5&after={after}" if after else ""
            expected = [f"{p['contextRef']}/{p['callId']}" for p in everything[:-1]]
            assert seen[:-1] == expected and seen[-1].endswith("/late")
            one = everything[3]
            found = f"?contextRef={one['contextRef']}&callId={one['callId']}"
            for replica in (a, b):
                listed = await replica.call(
                    "GET", "/v1/context/tools/pending" + found, headers=APPROVAL
                )
                assert listed.body == {"pending": [one], "next": None}
            for bad in ("e30", "not-base64!", "0badc0de.3"):  # {}, not a cursor, the memory's
                refused = await b.call(
                    "GET", f"/v1/context/tools/pending?after={bad}", headers=APPROVAL
                )
                assert (refused.status, refused.body["error"]["code"]) == (400, "BAD_REQUEST")

    run_async(scenario())


def test_held_arguments_are_sealed_and_a_tampered_row_is_never_listed(
    tmp_path: Path, pg_url: str
) -> None:
    async def scenario() -> None:
        async with replicas(tmp_path, pg_url) as (a, b):
            ctx = await _ask(a)
            [(ref, call_id, tool, fingerprint, sealed)] = _held_rows(pg_url)
            assert MARKER.encode() not in bytes(sealed) and b"fix the typo" not in bytes(sealed)
            secret = TRACE_ENV["CONTEXT_TOOL_TRACE_KEY"].encode()
            key = blake3.blake3(secret, derive_key_context=TRACE_KEY_CONTEXT).digest()
            opened = Sealer(key).open(bytes(sealed), (ref, call_id, tool, fingerprint))
            assert MARKER.encode() in opened  # sealed with the key derived from the trace key
            with psycopg.connect(pg_url) as conn:  # one bit flipped: it no longer opens
                conn.execute("UPDATE held_calls SET sealed = overlay(sealed placing"
                             " decode('ff', 'hex') from 20 for 1)")  # fmt: skip
            assert await _pending(b) == []
            assert await _status(b, ctx) == "NONE"  # held by a only: b cannot open it

    run_async(scenario())


def test_a_turn_started_on_one_replica_is_live_and_completed_once_on_all(
    tmp_path: Path, pg_url: str
) -> None:
    async def scenario() -> None:
        async with replicas(tmp_path, pg_url, require_turn=True) as (a, b):
            started = await a.call("POST", "/v1/turns")
            assert started.status == 200
            turn = started.body["turnId"]
            resolved = await b.call("POST", "/v1/context/resolve",
                                    {"objective": "authoring", "turnId": turn})  # fmt: skip
            assert resolved.status == 200, resolved
            done = await b.call("POST", f"/v1/turns/{turn}/complete", {"outcome": "COMPLETED"})
            assert done.status == 200
            twice = await a.call("POST", f"/v1/turns/{turn}/complete", {"outcome": "FAILED"})
            assert (twice.status, twice.body["error"]["code"]) == (409, "TURN_COMPLETED")
            after = await a.call("POST", "/v1/context/resolve",
                                 {"objective": "authoring", "turnId": turn})  # fmt: skip
            assert (after.status, after.body["error"]["code"]) == (403, "TURN_REQUIRED")

    run_async(scenario())


def test_text_postgresql_cannot_store_is_refused_never_a_500(tmp_path: Path, pg_url: str) -> None:
    """A NUL (which PostgreSQL text cannot hold) in a name a client sends: 400 at the boundary
    in a body, no such thing in a path; a lone surrogate is not JSON (400)."""

    async def scenario() -> None:
        async with replicas(tmp_path, pg_url, count=1) as (a,):
            ctx: str = (await a.resolve())["contextRef"]
            for bad in (r"a\u0000b", r"\ud800"):
                raw = f'{{"contextRef": "{ctx}", "tool": "propose-change", "callId": "{bad}",'
                for path, more in (("execute", ""), ("approve", '"reason": "x", ')):
                    body = f'{raw} {more}"arguments": {{}}}}'.encode()
                    reply = await a.call("POST", f"/v1/context/tools/{path}", raw=body,
                                         headers=APPROVAL if more else BEARER)  # fmt: skip
                    assert (reply.status, reply.body["error"]["code"]) == (400, "BAD_REQUEST")
            expected = {
                f"/v1/context/tools/approvals/{ctx}/a%00b": 200,  # state NONE: no such call
                f"/v1/context/tools/approvals/{ctx}/%ED%A0%80": 200,
                "/v1/context/tools/approvals/a%00b/p1": 404,
                "/v1/traces/a%00b": 404,
            }
            for path, status in expected.items():
                reply = await a.call("GET", path)
                assert reply.status == status, (path, reply)
                assert status == 404 or reply.body == {"state": "NONE"}
            done = await a.call("POST", "/v1/turns/a%00b/complete", {"outcome": "COMPLETED"})
            assert (done.status, done.body["error"]["code"]) == (404, "TURN_UNKNOWN")

    run_async(scenario())


def test_a_store_that_went_away_is_503_then_served_again(tmp_path: Path, pg_url: str) -> None:
    """Every connection of the database cut by the server: a request answers 503
    ``STORE_UNAVAILABLE`` (or is served on a new connection), never a 500; the next is served."""

    async def scenario() -> None:
        async with replicas(tmp_path, pg_url, count=1) as (a,):
            ctx = await _ask(a)
            with psycopg.connect(pg_url, autocommit=True) as conn:
                cut = conn.execute(
                    "SELECT pg_terminate_backend(pid) FROM pg_stat_activity"
                    " WHERE datname = current_database() AND pid <> pg_backend_pid()"
                ).fetchall()
            assert cut  # the replica's connections
            first = await a.call("GET", f"/v1/context/tools/approvals/{ctx}/p1")
            assert first.status in (200, 503), first
            if first.status == 503:
                assert first.body["error"]["code"] == "STORE_UNAVAILABLE"
            again = await a.call("GET", f"/v1/context/tools/approvals/{ctx}/p1")
            assert (again.status, again.body["state"]) == (200, "PENDING")
            body = {"contextRef": ctx, "tool": "propose-change", "callId": "p2", "arguments": ASKED}
            write = await a.call("POST", "/v1/context/tools/execute", body)  # on the pool
            assert write.status in (200, 503), write
            write = await a.call("POST", "/v1/context/tools/execute", body)  # on the pool
            assert (write.status, write.body["reason"]) == (200, "APPROVAL_REQUIRED")

    run_async(scenario())


def test_an_approve_and_a_reject_of_one_call_on_two_replicas_decide_once(
    tmp_path: Path, pg_url: str
) -> None:
    async def scenario() -> None:
        async with replicas(tmp_path, pg_url) as (a, b):
            for n in range(5):
                call_id = f"p{n}"
                ctx = await _ask(a, call_id)
                body = {"contextRef": ctx, "tool": "propose-change", "callId": call_id,
                        "arguments": ASKED, "reason": "no"}  # fmt: skip
                approved, rejected = await asyncio.gather(
                    a.approve(ctx, "propose-change", call_id, ASKED),
                    b.call("POST", "/v1/context/tools/reject", body, headers=APPROVER),
                )
                assert sorted([approved.status, rejected.status]) == [200, 409], (n, approved)
                state = await _status(b, ctx, call_id)
                assert state == ("APPROVED" if approved.status == 200 else "REJECTED")

    run_async(scenario())


def test_a_duplicate_on_another_replica_waits_for_the_call_to_end(
    tmp_path: Path, pg_url: str
) -> None:
    async def scenario() -> None:
        async with replicas(tmp_path, pg_url) as (a, b):
            a.set_knobs("inspect-context", delay_ms=600)
            ctx: str = (await a.resolve())["contextRef"]
            first = asyncio.ensure_future(a.execute(ctx, "inspect-context", "c1", READ_ARGS))
            await asyncio.sleep(0.3)  # running on a
            again = await b.execute(ctx, "inspect-context", "c1", READ_ARGS)
            assert (again["status"], again["duplicate"]) == ("SUCCEEDED", True), again
            assert (await first)["status"] == "SUCCEEDED"
            assert (await a.stats())["executions"] == {"inspect-context": 1}

    run_async(scenario())


def test_a_named_mcp_call_id_sent_through_two_replicas_at_once_runs_once(
    tmp_path: Path, pg_url: str
) -> None:
    """Two sessions (two contexts: other coordinates) on two replicas retry one
    ``io.seif/callId`` at the same moment: the requests of it are served one at a time across
    replicas, so it runs once and the other answer is its duplicate."""

    async def scenario() -> None:
        async with replicas(tmp_path, pg_url, mcp=McpOptions(approval_wait_s=1.0)) as (a, b):
            a.set_knobs("inspect-context", delay_ms=300)
            on_a = mcp_client(a.runtime, "authoring", mode="auto", consumer="course-authoring")
            on_b = mcp_client(b.runtime, "authoring", mode="auto", consumer="course-authoring",
                              deployment="elsewhere")  # fmt: skip
            async with on_a as first, on_b as second:
                for n in range(3):
                    meta = call_meta(f"named-{n}")
                    results = await asyncio.gather(
                        first.call_tool("inspect_context", READ_ARGS, meta=meta),
                        second.call_tool("inspect_context", READ_ARGS, meta=meta),
                    )
                    receipts = [receipt_of(r) if r.is_error else {} for r in results]
                    duplicates = sorted(bool(r.get("duplicate")) for r in receipts)
                    assert duplicates == [False, True], receipts
            assert (await a.stats())["executions"] == {"inspect-context": 3}

    run_async(scenario())


def test_a_call_decided_on_another_replica_holds_up_no_other_call(
    tmp_path: Path, pg_url: str
) -> None:
    """One call's decision lock held elsewhere (a replica stalled mid-decision, say): an
    approve of another call is not held up; one of that call waits, then is 503."""

    async def scenario() -> None:
        async with replicas(tmp_path, pg_url) as (a, b):
            ctx = await _ask(a, "p1")
            await a.execute(ctx, "propose-change", "p2", ASKED)
            name = json.dumps(["decide", ctx, "p1"])
            async with b.prepared.backend.exclusive(name):
                other = await asyncio.wait_for(
                    a.approve(ctx, "propose-change", "p2", ASKED), timeout=5
                )
                assert other.status == 200, other
                same = await a.approve(ctx, "propose-change", "p1", ASKED)
                assert (same.status, same.body["error"]["code"]) == (503, "STORE_UNAVAILABLE")
            assert (await a.approve(ctx, "propose-change", "p1", ASKED)).status == 200

    run_async(scenario())


def test_a_call_claimed_runs_even_when_forgetting_its_hold_fails(
    tmp_path: Path, pg_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The claim committed, then the store fails to forget the call's hold: the call still
    runs once (a 503 there would leave its intent PENDING for good, and every repeat IN_FLIGHT)."""

    def failing(*_args: object) -> None:
        raise StoreError("the store did not answer")

    async def scenario() -> None:
        async with replicas(tmp_path, pg_url, count=1) as (a,):
            ctx = await _ask(a)
            approval = await a.approval_id(ctx, "propose-change", "p1", ASKED)
            monkeypatch.setattr(HeldTable, "drop", failing)
            done = await a.execute(ctx, "propose-change", "p1", ASKED, approval)
            assert done["status"] == "SUCCEEDED", done
            again = await a.execute(ctx, "propose-change", "p1", ASKED, approval)
            assert (again["status"], again["duplicate"]) == ("SUCCEEDED", True)

    run_async(scenario())


def test_staggered_repeats_through_another_replica_all_have_the_original_s_status(
    tmp_path: Path, pg_url: str
) -> None:
    async def scenario() -> None:
        async with replicas(tmp_path, pg_url) as (a, b):
            a.set_knobs("inspect-context", delay_ms=800)
            ctx: str = (await a.resolve())["contextRef"]
            await b.execute(ctx, "inspect-context", "warm", READ_ARGS)  # b's view: stale soon
            first = asyncio.ensure_future(a.execute(ctx, "inspect-context", "c1", READ_ARGS))
            await asyncio.sleep(0.1)

            async def repeat(n: int) -> dict[str, Any]:
                await asyncio.sleep(0.01 * n)
                return await b.execute(ctx, "inspect-context", "c1", READ_ARGS)

            repeats = await asyncio.gather(*(repeat(n) for n in range(24)))
            assert (await first)["status"] == "SUCCEEDED"
            assert {(r["status"], r["duplicate"]) for r in repeats} == {("SUCCEEDED", True)}
            assert (await a.stats())["executions"] == {"inspect-context": 2}

    run_async(scenario())


def test_a_rejection_elsewhere_wins_over_an_expiry_remembered_here(
    tmp_path: Path, pg_url: str
) -> None:
    async def scenario() -> None:
        clock = FakeClock()
        async with replicas(tmp_path, pg_url, clock=clock) as (a, b):
            ctx = await _ask(b)
            clock.advance(APPROVAL_TTL_MS + 1)
            assert await _status(b, ctx) == "EXPIRED"  # b remembers it so
            await b.execute(ctx, "propose-change", "p1", ASKED)  # asked again
            body = {"contextRef": ctx, "tool": "propose-change", "callId": "p1",
                    "arguments": ASKED, "reason": "no"}  # fmt: skip
            assert (await a.call("POST", "/v1/context/tools/reject", body,
                                 headers=APPROVER)).status == 200  # fmt: skip
            assert await _status(b, ctx) == "REJECTED"

    run_async(scenario())


def test_an_mcp_call_the_store_did_not_answer_is_unknown_store_unavailable(
    tmp_path: Path, pg_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    async def failing(*_args: object, **_kw: object) -> None:
        raise StoreError("the store did not answer")

    async def scenario() -> None:
        async with replicas(tmp_path, pg_url, count=1, mcp=McpOptions(approval_wait_s=1.0)) as (a,):
            client = mcp_client(a.runtime, "authoring", mode="auto", consumer="course-authoring")
            async with client as c:
                monkeypatch.setattr(PgStore, "begin_intent_async", failing)
                failed = await c.call_tool("inspect_context", READ_ARGS, meta=call_meta("s-1"))
                assert failed.is_error is True
                unknown = {"status": "UNKNOWN", "reason": "STORE_UNAVAILABLE", "duplicate": False}
                assert receipt_of(failed) == unknown
                monkeypatch.undo()
                ran = await c.call_tool("inspect_context", READ_ARGS, meta=call_meta("s-1"))
                assert ran.is_error is False  # retried with the call id: it runs, once
            assert (await a.stats())["executions"] == {"inspect-context": 1}

    run_async(scenario())


def test_a_write_the_store_did_not_answer_is_an_unknown_receipt_never_a_503(
    tmp_path: Path, pg_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A 503 says the runtime did not take the request (the SDKs raise, and the application
    may retry anything); a claim whose answer was lost, or a result the store did not take
    after the call ran, is an ``UNKNOWN`` receipt instead; the result is stored once the
    store answers again, and a repeat then has it."""
    real_complete = PgStore.complete_intent_async
    failures = {"claim": 1, "complete": 1}

    async def claim_unanswered(self: PgStore, *args: Any, **kw: Any) -> Any:
        if failures["claim"]:
            failures["claim"] -= 1
            raise StoreUnanswered("the store did not answer")
        return await real_claim(self, *args, **kw)

    async def complete_unanswered(self: PgStore, *args: Any, **kw: Any) -> Any:
        if failures["complete"]:
            failures["complete"] -= 1
            raise StoreUnanswered("the store did not answer")
        return await real_complete(self, *args, **kw)

    real_claim = PgStore.begin_intent_async

    async def scenario() -> None:
        async with replicas(tmp_path, pg_url, count=1) as (a,):
            ctx: str = (await a.resolve())["contextRef"]
            monkeypatch.setattr(PgStore, "begin_intent_async", claim_unanswered)
            lost = await a.execute(ctx, "inspect-context", "c1", READ_ARGS)
            assert (lost["status"], lost["reason"]) == ("UNKNOWN", "STORE_UNAVAILABLE")
            monkeypatch.setattr(PgStore, "complete_intent_async", complete_unanswered)
            ran = await a.execute(ctx, "inspect-context", "c2", READ_ARGS)
            assert (ran["status"], ran["reason"]) == ("UNKNOWN", "STORE_UNAVAILABLE")
            assert (await a.stats())["executions"] == {"inspect-context": 1}  # c2 ran
            for _ in range(50):  # stored again within a second or so
                again = await a.execute(ctx, "inspect-context", "c2", READ_ARGS)
                if again["status"] == "SUCCEEDED":
                    break
                await asyncio.sleep(0.1)
            assert (again["status"], again["duplicate"]) == ("SUCCEEDED", True), again
            assert (await a.stats())["executions"] == {"inspect-context": 1}

    run_async(scenario())
