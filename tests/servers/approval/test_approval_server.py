"""The approval server's API end to end: a real runtime and the synthetic executor on loopback,
an approval server in front of them, approvers with their own tokens. Approve (and the call then
runs once, through the runtime), reject, a second decision, an expiry on the injected clock,
wrong and foreign tokens, a runtime that is down or answers nonsense, arguments asked again
differently, and two approvers racing."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import pytest
from aiohttp import web

from policy.engine.state import APPROVAL_TTL_MS
from policy.json.strict import loads
from servers.approval.app import ApprovalConfig, create_app
from servers.approval.upstream import Upstream
from servers.http.pages import CSP
from tests.support.approval_harness import (
    ANA,
    APPROVER_ENV,
    APPROVERS_CREDENTIALS,
    BEN,
    ApprovalStack,
    approval_stack,
)
from tests.support.runtime_harness import (
    APP_TOKEN,
    APPROVAL,
    APPROVAL_TOKEN,
    OTHER_PROPOSAL,
    PROPOSAL,
    FakeClock,
    Stack,
    run_async,
    serving,
)

REASON = "matches-the-lesson-5d1f8e"  # a reason that must never reach the disk
FIELDS = {
    "argumentsText",
    "argumentsView",
    "toolDescription",
    "application",
    "requesterGone",
    "pendingId",
    "contextRef",
    "tool",
    "callId",
    "arguments",
    "reason",
    "coordinates",
    "requestedAt",
    "expiresAt",
}


async def _ask(s: Stack, call_id: str = "w1", arguments: Any = PROPOSAL) -> str:
    ctx: str = (await s.resolve())["contextRef"]
    asked = await s.execute(ctx, "propose-change", call_id, arguments)
    assert (asked["status"], asked["reason"]) == ("DENIED", "APPROVAL_REQUIRED")
    return ctx


async def _events(s: Stack, ctx: str, kind: str) -> list[dict[str, Any]]:
    body = (await s.call("GET", f"/v1/traces/{ctx}")).body
    return [e for e in body["events"] if e["event"] == kind]


def _on_disk(root: Path) -> bytes:
    return b"".join(p.read_bytes() for p in root.rglob("*") if p.is_file())


def test_an_approved_call_runs_once_with_the_exact_arguments(tmp_path: Path) -> None:
    async def scenario() -> None:
        async with approval_stack(tmp_path) as a:
            s = a.runtime
            ctx = await _ask(s)
            [item] = await a.pending()
            assert set(item) == FIELDS
            assert (item["contextRef"], item["tool"], item["callId"]) == (
                ctx,
                "propose-change",
                "w1",
            )
            assert item["arguments"] == PROPOSAL and item["reason"] == "APPROVAL_REQUIRED"
            assert item["coordinates"]["objective"] == "authoring"
            assert item["coordinates"]["consumer"] == "course-authoring"
            assert [i["pendingId"] for i in await a.pending(BEN)] == [item["pendingId"]]

            done = await a.decide("approve", item["pendingId"], REASON)
            assert done.status == 200 and set(done.body) == {"approvalId", "expiresAt", "approver"}
            assert done.body["approver"] == "ops-ana"
            assert await a.pending() == []  # decided: it left the runtime's list
            status = (await s.call("GET", f"/v1/context/tools/approvals/{ctx}/w1")).body
            assert status["state"] == "APPROVED"
            assert status["approvalId"] == done.body["approvalId"]

            again = await a.decide("approve", item["pendingId"], headers=BEN)
            assert (again.status, again.body["error"]["code"]) == (409, "ALREADY_DECIDED")
            assert again.body["decided"]["approver"] == "ops-ana"

            ran = await s.execute(ctx, "propose-change", "w1", PROPOSAL, done.body["approvalId"])
            assert ran["status"] == "SUCCEEDED"
            assert (await s.stats())["executions"]["propose-change"] == 1
            [approved] = await _events(s, ctx, "APPROVED")
            assert approved["approver"] == "ops-ana" and "reason" not in approved
        assert REASON.encode() not in _on_disk(s.config.data)

    run_async(scenario())


def test_a_rejected_call_is_final_and_names_its_approver(tmp_path: Path) -> None:
    async def scenario() -> None:
        async with approval_stack(tmp_path) as a:
            s = a.runtime
            ctx = await _ask(s)
            [item] = await a.pending()
            done = await a.decide("reject", item["pendingId"], REASON, headers=BEN)
            assert (done.status, done.body) == (200, {"state": "REJECTED", "approver": "ops-ben"})
            assert await a.pending() == []
            status = (await s.call("GET", f"/v1/context/tools/approvals/{ctx}/w1")).body
            assert status == {"state": "REJECTED"}
            [rejected] = await _events(s, ctx, "REJECTED")
            assert rejected["approver"] == "ops-ben"
            for kind in ("approve", "reject"):
                late = await a.decide(kind, item["pendingId"])
                assert (late.status, late.body["error"]["code"]) == (409, "ALREADY_DECIDED")
                assert late.body["decided"] == {"state": "REJECTED", "approver": "ops-ben"}
            asked_again = await s.execute(ctx, "propose-change", "w1", PROPOSAL)
            assert asked_again["status"] == "DENIED" and await a.pending() == []
        assert REASON.encode() not in _on_disk(s.config.data)

    run_async(scenario())


def test_a_call_whose_window_ran_out_is_expired_not_approvable(tmp_path: Path) -> None:
    clock = FakeClock()

    async def scenario() -> None:
        async with approval_stack(tmp_path, clock=clock) as a:
            await _ask(a.runtime)
            [item] = await a.pending()
            clock.advance(APPROVAL_TTL_MS + 1)
            assert await a.pending() == []
            late = await a.decide("approve", item["pendingId"])
            assert (late.status, late.body["error"]["code"]) == (404, "PENDING_EXPIRED")
            never = await a.decide("approve", "pnd_" + "0" * 32)
            assert (never.status, never.body["error"]["code"]) == (404, "PENDING_UNKNOWN")

    run_async(scenario())


def test_only_approvers_tokens_are_accepted_and_approvers_cannot_run_anything(
    tmp_path: Path,
) -> None:
    async def scenario() -> None:
        async with approval_stack(tmp_path) as a:
            await _ask(a.runtime)
            [item] = await a.pending()
            for token in (
                "wrong",
                APP_TOKEN,
                APPROVAL_TOKEN,
                APPROVER_ENV["SEIF_APPROVER_ANA"][:-1],
            ):
                headers = {"Authorization": f"Bearer {token}"}
                listed = await a.call("GET", "/v1/pending", headers=headers)
                assert (listed.status, listed.body["error"]["code"]) == (401, "UNAUTHENTICATED")
                tried = await a.decide("approve", item["pendingId"], headers=headers)
                assert tried.status == 401
            assert (await a.call("GET", "/v1/pending", headers={})).status == 401
            for method, path in (
                ("POST", "/v1/context/resolve"),
                ("POST", "/v1/context/tools/execute"),
                ("POST", "/v1/context/tools/approve"),
                ("GET", f"/v1/traces/{item['contextRef']}"),
            ):
                assert (await a.call(method, path, {"objective": "authoring"})).status == 404
            # with an approver's token, the runtime itself refuses everything
            for path in ("/v1/context/resolve", "/v1/context/tools/approve"):
                assert (await a.runtime.call("POST", path, {}, headers=ANA)).status == 401
            assert [i["pendingId"] for i in await a.pending()] == [item["pendingId"]]

    run_async(scenario())


def test_a_reason_is_required_and_nothing_but_a_reason_is_taken(tmp_path: Path) -> None:
    async def scenario() -> None:
        async with approval_stack(tmp_path) as a:
            await _ask(a.runtime)
            [item] = await a.pending()
            pid = item["pendingId"]
            for body, code in (
                ({}, "REASON_REQUIRED"),
                ({"reason": ""}, "REASON_REQUIRED"),
                ({"reason": " \n\t"}, "REASON_REQUIRED"),
                ({"reason": 7}, "REASON_REQUIRED"),
                ({"reason": "x" * 501}, "REASON_TOO_LONG"),
                ({"reason": "ok", "arguments": OTHER_PROPOSAL}, "UNKNOWN_FIELD"),
            ):
                reply = await a.call("POST", f"/v1/pending/{pid}/approve", body)
                assert (reply.status, reply.body["error"]["code"]) == (400, code), body
            bad = await a.call("POST", f"/v1/pending/{pid}/reject", None)
            assert bad.status == 400
            assert [i["pendingId"] for i in await a.pending()] == [pid]  # still undecided
            assert (await a.decide("approve", pid, "é" * 500)).status == 200  # 500 characters

    run_async(scenario())


def test_arguments_asked_again_differently_are_another_pending_call(tmp_path: Path) -> None:
    """What the approver was shown is what is approved: the runtime replaces a held call asked
    again with other arguments, and the old pendingId then approves nothing."""

    async def scenario() -> None:
        async with approval_stack(tmp_path) as a:
            s = a.runtime
            ctx = await _ask(s)
            [shown] = await a.pending()
            again = await s.execute(ctx, "propose-change", "w1", OTHER_PROPOSAL)
            assert again["reason"] == "APPROVAL_REQUIRED"
            [now] = await a.pending()
            assert now["pendingId"] != shown["pendingId"] and now["arguments"] == OTHER_PROPOSAL
            stale = await a.decide("approve", shown["pendingId"])
            assert (stale.status, stale.body["error"]["code"]) == (404, "PENDING_UNKNOWN")
            assert await _events(s, ctx, "APPROVED") == []
            done = await a.decide("approve", now["pendingId"])
            ran = await s.execute(ctx, "propose-change", "w1", PROPOSAL, done.body["approvalId"])
            assert (ran["status"], ran["reason"]) == ("DENIED", "APPROVAL_INVALID")

    run_async(scenario())


def test_two_approvers_racing_get_one_decision(tmp_path: Path) -> None:
    async def scenario() -> None:
        async with approval_stack(tmp_path) as a:
            await _ask(a.runtime)
            [item] = await a.pending()
            pid = item["pendingId"]
            replies = await asyncio.gather(
                a.decide("approve", pid, headers=ANA),
                a.decide("approve", pid, headers=BEN),
                a.decide("reject", pid, headers=BEN),
            )
            assert sorted(r.status for r in replies) == [200, 409, 409]
            assert (
                len(await _events(a.runtime, item["contextRef"], "APPROVED"))
                + len(await _events(a.runtime, item["contextRef"], "REJECTED"))
                == 1
            )

    run_async(scenario())


async def _nonsense(request: web.Request) -> web.Response:
    return web.Response(status=200, text="<html>not the runtime</html>")


def test_a_runtime_that_is_down_or_answers_nonsense_is_a_clear_503_or_502(
    tmp_path: Path,
) -> None:
    async def scenario() -> None:
        closed = "http://127.0.0.1:9"  # discard: nothing listens
        async with approval_stack(tmp_path / "down", runtime_url=closed) as a:
            for reply in (
                await a.call("GET", "/v1/pending"),
                await a.decide("approve", "pnd_" + "0" * 32),
            ):
                assert (reply.status, reply.body["error"]["code"]) == (503, "RUNTIME_UNAVAILABLE")
                assert "cannot be reached" in reply.body["error"]["message"]
        app = web.Application()
        app.router.add_route("*", "/{tail:.*}", _nonsense)
        async with serving(app) as odd, approval_stack(tmp_path / "odd", runtime_url=odd) as a:
            reply = await a.call("GET", "/v1/pending")
            assert (reply.status, reply.body["error"]["code"]) == (502, "RUNTIME_ERROR")

    (tmp_path / "down").mkdir()
    (tmp_path / "odd").mkdir()
    run_async(scenario())


def test_every_answer_carries_the_page_s_security_headers(tmp_path: Path) -> None:
    async def scenario() -> None:
        async with approval_stack(tmp_path) as a:
            for method, path, headers in (
                ("GET", "/", {}),
                ("GET", "/app.js", {}),
                ("GET", "/v1/health", {}),
                ("GET", "/v1/pending", ANA),
                ("GET", "/v1/pending", {}),
                ("GET", "/nowhere", {}),
            ):
                reply = await a.call(method, path, headers=headers)
                assert reply.headers["Content-Security-Policy"] == CSP, path
                assert reply.headers["X-Frame-Options"] == "DENY", path
                assert reply.headers["Cache-Control"] == "no-store", path
            page = await a.call("GET", "/", headers={})
            assert page.headers["Content-Type"].startswith("text/html")
            assert b"<script>" not in page.body and b" style=" not in page.body

    run_async(scenario())


def test_pending_ids_are_stable_and_the_same_for_two_approval_servers(tmp_path: Path) -> None:
    async def scenario() -> None:
        async with approval_stack(tmp_path) as a:
            await _ask(a.runtime)
            first = await a.pending()
            async with approval_stack_beside(a) as second:
                assert [i["pendingId"] for i in await second.pending()] == [
                    i["pendingId"] for i in first
                ]
            assert await a.pending() == first

    run_async(scenario())


@asynccontextmanager
async def approval_stack_beside(a: ApprovalStack) -> AsyncIterator[ApprovalStack]:
    """A second approval server in front of ``a``'s runtime (as a replica would be)."""
    config = ApprovalConfig(
        runtime_url=a.runtime.runtime,
        approvers=APPROVERS_CREDENTIALS(),
        runner_token=APPROVAL_TOKEN,
    )
    async with serving(create_app(config)) as url:
        yield ApprovalStack(a.runtime, url, a.http)


