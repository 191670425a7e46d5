"""Once-only dispatch under concurrency: many executes of one callId against a slow executor,
through real HTTP, reach the executor exactly once; a cancelled client loses no receipt."""

from __future__ import annotations

import asyncio
from collections import Counter
from pathlib import Path
from typing import Any

from tests.support.runtime_harness import READ_ARGS, Stack, knobs, run_async, running_stack

SLOW = {"inspect-context": knobs(delay_ms=200, routes=frozenset({"execute"}))}


async def _burst(s: Stack, ctx: str, call_id: str, arguments: list[Any]) -> list[dict[str, Any]]:
    return list(
        await asyncio.gather(*(s.execute(ctx, "inspect-context", call_id, a) for a in arguments))
    )


def test_fifty_concurrent_executes_dispatch_once(tmp_path: Path) -> None:
    async def scenario() -> None:
        async with running_stack(tmp_path, executor_knobs=SLOW) as s:
            ctx = (await s.resolve())["contextRef"]
            receipts = await _burst(s, ctx, "same", [READ_ARGS] * 50)
            stats = await s.stats()
            assert stats["byCallId"] == {"same": 1}
            assert stats["requests"] == {"inspect-context": 1}
            originals = [r for r in receipts if not r["duplicate"]]
            duplicates = [r for r in receipts if r["duplicate"]]
            assert len(originals) == 1 and len(duplicates) == 49
            [original] = originals
            assert original["status"] == "SUCCEEDED" and original["outputAvailable"] is True
            for r in duplicates:
                assert r["status"] == original["status"] and r["reason"] is None
                assert r["outputAvailable"] is False and "output" not in r
            # afterwards, still the same answer and still one execution
            later = await s.execute(ctx, "inspect-context", "same", READ_ARGS)
            assert (later["status"], later["duplicate"]) == ("SUCCEEDED", True)
            assert (await s.stats())["byCallId"] == {"same": 1}

    run_async(scenario())


def test_concurrent_conflicting_arguments_dispatch_once(tmp_path: Path) -> None:
    other = {**READ_ARGS, "depth": 1}

    async def scenario() -> None:
        async with running_stack(tmp_path, executor_knobs=SLOW) as s:
            ctx = (await s.resolve())["contextRef"]
            receipts = await _burst(s, ctx, "mixed", [READ_ARGS, other] * 15)
            assert (await s.stats())["byCallId"] == {"mixed": 1}
            [winner] = [r for r in receipts if r["status"] == "SUCCEEDED" and not r["duplicate"]]
            won_with = READ_ARGS if "children" not in winner["output"] else other
            expected = Counter(
                "duplicate" if a == won_with else "conflict" for a in [READ_ARGS, other] * 15
            )
            seen = Counter(
                "conflict" if r["reason"] == "CALL_CONFLICT" else "duplicate" for r in receipts
            )
            assert seen == expected
            for r in receipts:
                if r["reason"] == "CALL_CONFLICT":
                    assert r["status"] == "DENIED" and r["duplicate"] is False
                elif r is not winner:
                    assert (r["status"], r["duplicate"]) == ("SUCCEEDED", True)

    run_async(scenario())


def test_a_cancelled_client_loses_neither_action_nor_receipt(tmp_path: Path) -> None:
    slow = {"inspect-context": knobs(delay_ms=600, routes=frozenset({"execute"}))}

    async def scenario() -> None:
        async with running_stack(tmp_path, executor_knobs=slow) as s:
            ctx = (await s.resolve())["contextRef"]
            first = asyncio.ensure_future(s.execute(ctx, "inspect-context", "gone", READ_ARGS))
            for _ in range(200):  # until the executor holds the request
                if (await s.stats())["byCallId"].get("gone"):
                    break
                await asyncio.sleep(0.01)
            first.cancel()
            await asyncio.gather(first, return_exceptions=True)
            repeat = await s.execute(ctx, "inspect-context", "gone", READ_ARGS)
            assert (repeat["status"], repeat["duplicate"]) == ("SUCCEEDED", True)
            assert (await s.stats())["byCallId"] == {"gone": 1}
            traces = await s.call("GET", f"/v1/traces/{ctx}")
            results = [e for e in traces.body["events"] if e["event"] == "RESULT"]
            assert [(e["callId"], e["status"]) for e in results] == [("gone", "SUCCEEDED")]

    run_async(scenario())
