"""MCP server mode (issue 18, shared/spec/mcp.md) end to end: the official ``mcp`` client over
real loopback HTTP against the runtime and the synthetic executor, in both revisions (the
``2025-11-25`` session handshake and the stateless ``2026-07-28``). What is listed is what the
engine discloses (compared with ``POST /v1/context/resolve`` and the build); every list is a
``DISCLOSED`` record that replays; a call id reaches the executor once however it is retried
or raced; undisclosed and invalid calls never dispatch; writes wait for the real approval
server; contexts are renewed after their 15 minutes; capabilities say MCP is served; and
``seif serve --mcp`` serves it."""

from __future__ import annotations

import asyncio
import json
import time
from pathlib import Path
from typing import Any

import httpx2
import mcp_types as mt
import pytest
from mcp.shared.exceptions import MCPError

from compiler.builds.build import load_build
from policy.engine.state import APPROVAL_TTL_MS, CONTEXT_TTL_MS
from policy.json.strict import loads
from policy.json.value import thaw
from policy.offline.replay import replay
from seif.cli import main
from servers.mcp.app import McpOptions
from tests.support.approval_harness import ApprovalStack, approval_stack
from tests.support.mcp_support import (
    CALL_ID,
    CONTEXT_REF,
    MODES,
    NeverElicited,
    Notified,
    authoring_client,
    call_meta,
    dumped,
    executions,
    kinds,
    log_records,
    mcp_client,
    mcp_url,
    of,
    receipt_of,
    trace_events,
    until,
)
from tests.support.runtime_harness import (
    APP_TOKEN,
    BEARER,
    EXECUTOR,
    OTHER_APP_TOKEN,
    OTHER_PROPOSAL,
    PROPOSAL,
    READ_ARGS,
    READER_TOKEN,
    TOOL_TOKENS,
    FakeClock,
    Stack,
    knobs,
    listening,
    reference_project,
    run_async,
    running_stack,
    serving,
    start_serve,
    stop,
    write_config,
)

LEARNER = ("learner", "tutor-app")
AUTHORING = ("authoring", "course-authoring")
LIST_CHANGED = "notifications/tools/list_changed"
QUICK = McpOptions(approval_wait_s=1)
"""An approval wait that runs out within the test."""
PATIENT = McpOptions(approval_wait_s=15)
"""An approval wait the approver's decision ends long before."""

per_mode = pytest.mark.parametrize("mode", MODES)


def _tools_by_name(stack: Stack) -> dict[str, Any]:
    """The build's tools (the IR the runtime serves, loaded again from the build directory)."""
    return {t.name: t for t in load_build(stack.config.build).project.tools}


def _ref(listed: Any) -> str:
    ref: str = (listed.meta or {})[CONTEXT_REF]
    return ref


def _text(result: Any) -> str:
    """The one text content of a ``tools/call`` result."""
    [content] = result.content
    assert isinstance(content, mt.TextContent), content
    return content.text


def _structured(result: Any) -> Any:
    return dumped(result).get("structuredContent")


# ---------------------------------------------------------------------- tools/list


@per_mode
@pytest.mark.parametrize("objective", [LEARNER, AUTHORING], ids=["learner", "authoring"])
def test_tools_list_is_exactly_what_the_engine_discloses(
    tmp_path: Path, mode: str, objective: tuple[str, str]
) -> None:
    name, consumer = objective

    async def scenario() -> None:
        async with running_stack(tmp_path, mcp=PATIENT) as stack:
            resolved = await stack.resolve(name, consumer)
            async with mcp_client(stack.runtime, name, mode=mode, consumer=consumer) as client:
                listed = await client.list_tools()
                again = await client.list_tools()
            built = _tools_by_name(stack)
            wanted = [t["name"] for t in resolved["tools"]]
            assert [t.name for t in listed.tools] == wanted
            if name == "learner":
                assert wanted == ["inspect_context", "search_knowledge"]
            else:
                assert wanted == ["inspect_context", "search_knowledge", "propose_change"]
            for tool, answer in zip(listed.tools, resolved["tools"], strict=True):
                document = dumped(tool)
                assert document["description"] == answer["description"]
                assert document["inputSchema"] == answer["parameters"]
                # as JSON too: in Python, False == 0 and 1.0 == 1
                assert json.dumps(document["inputSchema"], sort_keys=True) == json.dumps(
                    answer["parameters"], sort_keys=True
                )
                declared = built[tool.name]
                result = thaw(declared.result)
                assert isinstance(result, dict) and result["type"] == "object"
                assert document["outputSchema"] == result
                assert document["annotations"] == {
                    "readOnlyHint": declared.effect == "read",
                    "destructiveHint": declared.effect == "write",
                    "idempotentHint": False,
                }
            # deterministic for one disclosure: a second list is the same, in the same context
            assert dumped(again) == dumped(listed)
            meta = listed.meta or {}
            assert isinstance(meta.get(CONTEXT_REF), str) and meta[CONTEXT_REF].startswith("ctx_")
            assert meta[CONTEXT_REF] != resolved["contextRef"]  # a context of its own
            assert meta["io.seif/messages"] == resolved["messages"]

    run_async(scenario())