def test_a_long_pending_list_is_read_whole(tmp_path: Path) -> None:
    """The attack as found: one application holds a few hundred calls (within the runtime's
    bounds), the runtime's answer spans many network reads, and the approval server read only
    the first (502 for every approver until they expired). It reads the whole answer now."""

    async def scenario() -> None:
        async with approval_stack(tmp_path) as a:
            s, details = a.runtime, "d" * 4000
            for c in range(12):
                ctx = (await s.resolve())["contextRef"]
                asks = [
                    s.execute(ctx, "propose-change", f"w{c}-{i}", {**PROPOSAL, "details": details})
                    for i in range(30)
                ]
                assert all(r["reason"] == "APPROVAL_REQUIRED" for r in await asyncio.gather(*asks))
            listed = await a.pending()
            assert len(listed) == 360
            done = await a.decide("approve", listed[-1]["pendingId"])
            assert done.status == 200

    run_async(scenario())


def test_argument_text_is_exact_and_shows_what_is_invisible(tmp_path: Path) -> None:
    """``argumentsText`` is the JSON the approver reads: the runtime's numbers as they are
    and every invisible or reordering character (bidi override, zero width) escaped."""

    async def scenario() -> None:
        async with approval_stack(tmp_path) as a:
            hidden = {**PROPOSAL, "summary": "pay \u202eacc-9\u200b"}
            await _ask(a.runtime, arguments=hidden)
            [item] = await a.pending()
            text = item["argumentsText"]
            assert "\\u202e" in text and "\\u200b" in text
            assert "\u202e" not in text and "\u200b" not in text
            assert loads(text) == hidden  # the same arguments, every character visible

    run_async(scenario())


