"""The SDK against `seif serve --require-turn` and the reference executor, both real
subprocesses on loopback: turns work where the runtime insists on them, requests without a turn
are refused as typed errors, the blocking client works from plain synchronous code, and a
runtime killed between an execute and the turn's reports leaves the result and lists the
failures."""

from __future__ import annotations

import asyncio
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from seif import (
    ContextDeliveryGateway,
    RuntimeClient,
    SeifTransportError,
    SyncRuntimeClient,
    SyncTurn,
    Turn,
    TurnRequiredError,
)
from tests.support.runtime_harness import (
    APP_TOKEN,
    READ_ARGS,
    executor_process,
    listening,
    start_serve,
    stop,
    write_config,
)

LEARNER = {"objective": "learner", "consumer": "tutor-app"}


@pytest.fixture(scope="module")
def executor_url(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    with executor_process(tmp_path_factory.mktemp("executor")) as url:
        yield url


def serve(root: Path, executor_url: str) -> tuple[subprocess.Popen[str], str]:
    proc = start_serve(write_config(root, executor_url), "--require-turn")
    try:
        return proc, listening(proc)
    except BaseException:
        stop(proc)
        raise


def test_async_client_under_require_turn_and_a_runtime_that_dies(
    tmp_path: Path, executor_url: str
) -> None:
    proc, url = serve(tmp_path, executor_url)
    try:

        async def scenario() -> None:
            async with RuntimeClient(url, APP_TOKEN, timeout_s=10) as sdk:

                async def handler(turn: Turn) -> str:
                    receipt = await turn.execute("inspect_context", "c1", READ_ARGS)
                    return str(receipt.output["title"])

                delivery = await sdk.run_agent_turn(LEARNER, handler)
                assert delivery.result == "Mean, median and outliers"
                assert delivery.reporting_errors == ()
                assert delivery.reported == ("inspect_context", "search_knowledge")

                with pytest.raises(TurnRequiredError) as no_turn:
                    await sdk.resolve("learner", consumer="tutor-app")
                assert (no_turn.value.status, no_turn.value.code) == (403, "TURN_REQUIRED")
                with pytest.raises(TurnRequiredError):  # refused before dispatch: raised
                    await sdk.execute(delivery.context_ref, "inspect-context", "c2", READ_ARGS)
                with pytest.raises(TurnRequiredError):  # the turn is over
                    await sdk.execute(
                        delivery.context_ref,
                        "inspect-context",
                        "c2",
                        READ_ARGS,
                        turn_id=delivery.turn_id,
                    )

                async def dies(turn: Turn) -> str:
                    receipt = await turn.execute("inspect_context", "d1", READ_ARGS)
                    await asyncio.to_thread(stop, proc)  # the runtime dies here
                    return f"answered after {receipt.status}"

                died = await sdk.run_agent_turn(LEARNER, dies)
                assert died.result == "answered after SUCCEEDED"
                assert [r.status for r in died.receipts] == ["SUCCEEDED"]
                steps = [e.step for e in died.reporting_errors]
                assert steps == ["report_disclosure", "complete_turn"]
                assert all(isinstance(e.error, SeifTransportError) for e in died.reporting_errors)
                assert died.reported is None

        asyncio.run(scenario())
    finally:
        stop(proc)


def test_sync_client_from_plain_code_under_require_turn(tmp_path: Path, executor_url: str) -> None:
    """No event loop here: the blocking client runs its own."""
    proc, url = serve(tmp_path, executor_url)
    try:
        with SyncRuntimeClient(url, APP_TOKEN, timeout_s=10) as sdk:

            def handler(turn: SyncTurn) -> list[str]:
                turn.report_disclosure(["inspect_context"])
                first = turn.execute("inspect_context", "c1", READ_ARGS)
                again = turn.execute("inspect_context", "c1", READ_ARGS)
                return [first.status, str(again.duplicate)]

            delivery = sdk.run_agent_turn(LEARNER, handler)
            assert delivery.result == ["SUCCEEDED", "True"]
            assert [r.duplicate for r in delivery.receipts] == [False, True]
            assert (delivery.reported, delivery.reporting_errors) == (("inspect_context",), ())

            def composer(messages: tuple[Any, ...], tools: tuple[Any, ...]) -> str:
                assert messages[0].role == "system"
                return tools[0]("g1", READ_ARGS).status

            forwarded = ContextDeliveryGateway(sdk).forward_agent(LEARNER, composer)
            assert forwarded.result == "SUCCEEDED"

            with pytest.raises(TurnRequiredError):
                sdk.resolve("learner", consumer="tutor-app")
            turn = sdk.start_turn()
            context = sdk.resolve("learner", consumer="tutor-app", turn_id=turn)
            receipt = sdk.execute_tool_by_name(
                context, "search_knowledge", "s1", {"query": "median", "limit": 2}, turn_id=turn
            )
            assert receipt.status == "SUCCEEDED"
            sdk.report_disclosure(context.context_ref, ["search_knowledge"], turn_id=turn)
            sdk.complete_turn(turn, "COMPLETED")

            def dies(turn: SyncTurn) -> str:
                turn.execute("inspect_context", "d1", READ_ARGS)
                stop(proc)
                return "kept"

            died = sdk.run_agent_turn(LEARNER, dies)
            assert died.result == "kept" and [r.status for r in died.receipts] == ["SUCCEEDED"]
            assert [e.step for e in died.reporting_errors] == ["report_disclosure", "complete_turn"]
            assert "report_disclosure: " in str(died.reporting_errors[0])
    finally:
        stop(proc)