@per_mode
def test_an_incompatible_tool_is_never_listed_and_a_blocked_objective_lists_nothing(
    tmp_path: Path, mode: str
) -> None:
    incompatible = {"changed_digest": True}

    async def scenario() -> None:
        knobs_of = {"search-knowledge": knobs(**incompatible)}
        async with running_stack(tmp_path / "opt", mcp=PATIENT, executor_knobs=knobs_of) as stack:
            resolved = await stack.resolve(*LEARNER)
            assert [t["name"] for t in resolved["tools"]] == ["inspect_context"]
            async with mcp_client(stack.runtime, "learner", mode=mode, consumer="tutor-app") as c:
                listed = await c.list_tools()
                assert [t.name for t in listed.tools] == ["inspect_context"]
                refused = await c.call_tool(
                    "search_knowledge", {"query": "median"}, meta=call_meta("s1")
                )
            assert receipt_of(refused) == {
                "status": "DENIED",
                "reason": "TOOL_NOT_DISCLOSED",
                "duplicate": False,
            }
            [record] = of(log_records(stack), "DISCLOSED", contextRef=_ref(listed))
            [omitted] = record["disclosure"]["omitted"]
            assert (omitted["id"], omitted["reason"]) == ("search-knowledge", "TOOL_INCOMPATIBLE")
            build = load_build(stack.config.build)
            assert replay(build.project, [record], build_digest=build.digest).ok
            assert (await stack.stats())["requests"] == {}

        knobs_of = {"inspect-context": knobs(**incompatible)}  # a required tool
        async with running_stack(tmp_path / "req", mcp=PATIENT, executor_knobs=knobs_of) as stack:
            async with mcp_client(stack.runtime, "learner", mode=mode, consumer="tutor-app") as c:
                listed = await c.list_tools()
                assert listed.tools == []
                [cause] = (listed.meta or {})["io.seif/blocked"]
                assert (cause["id"], cause["reason"]) == ("inspect-context", "TOOL_INCOMPATIBLE")
                refused = await c.call_tool("inspect_context", READ_ARGS, meta=call_meta("b1"))
            assert receipt_of(refused) == {
                "status": "DENIED",
                "reason": "RESOLUTION_BLOCKED",
                "duplicate": False,
            }
            blocked = of(log_records(stack), "DISCLOSED")
            assert blocked and {r["disclosure"]["status"] for r in blocked} == {"BLOCKED"}
            assert (await stack.stats())["requests"] == {}

    run_async(scenario())


@per_mode
def test_every_list_is_a_disclosed_record_that_replays(
    tmp_path: Path, mode: str, capsys: pytest.CaptureFixture[str]
) -> None:
    lists = 3

    async def scenario() -> tuple[str, str]:
        async with running_stack(tmp_path, mcp=PATIENT) as stack:
            refs = []
            async with mcp_client(stack.runtime, "learner", mode=mode, consumer="tutor-app") as c:
                for _ in range(lists):
                    refs.append(_ref(await c.list_tools()))
                called = await c.call_tool("inspect_context", READ_ARGS, meta=call_meta("r1"))
                assert not called.is_error
            [ref] = set(refs)
            events = await trace_events(stack, ref)
            disclosed = [e for e in events if e["event"] == "DISCLOSED"]
            # one record per list (the client lists once more to check the call's result
            # against the outputSchema only when it has not listed: it has)
            assert len(disclosed) == lists, kinds(events)
            for record in disclosed:
                assert record["objective"] == "learner" and record["credential"] == "tutor-app"
                assert record["coordinates"]["consumer"] == "tutor-app"
                assert [t["id"] for t in record["disclosure"]["tools"]] == [
                    "inspect-context",
                    "search-knowledge",
                ]
                assert set(record["observations"]) == {"inspect-context", "search-knowledge"}
            build = load_build(stack.config.build)
            mine = [r for r in log_records(stack) if r.get("contextRef") == ref]
            assert len(of(mine, "DISCLOSED")) == lists
            report = replay(build.project, mine, build_digest=build.digest)
            assert report.ok and report.mismatches == ()
            assert (report.disclosed, report.reproduced) == (lists, lists)
            return str(stack.config.data), str(stack.config.build)

    data, build_dir = run_async(scenario())
    out = tmp_path / "log.cbor"
    assert main(["trace", "export", "--data", data, "--out", str(out)]) == 0
    capsys.readouterr()
    assert main(["replay", "--build", build_dir, "--log", str(out), "--json"]) == 0
    found = loads(capsys.readouterr().out)["replay"]
    assert found["ok"] is True and found["mismatches"] == []
    assert found["disclosed"] == found["reproduced"] == lists


# ---------------------------------------------------------------------- tools/call


@per_mode
def test_a_call_succeeds_once_and_its_retry_is_a_duplicate(tmp_path: Path, mode: str) -> None:
    async def scenario() -> None:
        async with running_stack(tmp_path, mcp=PATIENT) as stack:
            async with mcp_client(stack.runtime, "learner", mode=mode, consumer="tutor-app") as c:
                ref = _ref(await c.list_tools())
                first = await c.call_tool("inspect_context", READ_ARGS, meta=call_meta("read-1"))
                assert await executions(stack) == {"inspect-context": 1}
                retried = await c.call_tool("inspect_context", READ_ARGS, meta=call_meta("read-1"))
            assert first.is_error is False
            output = loads(_text(first))
            assert _structured(first) == output
            assert (first.meta or {})[CALL_ID] == "read-1"
            # the output is the executor's, as the HTTP API's execute gives it
            other = (await stack.resolve(*LEARNER))["contextRef"]
            direct = await stack.execute(other, "inspect-context", "h1", READ_ARGS)
            assert direct["status"] == "SUCCEEDED" and direct["output"] == output

            assert retried.is_error is True
            assert receipt_of(retried) == {
                "status": "SUCCEEDED",
                "reason": None,
                "duplicate": True,
            }
            assert (retried.meta or {})[CALL_ID] == "read-1"
            assert "nothing new ran" in _text(retried)
            stats = await stack.stats()
            assert stats["executions"] == {"inspect-context": 2}  # the MCP call's and h1
            assert stats["byCallId"] == {"read-1": 1, "h1": 1}
            events = await trace_events(stack, ref)
            assert kinds(events).count("RESULT") == 1, kinds(events)

    run_async(scenario())


