"""docs/sdk.md's native approval examples run as written against a real runtime and print what
the page says: the OpenAI Agents SDK's and LangGraph's, each waiting for an approver while this
test approves the held call through the runtime's approve route, as the page says an operator
may."""

from __future__ import annotations

import asyncio
import re
from pathlib import Path
from typing import Any

import pytest

from tests.support.paths import ROOT
from tests.support.runtime_harness import APP_TOKEN, APPROVAL, Stack, stack_in_thread

DOC = ROOT / "docs" / "sdk.md"


def example(heading: str) -> tuple[str, str]:
    """The Python block of the ``### heading`` subsection and the block of what it prints."""
    text = DOC.read_text(encoding="utf-8")
    start = text.index(f"\n### {heading}\n")
    ends = [i for i in (text.find("\n### ", start + 1), text.find("\n## ", start + 1)) if i > 0]
    found = re.findall(r"```(\w*)\n(.*?)```", text[start : min(ends)], flags=re.DOTALL)
    code = next(body for lang, body in found if lang == "python" and "asyncio.run" in body)
    printed = next(body for lang, body in found if lang == "")
    return code, printed


async def approve_when_held(s: Stack) -> str:
    """Wait for the one call held for approval and approve it, as an operator would."""
    for _ in range(600):
        reply = await s.call("GET", "/v1/context/tools/pending", headers=APPROVAL)
        assert reply.status == 200, reply
        if reply.body["pending"]:
            (item,) = reply.body["pending"]
            await s.approval_id(item["contextRef"], item["tool"], item["callId"], item["arguments"])
            found: str = item["callId"]
            return found
        await asyncio.sleep(0.05)
    raise AssertionError("no call was held for approval")


@pytest.mark.parametrize(
    ("heading", "call_id"),
    [("Approvals in the OpenAI Agents SDK", "call_7"), ("Approvals in LangGraph", "call_8")],
)
def test_the_native_approval_example_runs_as_written(
    heading: str,
    call_id: str,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    code, expected = example(heading)
    with stack_in_thread(tmp_path) as threaded:
        monkeypatch.setenv("SEIF_URL", threaded.stack.runtime)
        monkeypatch.setenv("SEIF_APP_TOKEN", APP_TOKEN)
        approving = asyncio.run_coroutine_threadsafe(
            approve_when_held(threaded.stack), threaded.loop
        )
        namespace: dict[str, Any] = {"__name__": "__main__"}
        exec(compile(code, str(DOC), "exec"), namespace)
        assert approving.result(30) == call_id
        stats = threaded.run(threaded.stack.stats())
    printed = [line.rstrip() for line in capsys.readouterr().out.splitlines()]
    assert printed == expected.strip().splitlines()
    assert stats["byCallId"] == {call_id: 1}  # the write ran once
