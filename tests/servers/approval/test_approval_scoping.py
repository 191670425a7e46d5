"""Approvers narrowed to some ``objectives`` and ``applications`` (docs/approval-server.md),
against a real runtime (with an issuer, so that a user's call is owned by ``corp:tutor-web``) and
the approval server: each approver is listed, and decides, only the calls within both; any other
call answers as one never asked (``404 PENDING_UNKNOWN``), whatever its state, even when its
``pendingId`` was learnt from another approver; paging through a narrowed list visits each of
its calls once."""

from __future__ import annotations

import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

import pytest

from servers.approval import desk
from tests.support.approval_harness import ANA, ApprovalStack, approval_stack
from tests.support.identity import claims, issuer_entry, provider, rsa_key, token
from tests.support.runtime_harness import (
    CREDENTIALS,
    OTHER_APP_TOKEN,
    PROPOSAL,
    Stack,
    run_async,
)

KEY = rsa_key("k1")
TOKENS = {"CY": "approver-cy-token-1f4a7c", "DI": "approver-di-token-8d2b5e"}
APPROVERS = {
    "approvers": [
        {"id": "ops-ana", "tokenRef": "env:SEIF_APPROVER_ANA"},  # every call
        {"id": "ops-ben", "tokenRef": "env:SEIF_APPROVER_BEN", "objectives": ["learner"]},
        {
            "id": "ops-cy",
            "tokenRef": "env:SEIF_APPROVER_CY",
            "objectives": ["authoring"],
            "applications": ["other-app"],
        },
        {"id": "ops-di", "tokenRef": "env:SEIF_APPROVER_DI", "applications": ["corp"]},
    ]
}
BEN = {"Authorization": "Bearer approver-ben-token-9e3c7a5d0b"}
CY = {"Authorization": f"Bearer {TOKENS['CY']}"}
DI = {"Authorization": f"Bearer {TOKENS['DI']}"}
UNKNOWN = "PENDING_UNKNOWN"


@asynccontextmanager
async def scoped_stack(root: Path) -> AsyncIterator[ApprovalStack]:
    async with provider([KEY]) as idp:
        credentials = {**CREDENTIALS, "issuers": [issuer_entry(idp.url)]}
        async with approval_stack(
            root,
            credentials=credentials,
            approvers=APPROVERS,
            approver_env={f"SEIF_APPROVER_{k}": v for k, v in TOKENS.items()},
        ) as a:
            yield a


def user() -> dict[str, str]:
    """A user's token of the issuer ``corp``, for its client ``tutor-web``."""
    return {"Authorization": f"Bearer {token(KEY, claims(int(time.time())))}"}


async def ask(s: Stack, call_id: str, headers: dict[str, str] | None = None) -> str:
    """A propose-change call held for approval in a new context resolved with ``headers``."""
    body = {"objective": "authoring", "consumer": "course-authoring"}
    resolved = await s.call("POST", "/v1/context/resolve", body, headers=headers)
    assert resolved.status == 200, resolved
    ctx: str = resolved.body["contextRef"]
    asked = {"contextRef": ctx, "tool": "propose-change", "callId": call_id, "arguments": PROPOSAL}
    receipt = await s.call("POST", "/v1/context/tools/execute", asked, headers=headers)
    assert (receipt.body["status"], receipt.body["reason"]) == ("DENIED", "APPROVAL_REQUIRED")
    return ctx


async def listed(a: ApprovalStack, headers: dict[str, str]) -> dict[str, str]:
    """callId -> pendingId of every call ``headers``' approver is listed."""
    return {p["callId"]: p["pendingId"] for p in await a.pending(headers=headers)}