@per_mode
def test_a_conflict_a_failure_and_a_bad_call_id_are_said_so(tmp_path: Path, mode: str) -> None:
    async def scenario() -> None:
        async with running_stack(tmp_path, mcp=PATIENT) as stack:
            async with mcp_client(stack.runtime, "learner", mode=mode, consumer="tutor-app") as c:
                ran = await c.call_tool("inspect_context", READ_ARGS, meta=call_meta("c1"))
                assert ran.is_error is False
                other = {**READ_ARGS, "depth": 1}
                conflict = await c.call_tool("inspect_context", other, meta=call_meta("c1"))
                assert conflict.is_error is True
                assert receipt_of(conflict) == {
                    "status": "DENIED",
                    "reason": "CALL_CONFLICT",
                    "duplicate": False,
                }
                stack.set_knobs("inspect-context", fail_code="NOT_FOUND")
                failed = await c.call_tool("inspect_context", READ_ARGS, meta=call_meta("c2"))
                assert failed.is_error is True
                assert receipt_of(failed)["status"] == "FAILED"
                assert receipt_of(failed)["duplicate"] is False
                assert _text(failed).startswith("The call failed")
                assert _text(failed).endswith("The executor's error code: `NOT_FOUND`.")
                stack.set_knobs("inspect-context")
                for bad in (5, "", "x" * 1000):
                    with pytest.raises(MCPError) as refused:
                        await c.call_tool("inspect_context", READ_ARGS, meta=call_meta(bad))
                    assert refused.value.error.code == mt.INVALID_PARAMS
            stats = await stack.stats()
            assert stats["executions"] == {"inspect-context": 1}  # c2 failed without acting
            assert stats["byCallId"] == {"c1": 1}

    run_async(scenario())


@per_mode
def test_concurrent_retries_of_one_call_id_dispatch_once(tmp_path: Path, mode: str) -> None:
    racers = 8

    async def scenario() -> None:
        async with running_stack(tmp_path, mcp=PATIENT) as stack:
            before = len(log_records(stack))
            fresh = f"race-{mode}"  # coordinates of a context of their own
            async with mcp_client(
                stack.runtime, "learner", mode=mode, consumer="tutor-app", deployment=fresh
            ) as c:
                results = await asyncio.gather(
                    *(
                        c.call_tool("inspect_context", READ_ARGS, meta=call_meta("race-1"))
                        for _ in range(racers)
                    )
                )
            stats = await stack.stats()
            assert stats["executions"] == {"inspect-context": 1}
            assert stats["byCallId"] == {"race-1": 1}
            won = [r for r in results if not r.is_error]
            lost = [receipt_of(r) for r in results if r.is_error]
            assert len(won) == 1
            assert lost == [{"status": "SUCCEEDED", "reason": None, "duplicate": True}] * (
                racers - 1
            )
            new = log_records(stack)[before:]
            refs = {r["contextRef"] for r in of(new, "DISCLOSED")}
            assert len(refs) == 1, refs  # the racers shared one resolution
            assert {r["contextRef"] for r in new if r.get("callId") == "race-1"} == refs
            assert len(of(new, "RESULT", callId="race-1")) == 1

    run_async(scenario())


@per_mode
def test_a_call_the_client_gave_up_on_runs_once_and_its_retry_is_a_duplicate(
    tmp_path: Path, mode: str
) -> None:
    """The client's read timeout ends its request (and cancels it) while the executor is
    still working: the call still completes once, and the retry is its duplicate."""
    slow = {"inspect-context": knobs(delay_ms=300)}

    async def scenario() -> None:
        async with running_stack(tmp_path, mcp=PATIENT, executor_knobs=slow) as stack:
            async with mcp_client(stack.runtime, "learner", mode=mode, consumer="tutor-app") as c:
                ref = _ref(await c.list_tools())
                with pytest.raises(MCPError):
                    await c.call_tool("inspect_context", READ_ARGS, 0.1, meta=call_meta("gave-up"))

                async def resulted() -> bool:
                    return "RESULT" in kinds(await trace_events(stack, ref))

                await until(resulted)
                retried = await c.call_tool("inspect_context", READ_ARGS, meta=call_meta("gave-up"))
            assert receipt_of(retried) == {
                "status": "SUCCEEDED",
                "reason": None,
                "duplicate": True,
            }
            assert await executions(stack) == {"inspect-context": 1}
            assert kinds(await trace_events(stack, ref)).count("INTENT") == 1

    run_async(scenario())


@per_mode
def test_undisclosed_and_invalid_calls_are_refused_without_dispatch(
    tmp_path: Path, mode: str
) -> None:
    async def scenario() -> None:
        async with running_stack(tmp_path, mcp=PATIENT) as stack:
            async with mcp_client(stack.runtime, "learner", mode=mode, consumer="tutor-app") as c:
                ref = _ref(await c.list_tools())
                asked = [
                    ("propose_change", PROPOSAL, "TOOL_NOT_DISCLOSED"),
                    ("propose-change", PROPOSAL, "TOOL_NOT_DISCLOSED"),
                    ("no_such_tool", {}, "TOOL_NOT_DISCLOSED"),
                    ("inspect_context", {"ref": 5}, "ARGUMENTS_INVALID"),
                    ("inspect_context", {**READ_ARGS, "extra": True}, "ARGUMENTS_INVALID"),
                    ("inspect_context", {}, "ARGUMENTS_INVALID"),
                ]
                for n, (tool, arguments, reason) in enumerate(asked):
                    got = await c.call_tool(tool, arguments, meta=call_meta(f"bad-{n}"))
                    assert got.is_error is True, (tool, dumped(got))
                    assert receipt_of(got) == {
                        "status": "DENIED",
                        "reason": reason,
                        "duplicate": False,
                    }, tool
                    assert (got.meta or {})[CALL_ID] == f"bad-{n}"
                    assert reason in _text(got)
            stats = await stack.stats()
            assert stats["executions"] == {} and stats["requests"] == {}
            denied = [e for e in await trace_events(stack, ref) if e["event"] == "DENIED"]
            assert [e["reason"] for e in denied] == [reason for _, _, reason in asked]
            assert "RESULT" not in kinds(await trace_events(stack, ref))

    run_async(scenario())


