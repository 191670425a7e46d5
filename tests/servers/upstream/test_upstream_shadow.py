"""Shadow mode for upstream-bound tools (docs/upstream-mcp.md: "traces, replay and shadow builds
work for an upstream tool as for any other"): a runtime serving tools bound to a stdio upstream
MCP server, with a candidate build in shadow (``seif serve --shadow``) that decides otherwise on
them. Each call is dispatched once as the served build decides, never on the candidate's account;
the candidate's differences are logged as ``SHADOW`` records exactly as for any other tool
(tests/servers/runtime/test_shadow.py): the disclosure's is the what-if of the same log.
"""

from __future__ import annotations

import asyncio
import copy
import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import aiohttp

from compiler import compile_project
from compiler.builds.build import make_build, write_build
from policy.ir import Project
from policy.offline.replay import replay
from policy.offline.shadow import report
from policy.offline.whatif import what_if
from servers.http.app import create_app
from servers.log.reading import read_records
from tests.support import upstream_runtime as ur
from tests.support.runtime_harness import BEARER, serving

SERVED_DENIES = "forbidden"
"""The text the served build denies ``up-echo`` by a condition (the candidate allows it)."""
CANDIDATE_DENIES = "hello"
"""The text the candidate denies ``up-echo`` by a condition (the served build allows it)."""


def _with_rules(rules: Mapping[str, dict[str, Any]]) -> Project:
    """:func:`ur.project` over ``up`` with the ``ops`` profile's rule of each tool in ``rules``
    replaced (no contract changes: the pins stay those the upstream lists)."""
    document = copy.deepcopy(ur.document(("up",)))
    (profile,) = document["profiles"]
    profile["toolRules"] = [
        {"tool": rule["tool"], **rules[rule["tool"]]} if rule["tool"] in rules else rule
        for rule in profile["toolRules"]
    ]
    return compile_project(document)


def _deny_echo_of(text: str) -> dict[str, Any]:
    condition = {"when": f"args.text == '{text}'", "then": "DENY", "reason": "not this text"}
    return {"participation": "include", "conditions": [condition]}


SERVED = _with_rules({"up-echo": _deny_echo_of(SERVED_DENIES)})
CANDIDATE = _with_rules(
    {"up-echo": _deny_echo_of(CANDIDATE_DENIES), "up-fail": {"participation": "exclude"}}
)


async def _call(
    http: aiohttp.ClientSession, url: str, method: str, path: str, body: Any = None
) -> Any:
    async with http.request(method, url + path, json=body, headers=BEARER) as reply:
        return reply.status, await reply.json()