def test_each_approver_is_listed_only_the_calls_within_its_scope(tmp_path: Path) -> None:
    async def scenario() -> None:
        async with scoped_stack(tmp_path) as a:
            s = a.runtime
            await ask(s, "tutor-1")
            await ask(s, "other-1", {"Authorization": f"Bearer {OTHER_APP_TOKEN}"})
            await ask(s, "user-1", user())
            everything = await a.pending(headers=ANA)
            assert {p["callId"]: p["application"] for p in everything} == {
                "tutor-1": "tutor-app",
                "other-1": "other-app",
                "user-1": "corp:tutor-web",
            }
            assert await listed(a, BEN) == {}  # learner: none of these authoring calls
            assert set(await listed(a, CY)) == {"other-1"}  # authoring, asked by other-app
            assert set(await listed(a, DI)) == {"user-1"}  # the issuer's users, any client

    run_async(scenario())


def test_a_call_outside_an_approver_s_scope_answers_as_unknown(tmp_path: Path) -> None:
    async def scenario() -> None:
        async with scoped_stack(tmp_path) as a:
            s = a.runtime
            tutor_ctx = await ask(s, "tutor-1")
            await ask(s, "other-1", {"Authorization": f"Bearer {OTHER_APP_TOKEN}"})
            ids = await listed(a, ANA)  # pendingIds another approver could pass on
            for kind in ("approve", "reject"):
                for headers, call in ((BEN, "tutor-1"), (CY, "tutor-1"), (BEN, "other-1")):
                    refused = await a.decide(kind, ids[call], headers=headers)
                    assert (refused.status, refused.body["error"]["code"]) == (404, UNKNOWN)

            approved = await a.decide("approve", ids["other-1"], headers=CY)
            assert approved.status == 200 and approved.body["approver"] == "ops-cy", approved
            again = await a.decide("reject", ids["other-1"], headers=ANA)  # within ana's scope
            assert (again.status, again.body["error"]["code"]) == (409, "ALREADY_DECIDED")
            assert again.body["decided"]["approver"] == "ops-cy"
            for kind in ("approve", "reject"):  # decided, still nothing to ben
                hidden = await a.decide(kind, ids["other-1"], headers=BEN)
                assert (hidden.status, hidden.body["error"]["code"]) == (404, UNKNOWN), hidden

            # nothing of the refusals reached the runtime: tutor-1 waits for its approver
            assert set(await listed(a, ANA)) == {"tutor-1"}
            trace = await s.call("GET", f"/v1/traces/{tutor_ctx}")
            decided = [e for e in trace.body["events"] if e["event"] in ("APPROVED", "REJECTED")]
            assert decided == []
            done = await a.decide("reject", ids["tutor-1"], headers=ANA)
            assert done.status == 200, done

    run_async(scenario())


def test_a_narrowed_list_is_paged_from_the_runtime_s_pages(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The runtime's pages read for a narrowed listing are cut as the approver's page fills,
    and a listing that reads its share of them without filling its page says where to go on:
    following ``next`` lists each of the approver's calls once, in order."""

    async def scenario() -> None:
        async with scoped_stack(tmp_path) as a:
            s = a.runtime
            other = {"Authorization": f"Bearer {OTHER_APP_TOKEN}"}
            order = []
            for i in range(4):
                await ask(s, f"tutor-{i}")
                await ask(s, f"other-{i}", other)
                order.append(f"other-{i}")
            for runtime_page, pages_read in ((200, 20), (3, 1), (1, 1)):
                monkeypatch.setattr(desk, "MAX_LIMIT", runtime_page)
                monkeypatch.setattr(desk, "MAX_PAGES_READ", pages_read)
                seen: list[str] = []
                path: str | None = "/v1/pending?limit=3"
                while path is not None:
                    reply = await a.call("GET", path, headers=CY)
                    assert reply.status == 200, reply
                    page = [p["callId"] for p in reply.body["pending"]]
                    assert len(page) <= 3
                    seen += page
                    after = reply.body["next"]
                    path = None if after is None else f"/v1/pending?limit=3&after={after}"
                assert seen == order, (runtime_page, seen)

    run_async(scenario())
