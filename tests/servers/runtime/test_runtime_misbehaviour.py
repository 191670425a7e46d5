"""A misbehaving executor seen through the runtime: every answer becomes a receipt with the
status the spec gives it, nothing is followed or retried, and no secret comes back."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from tests.support.runtime_harness import READ_ARGS, TOOL_TOKENS, run_async, running_stack

EXECUTE_ONLY = frozenset({"execute"})
SECRET = TOOL_TOKENS["inspect-context"]

# knobs, binding overrides, expected (status, reason), whether the executor acted
CASES: dict[str, tuple[dict[str, Any], dict[str, Any], tuple[str, str], bool]] = {
    "redirect": ({"redirect": True}, {}, ("UNKNOWN", "REDIRECT"), True),
    "oversized": ({"oversized_bytes": 70_000}, {}, ("UNKNOWN", "TOO_LARGE"), True),
    "oversized-for-binding": (
        {"oversized_bytes": 2_000},
        {"maxBytes": 1_000},
        ("UNKNOWN", "TOO_LARGE"),
        True,
    ),
    "reflect-raw": ({"reflect": "raw"}, {}, ("UNKNOWN", "CREDENTIAL_REFLECTED"), True),
    "reflect-escaped": ({"reflect": "escaped"}, {}, ("UNKNOWN", "CREDENTIAL_REFLECTED"), True),
    "reflect-header": ({"reflect": "header"}, {}, ("UNKNOWN", "CREDENTIAL_REFLECTED"), True),
    "invalid-json": ({"invalid_json": True}, {}, ("UNKNOWN", "INVALID_RESPONSE"), True),
    "invalid-output": ({"invalid_output": True}, {}, ("FAILED", "RESULT_INVALID"), True),
    "ok-false": ({"fail_code": "BACKEND_BUSY"}, {}, ("FAILED", "EXECUTOR_ERROR"), False),
    "timeout": ({"delay_ms": 700}, {"timeoutMs": 200}, ("UNKNOWN", "TIMEOUT"), True),
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_misbehaving_executor(tmp_path: Path, case: str) -> None:
    knob, binding, (status, reason), acted = CASES[case]

    async def scenario() -> None:
        async with running_stack(tmp_path, tool_overrides={"inspect-context": binding}) as s:
            ctx = (await s.resolve())["contextRef"]
            s.set_knobs("inspect-context", routes=EXECUTE_ONLY, **knob)
            reply = await s.call(
                "POST",
                "/v1/context/tools/execute",
                {
                    "contextRef": ctx,
                    "tool": "inspect-context",
                    "callId": "m1",
                    "arguments": READ_ARGS,
                },
            )
            assert reply.status == 200
            receipt = reply.body
            assert (receipt["status"], receipt["reason"]) == (status, reason)
            assert receipt["outputAvailable"] is False and "output" not in receipt
            assert receipt["duplicate"] is False
            raw = json.dumps(reply.body)
            assert SECRET not in raw and "\\u" not in raw
            if case == "ok-false":
                assert receipt["executorError"] == "BACKEND_BUSY"
                assert "simulated failure" not in raw

            stats = await s.stats()
            assert stats["requests"] == {"inspect-context": 1}  # sent once, never retried
            assert stats["byCallId"] == ({"m1": 1} if acted else {})
            assert stats["redirectTargetHits"] == 0  # never followed

            s.set_knobs("inspect-context")  # well behaved again: still no second dispatch
            again = await s.execute(ctx, "inspect-context", "m1", READ_ARGS)
            assert (again["status"], again["reason"], again["duplicate"]) == (status, reason, True)
            assert (await s.stats())["requests"] == {"inspect-context": 1}

            events = (await s.call("GET", f"/v1/traces/{ctx}")).body["events"]
            final = [e for e in events if e["event"] in ("RESULT", "UNKNOWN")]
            assert [(e["event"], e["status"], e["reason"]) for e in final] == [
                ("UNKNOWN" if status == "UNKNOWN" else "RESULT", status, reason)
            ]

    run_async(scenario())


def test_digest_change_after_resolve_is_not_dispatched(tmp_path: Path) -> None:
    async def scenario() -> None:
        async with running_stack(tmp_path) as s:
            ctx = (await s.resolve())["contextRef"]
            s.set_knobs("inspect-context", changed_digest=True)
            receipt = await s.execute(ctx, "inspect-context", "d1", READ_ARGS)
            assert (receipt["status"], receipt["reason"]) == ("FAILED", "TOOL_INCOMPATIBLE")
            assert receipt["outputAvailable"] is False
            stats = await s.stats()
            assert stats["requests"] == {} and stats["executions"] == {}

            ready = await s.call("GET", "/v1/ready", headers={})
            assert ready.status == 503
            assert ready.body["tools"]["inspect-context"] == "INCOMPATIBLE"
            blocked = await s.call(
                "POST", "/v1/context/resolve", {"objective": "authoring", "consumer": "tutor-app"}
            )
            assert blocked.status == 409
            assert blocked.body["error"]["code"] == "RESOLUTION_BLOCKED"
            assert [c["reason"] for c in blocked.body["causes"]] == ["TOOL_INCOMPATIBLE"]

            s.set_knobs("inspect-context")
            again = await s.execute(ctx, "inspect-context", "d1", READ_ARGS)
            assert (again["status"], again["duplicate"]) == ("FAILED", True)
            assert (await s.stats())["requests"] == {}

    run_async(scenario())


def test_optional_tool_that_stopped_answering_is_omitted(tmp_path: Path) -> None:
    async def scenario() -> None:
        async with running_stack(tmp_path) as s:
            s.set_knobs("search-knowledge", redirect=True, routes=frozenset({"describe"}))
            resolved = await s.resolve()
            assert "search_knowledge" not in [t["name"] for t in resolved["tools"]]
            omitted = {o["id"]: o["reason"] for o in resolved["omitted"]}
            assert omitted["search-knowledge"] == "TOOL_UNAVAILABLE"
            receipt = await s.execute(
                resolved["contextRef"], "search-knowledge", "s1", {"query": "median", "limit": 2}
            )
            assert (receipt["status"], receipt["reason"]) == ("DENIED", "TOOL_NOT_DISCLOSED")
            assert (await s.stats())["redirectTargetHits"] == 0

    run_async(scenario())