SHOWN_AS_NOTHING = (  # rendered at zero width or as a blank, and once passed raw to approvers
    "\ufe0f\U000e0100\u034f\u17b4\u17b5\u180b\u180f"  # selectors, joiner, inherent vowels
    "\u115f\u1160\u3164\uffa0\u2800\u00a0\u3000"  # Hangul fillers, braille blank, spaces
)


def test_characters_that_render_as_nothing_or_blank_are_shown_escaped(tmp_path: Path) -> None:
    """The attack as found: variation selectors, the combining grapheme joiner, Khmer inherent
    vowels, Mongolian variation selectors, Hangul fillers, the braille blank and non-ASCII
    spaces reached the approver raw in "exactly what will run". Each is a visible escape now,
    and the text is still JSON of exactly the forwarded arguments."""

    async def scenario() -> None:
        async with approval_stack(tmp_path) as a:
            hidden = {**PROPOSAL, "summary": f"pay{SHOWN_AS_NOTHING}acc-9"}
            await _ask(a.runtime, arguments=hidden)
            [item] = await a.pending()
            text = item["argumentsText"]
            assert [c for c in SHOWN_AS_NOTHING if c in text] == []
            for escape in ("\\ufe0f", "\\udb40\\udd00", "\\u034f", "\\u17b4", "\\u180b",
                           "\\u3164", "\\u2800", "\\u00a0", "\\u3000"):  # fmt: skip
                assert escape in text, escape
            assert loads(text) == hidden and item["arguments"] == hidden

    run_async(scenario())