MARKER = "value-marker-5c2e"
TOO_MANY = {
    "query": "x",
    "limit": 987654,
    "filters": {"modules": list(range(700001, 700013)), "sections": [MARKER], "tags": [{}]},
}


@per_mode
def test_an_invalid_call_s_text_says_what_to_fix_and_never_a_value(
    tmp_path: Path, mode: str
) -> None:
    """``ARGUMENTS_INVALID``: the text names each schema error's pointer and message, the first
    ten, then how many more; never an argument's value; the receipt is in ``_meta``."""

    async def scenario() -> None:
        async with running_stack(tmp_path, mcp=PATIENT) as stack:
            async with mcp_client(stack.runtime, "learner", mode=mode, consumer="tutor-app") as c:
                one = await c.call_tool("inspect_context", {}, meta=call_meta("v1"))
                many = await c.call_tool("search_knowledge", TOO_MANY, meta=call_meta("v2"))
            for refused in (one, many):
                assert receipt_of(refused) == {
                    "status": "DENIED",
                    "reason": "ARGUMENTS_INVALID",
                    "duplicate": False,
                }
            assert _text(one) == (
                "The call was refused and nothing ran (ARGUMENTS_INVALID): the arguments do not "
                "match the tool's inputSchema; correct them. To fix: the arguments: missing "
                "required property `ref`."
            )
            text = _text(many)
            said = text.split(" To fix: ", 1)[1].removesuffix(".").split("; ")
            assert said[:5] == [  # the order of the build's schema: its canonical key order
                "/limit: the value is greater than the maximum `10`",
                "/query: 1 characters is fewer than the minimum 2",
                "/filters/tags/0: missing required property `key`",
                "/filters/tags/0: missing required property `value`",
                "/filters/modules: 12 items is more than the maximum 8",
            ]
            assert said[5:10] == [
                f"/filters/modules/{i}: the value is greater than the maximum `12`"
                for i in range(5)
            ]
            assert said[10:] == ["8 more"]  # 7 modules and a section
            for value in ("987654", "7000", MARKER):
                assert value not in text
            assert (await stack.stats())["requests"] == {}

    run_async(scenario())


# ---------------------------------------------------------------------- approval


async def _pending_item(a: ApprovalStack, call_id: str) -> dict[str, Any]:
    async def found() -> dict[str, Any] | None:
        return next((i for i in await a.pending() if i["callId"] == call_id), None)

    item: dict[str, Any] = await until(found)
    return item


@per_mode
def test_a_write_waits_for_the_approval_server_and_then_runs_once(
    tmp_path: Path, mode: str
) -> None:
    async def scenario() -> None:
        async with approval_stack(tmp_path, mcp=PATIENT) as a:
            stack = a.runtime
            reported: list[tuple[float, float | None, str | None]] = []

            async def on_progress(
                progress: float, total: float | None, message: str | None
            ) -> None:
                reported.append((progress, total, message))

            elicited = NeverElicited()
            async with authoring_client(stack.runtime, mode, elicited) as c:
                ref = _ref(await c.list_tools())
                started = time.monotonic()
                waiting = asyncio.ensure_future(
                    c.call_tool(
                        "propose_change",
                        PROPOSAL,
                        meta=call_meta("w1"),
                        progress_callback=on_progress,
                    )
                )
                item = await _pending_item(a, "w1")
                assert not waiting.done()
                assert (item["contextRef"], item["tool"]) == (ref, "propose-change")
                assert item["arguments"] == PROPOSAL and item["reason"] == "APPROVAL_REQUIRED"
                assert item["coordinates"]["objective"] == "authoring"
                assert await executions(stack) == {}
                await until(lambda: _true(bool(reported)))
                decided = await a.decide("approve", item["pendingId"], "looks right")
                assert decided.status == 200, decided
                done = await asyncio.wait_for(waiting, 10)
                assert time.monotonic() - started < PATIENT.approval_wait_s
                assert done.is_error is False, dumped(done)
                assert _structured(done) == loads(_text(done))
                assert (done.meta or {})[CALL_ID] == "w1"
                assert await executions(stack) == {"propose-change": 1}
                again = await c.call_tool("propose_change", PROPOSAL, meta=call_meta("w1"))
                assert receipt_of(again) == {
                    "status": "SUCCEEDED",
                    "reason": None,
                    "duplicate": True,
                }
            assert await executions(stack) == {"propose-change": 1}
            assert await a.pending() == [] and elicited.asked == []
            first_done, total, message = reported[0]
            assert total == PATIENT.approval_wait_s and 0 <= first_done < total
            assert message and "approve" in message
            events = await trace_events(stack, ref)
            [approved] = [e for e in events if e["event"] == "APPROVED"]
            assert approved["approver"] == "ops-ana" and approved["callId"] == "w1"
            assert kinds(events).count("RESULT") == 1

    run_async(scenario())


async def _true(value: bool) -> bool:
    return value


