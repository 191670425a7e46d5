"""A context belongs to the credential that resolved it, through a real runtime and the
synthetic executor on loopback: to another application it does not exist (execute is a
``DENIED`` receipt with ``CONTEXT_UNKNOWN``, exactly as for a context that never existed, and
nothing is dispatched; disclosure reports, approval status and traces are 404
``CONTEXT_UNKNOWN``; an operator's ``traces.read`` alone reads every trace), the
owner is named in the ``DISCLOSED`` record, kept by the store across a restart and put back by
reconciliation, and a context stored by an older runtime (no owner) belongs to no one."""

from __future__ import annotations

import sqlite3
from pathlib import Path
from typing import Any

from seif import RuntimeClient
from seif.sdk.errors import NotFoundError
from tests.support.runtime_harness import (
    OPERATOR_TOKEN,
    OTHER_APP_TOKEN,
    PROPOSAL,
    READ_ARGS,
    READER_TOKEN,
    Stack,
    run_async,
    running_stack,
)

OTHER = {"Authorization": f"Bearer {OTHER_APP_TOKEN}"}
OPERATOR = {"Authorization": f"Bearer {OPERATOR_TOKEN}"}
READER = {"Authorization": f"Bearer {READER_TOKEN}"}


async def _execute_as(s: Stack, headers: dict[str, str], ctx: str, call_id: str) -> Any:
    body = {"contextRef": ctx, "tool": "inspect-context", "callId": call_id, "arguments": READ_ARGS}
    reply = await s.call("POST", "/v1/context/tools/execute", body, headers=headers)
    assert reply.status == 200, reply
    return reply.body


def test_another_applications_context_does_not_exist_for_it(tmp_path: Path) -> None:
    async def scenario() -> None:
        async with running_stack(tmp_path) as s:
            ctx = (await s.resolve())["contextRef"]
            stolen = await _execute_as(s, OTHER, ctx, "c1")
            never = await _execute_as(s, OTHER, "ctx_never_resolved", "c1")
            assert (stolen["status"], stolen["reason"]) == ("DENIED", "CONTEXT_UNKNOWN")
            assert stolen == never  # no oracle: a stolen ref answers as a made-up one
            assert (await s.stats())["executions"] == {}

            report = {"contextRef": ctx, "tools": ["inspect_context"]}
            for headers in (OTHER, READER):  # the reader resolved nothing either
                reported = await s.call("POST", "/v1/context/disclosures", report, headers=headers)
                assert (reported.status, reported.body["error"]["code"]) == (
                    404,
                    "CONTEXT_UNKNOWN",
                )
            status_path = f"/v1/context/tools/approvals/{ctx}/c1"
            status = await s.call("GET", status_path, headers=OTHER)
            assert (status.status, status.body["error"]["code"]) == (404, "CONTEXT_UNKNOWN")

            # the owner is unaffected: its call is the first dispatch of c1
            own = await s.execute(ctx, "inspect-context", "c1", READ_ARGS)
            assert (own["status"], own["duplicate"]) == ("SUCCEEDED", False)
            assert (await s.call("POST", "/v1/context/disclosures", report)).status == 202
            assert (await s.call("GET", status_path)).body == {"state": "NONE"}

            # and the other application owns what it resolves
            mine = await s.call(
                "POST", "/v1/context/resolve", {"objective": "authoring"}, headers=OTHER
            )
            theirs = await s.execute(mine.body["contextRef"], "inspect-context", "x1", READ_ARGS)
            assert (theirs["status"], theirs["reason"]) == ("DENIED", "CONTEXT_UNKNOWN")
            stolen_trace = await s.call("GET", f"/v1/traces/{ctx}", headers=OTHER)
            assert (stolen_trace.status, stolen_trace.body["error"]["code"]) == (
                404,
                "CONTEXT_UNKNOWN",
            )
            operator = await s.call("GET", f"/v1/traces/{ctx}", headers=OPERATOR)
            assert operator.status == 200  # `traces.read` alone: an operator reads every trace
            events = (await s.call("GET", f"/v1/traces/{ctx}")).body["events"]
            assert operator.body["events"] == events
            assert events[0]["event"] == "DISCLOSED" and events[0]["credential"] == "tutor-app"
            denied = [e for e in events if e["event"] == "DENIED"]
            assert denied == []  # the other application's attempts are not this context's

    run_async(scenario())


def test_the_sdk_of_another_application_sees_no_context(tmp_path: Path) -> None:
    async def scenario() -> None:
        async with running_stack(tmp_path) as s:
            ctx = (await s.resolve())["contextRef"]
            async with RuntimeClient(s.runtime, OTHER_APP_TOKEN) as other:
                receipt = await other.execute(ctx, "inspect_context", "c1", READ_ARGS)
                assert (receipt.status, receipt.reason) == ("DENIED", "CONTEXT_UNKNOWN")
                try:
                    await other.approval_status(ctx, "c1")
                except NotFoundError as e:
                    assert e.code == "CONTEXT_UNKNOWN"
                else:
                    raise AssertionError("another credential read an approval status")
            assert (await s.stats())["executions"] == {}

    run_async(scenario())


def test_ownership_survives_a_restart_and_a_store_of_an_older_runtime_has_no_owner(
    tmp_path: Path,
) -> None:
    async def first() -> str:
        async with running_stack(tmp_path) as s:
            ctx: str = (await s.resolve())["contextRef"]
            asked = await s.execute(ctx, "propose-change", "p1", PROPOSAL)
            assert asked["reason"] == "APPROVAL_REQUIRED"
            return ctx

    async def again(ctx: str, expect_owned: bool) -> None:
        async with running_stack(tmp_path) as s:
            status = await s.call("GET", f"/v1/context/tools/approvals/{ctx}/p1")
            if expect_owned:
                assert status.status == 200, status
            else:
                assert (status.status, status.body["error"]["code"]) == (404, "CONTEXT_UNKNOWN")
            stolen = await _execute_as(s, OTHER, ctx, "c9")
            assert stolen["reason"] == "CONTEXT_UNKNOWN"

    ctx = run_async(first())
    run_async(again(ctx, expect_owned=True))
    db = sqlite3.connect(tmp_path / "data" / "dispatch.sqlite")
    assert db.execute("SELECT credential_id FROM contexts").fetchall() == [("tutor-app",)]
    db.execute("UPDATE contexts SET credential_id = NULL")  # as a version 2 store holds it
    db.commit()
    db.close()
    run_async(again(ctx, expect_owned=False))