AS_ANA = {**APPROVAL, "x-seif-approver": "ops-ana"}


def test_a_reason_of_invisible_characters_is_no_reason(tmp_path: Path) -> None:
    """A reason made only of characters that show nothing (zero width, fillers, blanks, spaces
    other than U+0020) was accepted: both servers refuse it now, on approve and on reject."""

    async def scenario() -> None:
        async with approval_stack(tmp_path) as a:
            s = a.runtime
            ctx = await _ask(s)
            [item] = await a.pending()
            for blank in ("\u200b\u2060", "\u3164\u115f", "\u2800", "\u00a0\u3000 \n", "\ufe0f"):
                for kind in ("approve", "reject"):
                    reply = await a.decide(kind, item["pendingId"], blank)
                    assert (reply.status, reply.body["error"]["code"]) == (400, "REASON_REQUIRED")
                    body = {"contextRef": ctx, "tool": "propose-change", "callId": "w1",
                            "arguments": PROPOSAL, "reason": blank}  # fmt: skip
                    direct = await s.call("POST", f"/v1/context/tools/{kind}", body, headers=AS_ANA)
                    assert (direct.status, direct.body["error"]["code"]) == (400, "BAD_REQUEST")
                    assert "visible" in direct.body["error"]["message"]
            assert [i["pendingId"] for i in await a.pending()] == [item["pendingId"]]
            assert (await a.decide("approve", item["pendingId"], "\u200bok")).status == 200

    run_async(scenario())


