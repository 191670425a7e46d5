"""MCP with tokens of an issuer: two users of one application, their tokens differing in the
``groups`` claim, are listed and decided as the rules on ``principal`` say, each in a context of
their own (a context keyed by credential, objective and coordinates is a user's, never shared
with another user of the same application)."""

from __future__ import annotations

from pathlib import Path

import pytest

from servers.mcp.app import McpOptions
from tests.support.identity import issuer_entry, provider
from tests.support.mcp_support import (
    CONTEXT_REF,
    MODES,
    call_meta,
    dumped,
    mcp_client,
    receipt_of,
)
from tests.support.principals import ALICE, BOB, KEY, token_of, write_principal_build
from tests.support.runtime_harness import CREDENTIALS, READ_ARGS, run_async, running_stack


@pytest.mark.parametrize("mode", MODES)
def test_two_users_of_one_application_each_have_their_own_context(
    tmp_path: Path, mode: str
) -> None:
    write_principal_build(tmp_path)

    async def scenario() -> None:
        async with provider([KEY]) as idp:
            document = {**CREDENTIALS, "issuers": [issuer_entry(idp.url)]}
            options = McpOptions(approval_wait_s=5)
            async with running_stack(tmp_path, credentials=document, mcp=options) as stack:
                seen = {}
                for subject, groups in ((ALICE, ["support", "authors"]), (BOB, ["learners"])):
                    async with mcp_client(
                        stack.runtime,
                        "authoring",
                        mode=mode,
                        consumer="course-authoring",
                        token=token_of(subject, groups),
                    ) as client:
                        listed = await client.list_tools()
                        read = await client.call_tool(
                            "inspect_context", READ_ARGS, meta=call_meta(f"read-{subject[:3]}")
                        )
                        seen[subject] = (listed, read)
                alice_list, alice_read = seen[ALICE]
                bob_list, bob_read = seen[BOB]
                assert [t.name for t in alice_list.tools] == [
                    "inspect_context",
                    "search_knowledge",
                    "propose_change",
                ]
                assert [t.name for t in bob_list.tools] == ["inspect_context", "propose_change"]
                assert (alice_list.meta or {})[CONTEXT_REF] != (bob_list.meta or {})[CONTEXT_REF]
                assert dumped(alice_read).get("isError") is not True, dumped(alice_read)
                denied = receipt_of(bob_read)
                assert (denied["status"], denied["reason"]) == ("DENIED", "CONDITION_DENIED")

    run_async(scenario())