@per_mode
def test_a_write_rejected_through_the_approval_server_is_refused(tmp_path: Path, mode: str) -> None:
    async def scenario() -> None:
        async with approval_stack(tmp_path, mcp=PATIENT) as a:
            stack = a.runtime
            async with mcp_client(
                stack.runtime, "authoring", mode=mode, consumer="course-authoring"
            ) as c:
                waiting = asyncio.ensure_future(
                    c.call_tool("propose_change", PROPOSAL, meta=call_meta("w2"))
                )
                item = await _pending_item(a, "w2")
                decided = await a.decide("reject", item["pendingId"], "not this one")
                assert decided.status == 200, decided
                done = await asyncio.wait_for(waiting, 10)
                assert done.is_error is True
                assert receipt_of(done) == {
                    "status": "DENIED",
                    "reason": "REJECTED",
                    "duplicate": False,
                }
                assert "rejected" in _text(done)
                # asked again: still refused, never held again, never dispatched
                again = await c.call_tool("propose_change", PROPOSAL, meta=call_meta("w2"))
                assert again.is_error is True
                assert receipt_of(again)["status"] == "DENIED"
            assert await executions(stack) == {}
            assert await a.pending() == []

    run_async(scenario())


@per_mode
def test_when_the_wait_runs_out_the_call_stays_held_and_runs_once_when_approved(
    tmp_path: Path, mode: str
) -> None:
    async def scenario() -> None:
        async with approval_stack(tmp_path, mcp=QUICK) as a:
            stack = a.runtime
            elicited = NeverElicited()
            async with authoring_client(stack.runtime, mode, elicited) as c:
                ref = _ref(await c.list_tools())
                started = time.monotonic()
                first = await c.call_tool("propose_change", PROPOSAL, meta=call_meta("w3"))
                assert time.monotonic() - started >= QUICK.approval_wait_s * 0.9
                assert first.is_error is True
                assert receipt_of(first) == {
                    "status": "DENIED",
                    "reason": "APPROVAL_REQUIRED",
                    "duplicate": False,
                }
                [item] = await a.pending()
                assert (item["contextRef"], item["callId"]) == (ref, "w3")
                assert item["arguments"] == PROPOSAL
                assert await executions(stack) == {}
                decided = await a.decide("approve", item["pendingId"], "fine now")
                assert decided.status == 200, decided
                assert await executions(stack) == {}  # approving runs nothing
                started = time.monotonic()
                ran = await c.call_tool("propose_change", PROPOSAL, meta=call_meta("w3"))
                assert time.monotonic() - started < QUICK.approval_wait_s  # no wait
                assert ran.is_error is False, dumped(ran)
                assert await executions(stack) == {"propose-change": 1}
                again = await c.call_tool("propose_change", PROPOSAL, meta=call_meta("w3"))
                assert receipt_of(again)["duplicate"] is True
            assert await executions(stack) == {"propose-change": 1} and elicited.asked == []

    run_async(scenario())


@per_mode
def test_concurrent_retries_of_a_held_write_run_once_when_approved(
    tmp_path: Path, mode: str
) -> None:
    """Retries of one held write, all waiting when the approver approves: one runs, each
    other is its duplicate, whichever of them wakes after the first one ran (none is left
    waiting to say ``APPROVAL_REQUIRED`` of a call that has run)."""
    racers = 8
    wait = McpOptions(approval_wait_s=4)

    async def scenario() -> None:
        async with approval_stack(tmp_path, mcp=wait) as a:
            stack = a.runtime
            async with mcp_client(
                stack.runtime, "authoring", mode=mode, consumer="course-authoring"
            ) as c:
                _ref(await c.list_tools())
                waiting = [
                    asyncio.ensure_future(
                        c.call_tool("propose_change", PROPOSAL, meta=call_meta("w5"))
                    )
                    for _ in range(racers)
                ]
                item = await _pending_item(a, "w5")
                await asyncio.sleep(0.3)  # every retry has asked by now
                assert [i["callId"] for i in await a.pending()] == ["w5"]  # held once
                assert not any(w.done() for w in waiting)
                decided = await a.decide("approve", item["pendingId"], "once is enough")
                assert decided.status == 200, decided
                done = await asyncio.wait_for(asyncio.gather(*waiting), 10)
            assert await executions(stack) == {"propose-change": 1}
            assert [r.is_error for r in done].count(False) == 1
            assert [receipt_of(r) for r in done if r.is_error] == [
                {"status": "SUCCEEDED", "reason": None, "duplicate": True}
            ] * (racers - 1)

    run_async(scenario())


@per_mode
def test_a_waiting_call_that_ran_meanwhile_says_so(tmp_path: Path, mode: str) -> None:
    """While an MCP request waits for the approval of its call, the same call (its context,
    call id and arguments) is approved and run by another request: the waiting request
    answers the duplicate receipt, not ``APPROVAL_REQUIRED`` for a call that has run."""
    wait = McpOptions(approval_wait_s=2)

    async def scenario() -> None:
        async with running_stack(tmp_path, mcp=wait) as stack:
            async with mcp_client(
                stack.runtime, "authoring", mode=mode, consumer="course-authoring"
            ) as c:
                ref = _ref(await c.list_tools())
                waiting = asyncio.ensure_future(
                    c.call_tool("propose_change", PROPOSAL, meta=call_meta("w6"))
                )

                async def held() -> bool:
                    status = await stack.call("GET", f"/v1/context/tools/approvals/{ref}/w6")
                    return bool(status.body.get("state") == "PENDING")

                await until(held)
                # the same credential asks for other arguments (held instead), then the
                # first arguments are approved and run through the HTTP API
                other = await stack.execute(ref, "propose-change", "w6", OTHER_PROPOSAL)
                assert other["reason"] == "APPROVAL_REQUIRED"
                approval = await stack.approval_id(ref, "propose-change", "w6", PROPOSAL)
                ran = await stack.execute(ref, "propose-change", "w6", PROPOSAL, approval)
                assert ran["status"] == "SUCCEEDED" and not waiting.done()
                done = await asyncio.wait_for(waiting, 10)
            assert await executions(stack) == {"propose-change": 1}
            assert receipt_of(done) == {
                "status": "SUCCEEDED",
                "reason": None,
                "duplicate": True,
            }

    run_async(scenario())