def test_a_shadow_build_decides_upstream_tools_beside_the_served_one(tmp_path: Path) -> None:
    state, logs = tmp_path / "up", tmp_path / "logs"
    state.mkdir()
    logs.mkdir()
    write_build(CANDIDATE, tmp_path / "candidate")
    prepared = ur.prepared_with_upstreams(
        tmp_path, {"up": state}, served=SERVED, shadow_dir=tmp_path / "candidate"
    )
    assert prepared.shadow is not None and prepared.shadow.digest == make_build(CANDIDATE).digest

    async def traffic() -> tuple[str, dict[str, Any]]:
        app = create_app(prepared)
        async with serving(app) as url, aiohttp.ClientSession() as http:
            for _ in range(100):
                _, ready = await _call(http, url, "GET", "/v1/ready")
                if all(ready["tools"].get(t) == "READY" for t in ("up-echo", "up-fail")):
                    break
                await asyncio.sleep(0.1)
            assert ready["tools"]["up-echo"] == ready["tools"]["up-fail"] == "READY", ready
            status, resolved = await _call(
                http, url, "POST", "/v1/context/resolve", {"objective": "ops", "consumer": "c"}
            )
            assert status == 200, resolved
            assert {"up_echo", "up_fail", "up_refuse"} <= {t["name"] for t in resolved["tools"]}
            ref = resolved["contextRef"]

            async def execute(tool: str, call_id: str, text: str) -> Any:
                body = {"contextRef": ref, "tool": tool, "callId": call_id,
                        "arguments": {"text": text}}  # fmt: skip
                status, receipt = await _call(http, url, "POST", "/v1/context/tools/execute", body)
                assert status == 200, receipt
                return receipt

            receipts = {
                "c1": await execute("up-echo", "c1", CANDIDATE_DENIES),
                "c2": await execute("up-echo", "c2", SERVED_DENIES),
                "c3": await execute("up-fail", "c3", "x"),
                "c4": await execute("up-refuse", "c4", "x"),
                "again": await execute("up-echo", "c1", CANDIDATE_DENIES),
            }
            return ref, receipts

    try:
        ref, receipts = asyncio.run(traffic())
    finally:
        prepared.close()

    # served as the served build says, whatever the candidate would have decided
    assert (receipts["c1"]["status"], receipts["c1"]["output"]) == (
        "SUCCEEDED",
        {"text": CANDIDATE_DENIES},
    )
    assert (receipts["c2"]["status"], receipts["c2"]["reason"]) == ("DENIED", "CONDITION_DENIED")
    assert (receipts["c3"]["status"], receipts["c3"]["reason"]) == ("FAILED", "UPSTREAM_TOOL_ERROR")
    assert (receipts["c4"]["status"], receipts["c4"]["reason"]) == ("FAILED", "UPSTREAM_ERROR")
    assert receipts["again"]["duplicate"] is True
    # each call the served build allowed dispatched once; none on the candidate's account
    sent = ur.calls(state)
    assert [(c["name"], c["meta"]["io.seif/callId"]) for c in sent] == [
        ("echo", "c1"),
        ("fail", "c3"),
        ("refuse", "c4"),
    ]
    assert all(c["arguments"] != {"text": SERVED_DENIES} for c in sent)

    records = list(read_records(tmp_path / "data" / "decisions.cbor"))
    build = prepared.build.digest
    shadows = [r for r in records if r["event"] == "SHADOW"]
    assert shadows and all(r["candidate"] == make_build(CANDIDATE).digest for r in shadows)
    # the disclosure: exactly the what-if of the DISCLOSED record
    expected = what_if(SERVED, CANDIDATE, records, build_digest=build)
    assert expected.considered == 1
    by_ref = {c.record.context_ref: c.change.to_json() for c in expected.changes}
    logged = {r["contextRef"]: r["disclosure"] for r in shadows if r["kind"] == "disclosure"}
    assert logged == by_ref and set(logged) == {ref}
    assert logged[ref]["newlyWithheld"] == [{"id": "up-fail", "reason": None}]
    # the calls: outcome and reason under each build, for those that differ only (not c4)
    calls = {r["call"]["callId"]: r["call"] for r in shadows if r["kind"] == "call"}
    assert calls == {
        "c1": {
            "tool": "up-echo",
            "callId": "c1",
            "baseline": {"outcome": "ALLOW", "reason": None},
            "candidate": {"outcome": "DENY", "reason": "CONDITION_DENIED"},
        },
        "c2": {
            "tool": "up-echo",
            "callId": "c2",
            "baseline": {"outcome": "DENY", "reason": "CONDITION_DENIED"},
            "candidate": {"outcome": "ALLOW", "reason": None},
        },
        "c3": {
            "tool": "up-fail",
            "callId": "c3",
            "baseline": {"outcome": "ALLOW", "reason": None},
            "candidate": {"outcome": "DENY", "reason": "TOOL_NOT_DISCLOSED"},
        },
    }
    assert all(r["contextRef"] == ref for r in shadows)
    # every decision record (the duplicate is not one) is marked as compared; the report
    decisions = [r for r in records if r["event"] in ("DISCLOSED", "DENIED", "INTENT")]
    assert len(decisions) == 1 + 4
    assert all(r.get("shadow") == make_build(CANDIDATE).digest for r in decisions)
    summary = report(records)["candidates"][0]
    assert (summary["compared"], summary["differ"], summary["failed"]) == (5, 4, 0)
    assert summary["disclosures"]["newlyWithheld"] == {"up-fail": 1}
    assert summary["calls"]["transitions"] == {
        "ALLOW -> DENY CONDITION_DENIED": 1,
        "DENY CONDITION_DENIED -> ALLOW": 1,
        "ALLOW -> DENY TOOL_NOT_DISCLOSED": 1,
    }
    shown = json.dumps(shadows)
    assert SERVED_DENIES not in shown and CANDIDATE_DENIES not in shown  # no argument
    # replay of the served build over the same log, SHADOW records and all, agrees
    replayed = replay(SERVED, records, build_digest=build)
    assert replayed.ok and replayed.disclosed == 1, replayed