async def _page(a: ApprovalStack, query: str = "") -> dict[str, Any]:
    reply = await a.call("GET", "/v1/pending" + query)
    assert reply.status == 200, reply
    assert set(reply.body) == {"pending", "next", "now"}
    page: dict[str, Any] = reply.body
    return page


async def _hold(s: Stack, count: int, arguments: Any = PROPOSAL, per_context: int = 30) -> None:
    for first in range(0, count, per_context):
        ctx = (await s.resolve())["contextRef"]
        asks = [s.execute(ctx, "propose-change", f"w{n}", arguments)
                for n in range(first, min(count, first + per_context))]  # fmt: skip
        assert all(r["reason"] == "APPROVAL_REQUIRED" for r in await asyncio.gather(*asks))


def test_pages_visit_every_call_once_while_calls_come_and_go(tmp_path: Path) -> None:
    """``?limit=N&after=CURSOR``, oldest first: followed until ``next`` is null, it lists every
    call held all along once, though calls are approved, rejected and asked between pages (a
    cursor is a place in the list, never an offset); what was asked meanwhile comes last."""

    async def scenario() -> None:
        async with approval_stack(tmp_path) as a:
            s = a.runtime
            await _hold(s, 60)
            everything = await a.pending()
            assert len(everything) == 60
            first = await _page(a)
            assert first["pending"] == everything[:50]  # 50 by default
            seen: list[str] = []
            approved: set[str] = set()
            after, rounds = None, 0
            while True:
                page = await _page(a, "?limit=7" + (f"&after={after}" if after else ""))
                assert 1 <= len(page["pending"]) <= 7 or page["next"] is None
                seen += [i["pendingId"] for i in page["pending"]]
                after, rounds = page["next"], rounds + 1
                if after is None:
                    break
                gone = next(i for i in reversed(everything) if i["pendingId"] not in approved)
                await s.approval_id(gone["contextRef"], "propose-change", gone["callId"], PROPOSAL)
                approved.add(gone["pendingId"])  # one not listed yet: approved meanwhile
                shown = await a.decide("reject", page["pending"][0]["pendingId"])
                assert shown.status == 200  # one listed already: rejected meanwhile
                if rounds == 2:
                    await _hold(s, 2, OTHER_PROPOSAL)  # asked meanwhile, in a context of its own
            assert len(seen) == len(set(seen)) and rounds > 5
            assert set(seen) >= {i["pendingId"] for i in everything} - approved
            assert not set(seen) & approved
            late = [i for i in await a.pending() if i["arguments"] == OTHER_PROPOSAL]
            assert len(late) == 2 and seen[-2:] == [i["pendingId"] for i in late]

    run_async(scenario())