@per_mode
def test_a_call_held_past_its_approval_window_is_refused_as_expired(
    tmp_path: Path, mode: str
) -> None:
    clock = FakeClock()

    async def scenario() -> None:
        async with approval_stack(tmp_path, clock=clock, mcp=McpOptions(approval_wait_s=2)) as a:
            stack = a.runtime
            async with mcp_client(
                stack.runtime, "authoring", mode=mode, consumer="course-authoring"
            ) as c:
                waiting = asyncio.ensure_future(
                    c.call_tool("propose_change", PROPOSAL, meta=call_meta("w4"))
                )
                await _pending_item(a, "w4")
                clock.advance(APPROVAL_TTL_MS)
                done = await asyncio.wait_for(waiting, 10)
                assert receipt_of(done) == {
                    "status": "DENIED",
                    "reason": "APPROVAL_EXPIRED",
                    "duplicate": False,
                }
                assert "ran out" in _text(done)
            assert await a.pending() == []
            assert await executions(stack) == {}

    run_async(scenario())


@per_mode
def test_call_limits_are_per_context(tmp_path: Path, mode: str) -> None:
    """inspect-context may be called 3 times in a context: with sessions each session has its
    own; without, the clients of one credential, objective and coordinates share one."""
    limit = reference_project().tool_by_id["inspect-context"].max_calls

    async def scenario() -> None:
        async with running_stack(tmp_path, mcp=PATIENT) as stack:
            async with (
                mcp_client(stack.runtime, "learner", mode=mode, consumer="tutor-app") as a,
                mcp_client(stack.runtime, "learner", mode=mode, consumer="tutor-app") as b,
            ):
                for n in range(limit):
                    ran = await a.call_tool("inspect_context", READ_ARGS, meta=call_meta(f"a{n}"))
                    assert ran.is_error is False
                over = await a.call_tool("inspect_context", READ_ARGS, meta=call_meta("a-over"))
                assert receipt_of(over)["reason"] == "CALL_LIMIT_EXCEEDED"
                other = await b.call_tool("inspect_context", READ_ARGS, meta=call_meta("b0"))
            if mode == "legacy":
                assert other.is_error is False
                assert await executions(stack) == {"inspect-context": limit + 1}
            else:
                assert receipt_of(other) == {
                    "status": "DENIED",
                    "reason": "CALL_LIMIT_EXCEEDED",
                    "duplicate": False,
                }
                assert await executions(stack) == {"inspect-context": limit}

    run_async(scenario())


# ---------------------------------------------------------------------- contexts


def test_a_session_s_context_is_renewed_after_fifteen_minutes_and_it_is_told(
    tmp_path: Path,
) -> None:
    clock = FakeClock()

    async def scenario() -> None:
        async with running_stack(tmp_path, mcp=PATIENT, clock=clock) as stack:
            told = Notified()
            async with mcp_client(
                stack.runtime, "learner", mode="legacy", message_handler=told, consumer="tutor-app"
            ) as c:
                first = _ref(await c.list_tools())
                clock.advance(CONTEXT_TTL_MS - 1)
                assert _ref(await c.list_tools()) == first  # not yet: the same context
                assert told.count(LIST_CHANGED) == 0
                clock.advance(1)
                renewed = _ref(await c.list_tools())
                assert renewed != first
                await told.wait_for(LIST_CHANGED)
                # a call after the next expiry (no list before it) renews the context too
                clock.advance(CONTEXT_TTL_MS)
                ran = await c.call_tool("inspect_context", READ_ARGS, meta=call_meta("late"))
                assert ran.is_error is False, dumped(ran)
                await told.wait_for(LIST_CHANGED, 2)
                third = _ref(await c.list_tools())
                assert third not in (first, renewed)
                assert told.count(LIST_CHANGED) == 2
            records = log_records(stack)
            [result] = of(records, "RESULT", callId="late")
            assert result["contextRef"] == third
            disclosed = [r["contextRef"] for r in of(records, "DISCLOSED")]
            assert disclosed == [first, first, renewed, third, third]

    run_async(scenario())


def test_every_session_whose_context_expired_is_told_when_it_is_renewed(
    tmp_path: Path,
) -> None:
    """Two sessions of one credential whose contexts both expired: each renewal is a
    ``notifications/tools/list_changed`` to its own session, whichever renews first."""
    clock = FakeClock()

    async def scenario() -> tuple[bool, bool]:
        async with running_stack(tmp_path, mcp=PATIENT, clock=clock) as stack:
            one, two = Notified(), Notified()
            async with (
                mcp_client(
                    stack.runtime,
                    "learner",
                    mode="legacy",
                    message_handler=one,
                    consumer="tutor-app",
                ) as a,
                mcp_client(
                    stack.runtime,
                    "learner",
                    mode="legacy",
                    message_handler=two,
                    consumer="tutor-app",
                ) as b,
            ):
                first_a, first_b = _ref(await a.list_tools()), _ref(await b.list_tools())
                assert first_a != first_b  # one context per MCP session
                clock.advance(CONTEXT_TTL_MS)
                renewed_a, renewed_b = _ref(await a.list_tools()), _ref(await b.list_tools())
                assert len({first_a, first_b, renewed_a, renewed_b}) == 4
                return await one.arrived(LIST_CHANGED, timeout=2), await two.arrived(
                    LIST_CHANGED, timeout=2
                )

    told_a, told_b = run_async(scenario())
    assert told_a, "the session that renewed first was not told"
    assert told_b, "the second session's renewal was not told notifications/tools/list_changed"


