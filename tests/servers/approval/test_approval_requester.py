"""What approvers are told besides the call, end to end against a real runtime on loopback: who
they are signed in as (`GET /v1/me`), what the tool does (its description in the build), which
application asked (the credential that resolved the context), the arguments as a view whose
strings keep their real line breaks while every other invisible character stays escaped, and a
call whose requester is gone, marked and not approvable."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from policy.json.strict import loads
from servers.approval.view import arguments_view, string_text
from servers.mcp.app import McpOptions
from tests.support.abandoned import abandoned
from tests.support.approval_harness import ANA, BEN, approval_stack
from tests.support.runtime_harness import (
    APP_TOKEN,
    APPROVAL,
    PROPOSAL,
    reference_project,
    run_async,
)

DETAILS = "First line\n  indented second line \nthird\u200b line\r\n\nafter a blank line"
ARGUMENTS = {**PROPOSAL, "details": DETAILS, "citations": [{"ref": "a\\nb", "note": "x"}]}


def _flat(view: dict[str, Any]) -> Any:
    """The JSON value a view shows, read as an approver reads it: each leaf's text, its real
    line breaks as ``\\n``, is JSON."""
    if view["kind"] == "object":
        return {json.loads(e["key"]): _flat(e["value"]) for e in view["entries"]}
    if view["kind"] == "array":
        return [_flat(v) for v in view["items"]]
    return loads(view["text"].replace("\n", "\\n"))


def test_the_signed_in_approver_is_named(tmp_path: Path) -> None:
    async def scenario() -> None:
        async with approval_stack(tmp_path) as a:
            ana = (await a.call("GET", "/v1/me")).body
            assert ana == {"approver": "ops-ana", "name": "ops-ana"}
            ben = (await a.call("GET", "/v1/me", headers=BEN)).body
            assert ben == {"approver": "ops-ben", "name": "ops-ben"}
            for headers in ({}, {"Authorization": f"Bearer {APP_TOKEN}"}, APPROVAL):
                refused = await a.call("GET", "/v1/me", headers=headers)
                assert (refused.status, refused.body["error"]["code"]) == (401, "UNAUTHENTICATED")

    run_async(scenario())


def test_a_pending_call_names_its_tool_s_purpose_and_its_application(tmp_path: Path) -> None:
    async def scenario() -> None:
        async with approval_stack(tmp_path) as a:
            ctx = (await a.runtime.resolve())["contextRef"]
            asked = await a.runtime.execute(ctx, "propose-change", "w1", ARGUMENTS)
            assert asked["reason"] == "APPROVAL_REQUIRED"
            [item] = await a.pending()
            described = reference_project().tool_by_id["propose-change"].description
            assert item["toolDescription"] == described and described.startswith("Propose one")
            assert item["application"] == "tutor-app"  # the credential that resolved it
            assert item["requesterGone"] is False
            view = item["argumentsView"]
            assert _flat(view) == ARGUMENTS == loads(item["argumentsText"])
            [details] = [e["value"] for e in view["entries"] if e["key"] == '"details"']
            # real line breaks; the zero-width space and the carriage return stay escaped
            assert details == {
                "kind": "string",
                "text": '"First line\n  indented second line \nthird\\u200b line\\r\n\n'
                'after a blank line"',
            }
            # a backslash and an n in the value are not a line break: shown escaped, once
            [cited] = [e["value"] for e in view["entries"] if e["key"] == '"citations"']
            assert cited["items"][0]["entries"][0]["value"]["text"] == '"a\\\\nb"'

    run_async(scenario())


def test_views_of_every_kind_of_value() -> None:
    view = arguments_view(
        {"n": 12345678901234567890123, "f": 1.5, "t": True, "z": None, "e": [], "o": {}}
    )
    assert [(e["key"], e["value"]) for e in view["entries"]] == [
        ('"n"', {"kind": "number", "text": "12345678901234567890123"}),
        ('"f"', {"kind": "number", "text": "1.5"}),
        ('"t"', {"kind": "boolean", "text": "true"}),
        ('"z"', {"kind": "null", "text": "null"}),
        ('"e"', {"kind": "array", "items": []}),
        ('"o"', {"kind": "object", "entries": []}),
    ]
    # every invisible character but the line feed is escaped, in keys too
    assert string_text("a\u00a0b\u2028c\nd\ufe0f") == '"a\\u00a0b\\u2028c\nd\\ufe0f"'
    assert arguments_view({"k\n\u200b": 1})["entries"][0]["key"] == '"k\\n\\u200b"'


def test_a_call_whose_requester_is_gone_is_marked_and_cannot_be_approved(tmp_path: Path) -> None:
    async def scenario() -> None:
        async with approval_stack(tmp_path, mcp=McpOptions(approval_wait_s=20.0)) as a:
            entry = await abandoned(a.runtime, PROPOSAL)
            [item] = await a.pending()
            assert item["callId"] == entry["callId"] and item["requesterGone"] is True
            refused = await a.decide("approve", item["pendingId"], headers=ANA)
            assert (refused.status, refused.body["error"]["code"]) == (409, "REQUESTER_GONE")
            rejected = await a.decide("reject", item["pendingId"])
            assert rejected.status == 200 and rejected.body == {
                "state": "REJECTED",
                "approver": "ops-ana",
            }
            assert await a.pending() == []

    run_async(scenario())