def test_limit_and_cursor_out_of_bounds_are_400(tmp_path: Path) -> None:
    async def scenario() -> None:
        async with approval_stack(tmp_path) as a:
            await _hold(a.runtime, 3)
            for query in ("?limit=0", "?limit=201", "?limit=-1", "?limit=abc", "?limit=1.5",
                          "?limit=", "?limit=%201", "?after=", "?after=not%20a%20cursor",
                          "?after=" + "a" * 5000, "?after=3f2a.12x"):  # fmt: skip
                reply = await a.call("GET", "/v1/pending" + query)
                assert (reply.status, reply.body["error"]["code"]) == (400, "BAD_REQUEST"), query
            assert len((await _page(a, "?limit=1"))["pending"]) == 1
            assert len((await _page(a, "?limit=200"))["pending"]) == 3

    run_async(scenario())


def test_a_page_holds_at_most_4_mib(tmp_path: Path) -> None:
    """Large calls fill a page before its limit: each answer stays within 4 MiB (here, where
    ``argumentsText`` escapes every character, the approval server takes fewer calls than the
    runtime gave it, and ``next`` follows the last one shown), and the pages list them all."""

    async def scenario() -> None:
        async with approval_stack(tmp_path) as a:
            large = {**PROPOSAL, "details": "\U000e0100" * 4000}  # 16 KB, 56 KB escaped
            await _hold(a.runtime, 100, large, per_context=25)
            seen: list[str] = []
            query = "?limit=200"
            while query:
                reply = await a.call("GET", "/v1/pending" + query)
                assert reply.status == 200 and len(reply.body["pending"]) < 100
                assert int(reply.headers["Content-Length"]) <= 4 << 20
                seen += [i["pendingId"] for i in reply.body["pending"]]
                after = reply.body["next"]
                query = f"?limit=200&after={after}" if after else ""
            assert len(seen) == len(set(seen)) == 100

    run_async(scenario())


def test_a_decision_reads_its_own_call_not_the_list(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A decision asked the runtime for its whole list to find one call; it asks for that call
    now (and pages through the list only for a pendingId this server never listed)."""
    asked: list[tuple[Any, ...]] = []
    real = Upstream.pending

    async def recorded(self: Upstream, *args: Any) -> Any:
        asked.append(args)
        return await real(self, *args)

    monkeypatch.setattr(Upstream, "pending", recorded)

    async def scenario() -> None:
        async with approval_stack(tmp_path) as a:
            await _hold(a.runtime, 120)
            listed = await _page(a)
            asked.clear()
            done = await a.decide("approve", listed["pending"][5]["pendingId"])
            assert done.status == 200
            [(limit, after, call)] = asked
            assert (limit, after) == (1, None)
            assert call == (listed["pending"][5]["contextRef"], listed["pending"][5]["callId"])
            async with approval_stack_beside(a) as fresh:  # it never listed any
                asked.clear()
                done = await fresh.decide("reject", listed["pending"][7]["pendingId"])
                assert done.status == 200 and [args[0] for args in asked] == [200]

    run_async(scenario())
