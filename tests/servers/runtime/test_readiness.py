"""`GET /v1/ready` agrees with resolve: a tool an objective requires that is not bound, or not
ready, makes the runtime not ready (503), named with its state and the objectives it blocks,
exactly the tools a resolve of those objectives names in its `RESOLUTION_BLOCKED` causes; a tool
no objective requires may stay unbound. Against the real runtime and the synthetic executor on
loopback, the answer held to the served OpenAPI document."""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import jsonschema  # type: ignore[import-untyped]  # no stubs; the reference implementation

from tests.support.runtime_harness import (
    EXECUTOR,
    TOOL_TOKENS,
    Stack,
    bindings_document,
    run_async,
    runtime_stack,
    serving,
    write_config,
)

LEARNER = {"objective": "learner", "consumer": "tutor-app"}
AUTHORING = {"objective": "authoring", "consumer": "course-authoring"}


@contextlib.asynccontextmanager
async def bound(root: Path, tools: dict[str, str | None], **knobs: Any) -> AsyncIterator[Stack]:
    """The reference build served with only ``tools`` bound: tool id -> its endpoint's path on
    the synthetic executor (None: its own path)."""
    executor = EXECUTOR.create_app(tokens=TOOL_TOKENS, knobs=knobs)
    async with serving(executor) as url:
        moved = {t: {"endpoint": f"{url}/{path}"} for t, path in tools.items() if path}
        bindings = bindings_document(url, moved)
        bindings["tools"] = {t: b for t, b in bindings["tools"].items() if t in tools}
        config = write_config(root, url, bindings=bindings)
        async with runtime_stack(config, url, executor) as stack:
            yield stack


async def _declared(s: Stack, answer: dict[str, Any], status: str) -> None:
    served = await s.call("GET", "/v1/openapi.json", headers={})
    declared = served.body["paths"]["/v1/ready"]["get"]["responses"][status]
    schema = declared["content"]["application/json"]["schema"]
    jsonschema.validate(answer, {**schema, "components": served.body["components"]})


async def _causes(s: Stack, objective: dict[str, str]) -> list[str]:
    answer = await s.call("POST", "/v1/context/resolve", objective)
    assert answer.status == 409 and answer.body["error"]["code"] == "RESOLUTION_BLOCKED"
    return [c["id"] for c in answer.body["causes"]]


def test_an_unbound_required_tool_is_named_and_the_runtime_is_not_ready(tmp_path: Path) -> None:
    async def scenario() -> None:
        async with bound(tmp_path, {"search-knowledge": None, "propose-change": None}) as s:
            ready = await s.call("GET", "/v1/ready", headers={})
            assert ready.status == 503
            assert ready.body == {
                "ready": False,
                "tools": {
                    "inspect-context": "UNBOUND",
                    "search-knowledge": "READY",
                    "propose-change": "READY",
                },
                "blocking": [
                    {
                        "tool": "inspect-context",
                        "state": "UNBOUND",
                        "objectives": ["learner", "authoring"],
                    }
                ],
            }
            await _declared(s, ready.body, "503")
            # resolve agrees: each objective is blocked by exactly that tool
            assert await _causes(s, LEARNER) == ["inspect-context"]
            assert await _causes(s, AUTHORING) == ["inspect-context"]

    run_async(scenario())


def test_a_bound_required_tool_that_is_unavailable_is_named(tmp_path: Path) -> None:
    tools: dict[str, str | None] = {
        "inspect-context": "no-such-tool",  # bound, and the executor answers 404 to it
        "search-knowledge": None,
    }

    async def scenario() -> None:
        async with bound(tmp_path, tools) as s:
            ready = await s.call("GET", "/v1/ready", headers={})
            assert ready.status == 503
            assert ready.body["tools"]["inspect-context"] == "UNAVAILABLE"
            assert ready.body["blocking"] == [
                {
                    "tool": "inspect-context",
                    "state": "UNAVAILABLE",
                    "objectives": ["learner", "authoring"],
                }
            ]
            assert "propose-change" not in ready.body["tools"]  # unbound, required by none
            assert await _causes(s, LEARNER) == ["inspect-context"]

    run_async(scenario())


def test_tools_no_objective_requires_may_stay_unbound(tmp_path: Path) -> None:
    async def scenario() -> None:
        async with bound(tmp_path, {"inspect-context": None}) as s:
            ready = await s.call("GET", "/v1/ready", headers={})
            assert ready.status == 200
            assert ready.body == {"ready": True, "tools": {"inspect-context": "READY"}}
            await _declared(s, ready.body, "200")
            resolved = await s.call("POST", "/v1/context/resolve", LEARNER)
            assert resolved.status == 200
            assert [t["name"] for t in resolved.body["tools"]] == ["inspect_context"]

    run_async(scenario())