def test_a_stateless_context_is_shared_and_renewed_when_it_expires(tmp_path: Path) -> None:
    clock = FakeClock()

    async def scenario() -> None:
        async with running_stack(tmp_path, mcp=PATIENT, clock=clock) as stack:
            async with (
                mcp_client(stack.runtime, "learner", mode="auto", consumer="tutor-app") as a,
                mcp_client(stack.runtime, "learner", mode="auto", consumer="tutor-app") as b,
            ):
                first = _ref(await a.list_tools())
                assert _ref(await b.list_tools()) == first  # one per credential+objective+coords
                done = await a.call_tool("inspect_context", READ_ARGS, meta=call_meta("shared"))
                assert done.is_error is False
                # the same context: b's call of that id is a duplicate
                retried = await b.call_tool("inspect_context", READ_ARGS, meta=call_meta("shared"))
                assert receipt_of(retried)["duplicate"] is True
                clock.advance(CONTEXT_TTL_MS - 1)
                assert _ref(await b.list_tools()) == first
                clock.advance(1)
                renewed = _ref(await b.list_tools())
                assert renewed != first
                assert _ref(await a.list_tools()) == renewed
            assert await executions(stack) == {"inspect-context": 1}
            refs = {r["contextRef"] for r in of(log_records(stack), "DISCLOSED")}
            assert refs == {first, renewed}

    run_async(scenario())


@per_mode
def test_a_retry_after_the_context_was_renewed_is_not_dispatched_again(
    tmp_path: Path, mode: str
) -> None:
    """A call whose answer the client did not get, retried with the same ``io.seif/callId``
    just after the context's 15 minutes ended: seif renewed the context on its own, so the
    retry must still be the first call's duplicate (the client cannot tell a renewal)."""
    clock = FakeClock()

    async def scenario() -> None:
        async with running_stack(tmp_path, mcp=PATIENT, clock=clock) as stack:
            async with mcp_client(stack.runtime, "learner", mode=mode, consumer="tutor-app") as c:
                first = await c.call_tool("inspect_context", READ_ARGS, meta=call_meta("edge"))
                assert first.is_error is False
                clock.advance(CONTEXT_TTL_MS)
                retried = await c.call_tool("inspect_context", READ_ARGS, meta=call_meta("edge"))
            assert await executions(stack) == {"inspect-context": 1}, "dispatched again"
            assert retried.is_error is True and receipt_of(retried)["duplicate"] is True

    run_async(scenario())


def test_stateless_contexts_are_per_credential_objective_and_coordinates(tmp_path: Path) -> None:
    async def scenario() -> None:
        async with running_stack(tmp_path, mcp=PATIENT) as stack:

            async def ref(
                objective: str,
                token: str = APP_TOKEN,
                consumer: str = "tutor-app",
                environment: str | None = None,
                deployment: str | None = None,
            ) -> str:
                async with mcp_client(
                    stack.runtime,
                    objective,
                    mode="auto",
                    token=token,
                    consumer=consumer,
                    environment=environment,
                    deployment=deployment,
                ) as c:
                    return _ref(await c.list_tools())

            base = await ref("learner", consumer="tutor-app")
            assert await ref("learner", consumer="tutor-app") == base
            others = {
                await ref("learner", consumer="other-consumer"),
                await ref("learner", consumer="tutor-app", environment="staging"),
                await ref("learner", consumer="tutor-app", deployment="eu"),
                await ref("authoring", consumer="tutor-app"),
                await ref("learner", token=OTHER_APP_TOKEN, consumer="tutor-app"),
            }
            assert base not in others and len(others) == 5
            # another credential's context is not this one's: its trace is not readable
            foreign = await stack.call(
                "GET",
                f"/v1/traces/{base}",
                headers={"Authorization": f"Bearer {OTHER_APP_TOKEN}"},
            )
            assert foreign.status == 404

    run_async(scenario())


# ---------------------------------------------------------------------- the boundary


@per_mode
def test_capabilities_list_mcp_only_when_it_is_mounted(tmp_path: Path, mode: str) -> None:
    async def scenario() -> None:
        async with running_stack(tmp_path / "on", mcp=PATIENT) as stack:
            found = (await stack.call("GET", "/v1/capabilities")).body["integrations"]
            assert [n for n in found["native"] if "MCP" in n]
            assert found["mcp"]["path"] == "/mcp/{objective}"
            assert {"2025-11-25", "2026-07-28"} <= set(found["mcp"]["revisions"])
            async with mcp_client(stack.runtime, "learner", mode=mode) as c:
                assert c.protocol_version in found["mcp"]["revisions"]
        async with running_stack(tmp_path / "off") as stack:
            found = (await stack.call("GET", "/v1/capabilities")).body["integrations"]
            assert "mcp" not in found and not [n for n in found["native"] if "MCP" in n]
            missing = await stack.call("POST", "/mcp/learner", {"jsonrpc": "2.0"})
            assert missing.status == 404

    run_async(scenario())


ACCEPT = {"Accept": "application/json, text/event-stream", "Content-Type": "application/json"}
RAW_CALL = {
    "jsonrpc": "2.0",
    "id": 1,
    "method": "tools/call",
    "params": {"name": "inspect_context", "arguments": READ_ARGS, "_meta": {CALL_ID: "raw"}},
}


def _as(token: str, **more: str) -> dict[str, str]:
    return {**ACCEPT, "Authorization": f"Bearer {token}", **more}


async def _raw_session(http: httpx2.AsyncClient, url: str) -> dict[str, str]:
    """A ``2025-11-25`` session opened by hand; the headers its requests carry."""
    hello = {
        "jsonrpc": "2.0",
        "id": 0,
        "method": "initialize",
        "params": {
            "protocolVersion": "2025-11-25",
            "capabilities": {},
            "clientInfo": {"name": "raw", "version": "1"},
        },
    }
    opened = await http.post(url, json=hello, headers=_as(APP_TOKEN))
    assert opened.status_code == 200, opened.text
    session = {"mcp-session-id": opened.headers["mcp-session-id"]}
    headers = _as(APP_TOKEN, **session, **{"mcp-protocol-version": "2025-11-25"})
    ready = {"jsonrpc": "2.0", "method": "notifications/initialized"}
    assert (await http.post(url, json=ready, headers=headers)).status_code == 202
    return headers


