"""Execute by the function name the model saw, through a real runtime and the synthetic
executor on loopback: the receipt names the tool id, by id then by name is one call (a
duplicate, dispatched once), an approval of the id serves the call by name, and a wrong name's
denial lists the names the context discloses, repeating at most 64 characters of it."""

from __future__ import annotations

from pathlib import Path

from tests.support.runtime_harness import APPROVAL, PROPOSAL, READ_ARGS, run_async, running_stack


def test_execute_by_name_succeeds_and_names_the_tool_id(tmp_path: Path) -> None:
    async def scenario() -> None:
        async with running_stack(tmp_path) as s:
            ctx = (await s.resolve())["contextRef"]
            by_name = await s.execute(ctx, "inspect_context", "n1", READ_ARGS)
            assert (by_name["status"], by_name["tool"]) == ("SUCCEEDED", "inspect-context")
            assert by_name["duplicate"] is False and by_name["outputAvailable"] is True

            by_id = await s.execute(ctx, "inspect-context", "n2", READ_ARGS)
            again = await s.execute(ctx, "inspect_context", "n2", READ_ARGS)
            assert by_id["status"] == "SUCCEEDED" and by_id["duplicate"] is False
            assert (again["status"], again["tool"], again["duplicate"]) == (
                "SUCCEEDED",
                "inspect-context",
                True,
            )
            assert again["outputAvailable"] is False and "output" not in again
            conflict = await s.execute(ctx, "inspect_context", "n2", {"ref": "other"})
            assert (conflict["status"], conflict["reason"]) == ("DENIED", "CALL_CONFLICT")
            assert (await s.stats())["executions"].get("inspect-context") == 2

            events = (await s.call("GET", f"/v1/traces/{ctx}")).body["events"]
            intents = [e for e in events if e["event"] == "INTENT"]
            assert [e["tool"] for e in intents] == ["inspect-context", "inspect-context"]

    run_async(scenario())


def test_an_approval_of_the_id_serves_the_call_by_name(tmp_path: Path) -> None:
    async def scenario() -> None:
        async with running_stack(tmp_path) as s:
            ctx = (await s.resolve())["contextRef"]
            asked = await s.execute(ctx, "propose_change", "w1", PROPOSAL)
            assert (asked["status"], asked["reason"]) == ("DENIED", "APPROVAL_REQUIRED")
            assert asked["tool"] == "propose-change"
            pending = (await s.call("GET", "/v1/context/tools/pending", headers=APPROVAL)).body
            assert [p["tool"] for p in pending["pending"]] == ["propose-change"]
            approval = await s.approval_id(ctx, "propose-change", "w1", PROPOSAL)
            done = await s.execute(ctx, "propose_change", "w1", PROPOSAL, approval)
            assert (done["status"], done["tool"]) == ("SUCCEEDED", "propose-change")

    run_async(scenario())


def test_a_wrong_name_is_denied_with_the_disclosed_names(tmp_path: Path) -> None:
    async def scenario() -> None:
        async with running_stack(tmp_path) as s:
            ctx = (await s.resolve(objective="learner"))["contextRef"]
            wrong = await s.execute(ctx, "inspectContext", "x1", READ_ARGS)
            assert (wrong["status"], wrong["reason"]) == ("DENIED", "TOOL_NOT_DISCLOSED")
            detail = wrong["decision"]["explanation"]["detail"]
            assert "`inspectContext`" in detail
            assert detail.endswith("this context discloses: inspect_context, search_knowledge")

            excluded = await s.execute(ctx, "propose_change", "x2", PROPOSAL)
            assert (excluded["status"], excluded["reason"]) == ("DENIED", "TOOL_NOT_DISCLOSED")
            assert excluded["decision"]["explanation"]["tool"] == "propose-change"

            sent = "y" * 64 + "TAIL" * 40
            long = await s.execute(ctx, sent, "x3", READ_ARGS)
            assert long["reason"] == "TOOL_NOT_DISCLOSED"
            detail = long["decision"]["explanation"]["detail"]
            assert "y" * 64 in detail and "TAIL" not in detail
            assert (await s.stats())["executions"] == {}

            events = (await s.call("GET", f"/v1/traces/{ctx}")).body["events"]
            denied = [e for e in events if e["event"] == "DENIED"]
            assert len(denied) == 3
            assert all("TAIL" not in e["explanation"].get("detail", "") for e in denied)
            assert all("TAIL" not in str(e) for e in denied), denied

    run_async(scenario())


def test_an_approver_may_name_the_tool_by_its_function_name(tmp_path: Path) -> None:
    """What a newcomer tried: approve `propose_change` (the name the model used) got 409
    TOOL_NOT_DISCLOSED. Approve and reject take the function name as execute does; the
    approval is of the tool id."""

    async def scenario() -> None:
        async with running_stack(tmp_path) as s:
            ctx = (await s.resolve())["contextRef"]
            await s.execute(ctx, "propose_change", "w1", PROPOSAL)
            approved = await s.approve(ctx, "propose_change", "w1", PROPOSAL)
            assert approved.status == 200, approved
            approval = approved.body["approvalId"]
            done = await s.execute(ctx, "propose-change", "w1", PROPOSAL, approval)
            assert (done["status"], done["tool"]) == ("SUCCEEDED", "propose-change")
            await s.execute(ctx, "propose_change", "w2", PROPOSAL)
            body = {"contextRef": ctx, "tool": "propose_change", "callId": "w2"}
            rejected = await s.call(
                "POST",
                "/v1/context/tools/reject",
                {**body, "arguments": PROPOSAL, "reason": "no"},
                headers={**APPROVAL, "x-seif-approver": "ops-ana"},
            )
            assert rejected.status == 200, rejected

    run_async(scenario())