def test_bad_requests_are_clear_errors_and_dispatch_nothing(tmp_path: Path) -> None:
    async def scenario() -> None:
        async with running_stack(tmp_path, mcp=PATIENT) as stack:
            url = mcp_url(stack.runtime, "learner", consumer="tutor-app")
            body = json.dumps(RAW_CALL)
            async with httpx2.AsyncClient(timeout=10) as http:
                no_token = await http.post(url, content=body, headers=ACCEPT)
                assert no_token.status_code == 401
                assert no_token.headers["WWW-Authenticate"].startswith("Bearer")
                wrong = await http.post(url, content=body, headers=_as("not-a-token"))
                assert wrong.status_code == 401 and "WWW-Authenticate" in wrong.headers
                reader = await http.post(url, content=body, headers=_as(READER_TOKEN))
                assert reader.status_code == 403  # context.resolve alone
                unknown = mcp_url(stack.runtime, "no-such-objective")
                assert (
                    await http.post(unknown, content=body, headers=_as(APP_TOKEN))
                ).status_code == 404
                for content, code in (
                    (json.dumps([RAW_CALL, RAW_CALL]), -32600),  # a batch
                    ('{"jsonrpc": "2.0", ', -32700),  # not JSON
                    ('{"id": 1, "id": 2, "jsonrpc": "2.0"}', -32700),  # not strict JSON
                    ("[]", -32600),
                    ("7", -32600),
                ):
                    refused = await http.post(url, content=content, headers=_as(APP_TOKEN))
                    assert refused.status_code == 400, content
                    assert refused.json()["error"]["code"] == code, content
                odd = mcp_url(stack.runtime, "learner", turnId="t1")
                assert (
                    await http.post(odd, content=body, headers=_as(APP_TOKEN))
                ).status_code == 400
                big = b'{"pad": "' + b"x" * (2 << 20) + b'"}'
                assert (
                    await http.post(url, content=big, headers=_as(APP_TOKEN))
                ).status_code == 413

                session = await _raw_session(http, url)
                plain = {**session, "Accept": "text/plain"}
                assert (await http.post(url, content=body, headers=plain)).status_code == 406
                text = {**session, "Content-Type": "text/plain"}
                assert (await http.post(url, content=body, headers=text)).status_code in (400, 415)
                asked = {"jsonrpc": "2.0", "id": 2, "method": "no/such/method"}
                answer = await http.post(url, json=asked, headers=session)
                assert answer.status_code == 200 and "-32601" in answer.text
                asked = {"jsonrpc": "2.0", "id": 3, "method": "resources/list"}
                answer = await http.post(url, json=asked, headers=session)
                assert "-32601" in answer.text  # resources are not served
            assert (await stack.stats())["requests"] == {}

    run_async(scenario())


def test_a_session_is_its_credential_s_and_its_objective_s(tmp_path: Path) -> None:
    async def scenario() -> None:
        async with running_stack(tmp_path, mcp=PATIENT) as stack:
            url = mcp_url(stack.runtime, "learner", consumer="tutor-app")
            async with httpx2.AsyncClient(timeout=10) as http:
                session = await _raw_session(http, url)
                foreign = {**session, "Authorization": f"Bearer {OTHER_APP_TOKEN}"}
                for method in ("POST", "GET", "DELETE"):
                    content = json.dumps(RAW_CALL) if method == "POST" else None
                    answer = await http.request(method, url, content=content, headers=foreign)
                    assert answer.status_code == 404, (method, answer.text)
                elsewhere = mcp_url(stack.runtime, "authoring", consumer="tutor-app")
                answer = await http.post(elsewhere, json=RAW_CALL, headers=session)
                assert answer.status_code == 404
                assert (await stack.stats())["requests"] == {}
                # the session's own credential still has it (the foreign DELETE ended nothing)
                answer = await http.post(url, json=RAW_CALL, headers=session)
                assert answer.status_code == 200 and '"isError":false' in answer.text
            assert await executions(stack) == {"inspect-context": 1}

    run_async(scenario())


def test_seif_serve_mcp_serves_the_official_client(tmp_path: Path) -> None:
    """`seif serve --mcp` as a subprocess: both revisions list and call once through it."""

    async def scenario() -> None:
        executor_app = EXECUTOR.create_app(tokens=TOOL_TOKENS, knobs={})
        async with serving(executor_app) as executor_url:
            config = write_config(tmp_path, executor_url)
            proc = start_serve(config, "--mcp", "--mcp-approval-wait", "2")
            try:
                base = await asyncio.to_thread(listening, proc)
                for mode in MODES:
                    async with mcp_client(base, "learner", mode=mode, consumer="tutor-app") as c:
                        listed = await c.list_tools()
                        names = [t.name for t in listed.tools]
                        assert names == ["inspect_context", "search_knowledge"]
                        meta = call_meta(f"e2e-{mode}")
                        got = await c.call_tool("inspect_context", READ_ARGS, meta=meta)
                        assert got.is_error is False, dumped(got)
                        assert _structured(got)["ref"] == READ_ARGS["ref"]
                        retried = await c.call_tool("inspect_context", READ_ARGS, meta=meta)
                        assert receipt_of(retried)["duplicate"] is True
                async with httpx2.AsyncClient(timeout=10) as http:
                    caps = (await http.get(base + "/v1/capabilities", headers=BEARER)).json()
                    assert "2026-07-28" in caps["integrations"]["mcp"]["revisions"]
            finally:
                stop(proc)
            stats = executor_app[EXECUTOR.STATE]
            assert dict(stats.executions) == {"inspect-context": 2}
            assert dict(stats.by_call) == {"e2e-legacy": 1, "e2e-auto": 1}

    run_async(scenario())
