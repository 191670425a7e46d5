"""Shared by the replay tests: the reference project, a candidate that withholds a tool, records
written the way the runtime writes them, and a recorded session of the real runtime (in process,
with the synthetic executor on loopback)."""

from __future__ import annotations

import asyncio
import copy
import json
import runpy
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import aiohttp
from aiohttp import web

from compiler.builds.build import Build, make_build, write_build
from compiler.driver import compile_document
from policy import disclose
from policy.ir import Project
from policy.json.strict import loads
from servers.runtime import events
from tests.support.paths import ROOT
from tests.support.runtime_harness import serving

REFERENCE = ROOT / "reference" / "agent-tools" / "context-project.json"
EXECUTOR = runpy.run_path(str(ROOT / "examples" / "reference-tools" / "executor.py"))

TOOL_ENV = {
    "inspect-context": "CONTEXT_TOOL_INSPECT_TOKEN",
    "search-knowledge": "CONTEXT_TOOL_SEARCH_TOKEN",
    "propose-change": "CONTEXT_TOOL_PROPOSE_TOKEN",
}
TOOL_TOKENS = {tool: f"{tool}-secret-7c1e" for tool in TOOL_ENV}
APP_TOKEN = "replay-app-token-2d9f"
ENV = {
    "SEIF_APP_TOKEN": APP_TOKEN,
    "SEIF_CONTEXT_TOOL_APPROVAL_TOKEN": "replay-approval-token-5b3a",
    **{TOOL_ENV[t]: v for t, v in TOOL_TOKENS.items()},
}


def reference_document() -> dict[str, Any]:
    document: dict[str, Any] = loads(REFERENCE.read_text())
    return document


def compiled(document: Mapping[str, Any]) -> Project:
    result = compile_document(document)
    assert result.project is not None, result.diagnostics
    return result.project


def without_search_for_learner() -> Project:
    """The candidate of the worked example: the learner profile excludes search-knowledge."""
    document = copy.deepcopy(reference_document())
    learner = next(p for p in document["profiles"] if p["id"] == "learner")
    learner["toolRules"] = [
        {"tool": "search-knowledge", "participation": "exclude"}
        if rule["tool"] == "search-knowledge"
        else rule
        for rule in learner["toolRules"]
    ]
    return compiled(document)


def reference_build() -> Build:
    return make_build(compiled(reference_document()))


def ready(ir: Project) -> dict[str, dict[str, str]]:
    return {
        t.id: {"state": "READY", "version": t.version, "contractDigest": t.contract_digest}
        for t in ir.tools
    }


def disclosed_record(
    ir: Project,
    build: str,
    objective: str,
    observations: Mapping[str, Any],
    coordinates: Mapping[str, Any] | None = None,
    *,
    at: int = 1_800_000_000_000,
    context_ref: str = "ctx_1",
    credential: str | None = None,
    principal: Mapping[str, Any] | None = None,
    resolved_by: Mapping[str, Any] | None = None,
) -> dict[str, Any]:
    """A ``DISCLOSED`` record with the fields ``servers.runtime.service.Runtime.resolve`` logs:
    resolved by ``credential`` (a static credential's principal) or by a token whose recorded
    principal is ``principal`` (its subject a fingerprint); ``resolved_by``: the principal the
    disclosure was made with, when not the recorded one (a subject in clear)."""
    coords = {k: (coordinates or {}).get(k) or "" for k in ("consumer", "environment")}
    coords |= {"deployment": "", "trace": ""}
    who = resolved_by or principal or ({"clientId": credential} if credential else None)
    disclosure = disclose(ir, objective, observations, context=coords, principal=who)
    record = {
        "event": "DISCLOSED",
        "at": at,
        "build": build,
        "environment": "test",
        "bindingRevision": 1,
        "coordinates": events.coordinates({**coords, "objective": objective}),
        "objective": objective,
        "resolvedAt": at,
        "observations": dict(observations),
        "disclosure": events.disclosure_summary(disclosure),
    }
    if disclosure.resolved:
        record["contextRef"] = context_ref
    if credential is not None:
        record["credential"] = credential
    if principal is not None:
        record["principal"] = dict(principal)
    return record


# ---------------------------------------------------------------- the real runtime


@dataclass
class Session:
    build: Path
    data: Path
    digest: str
    objectives: list[tuple[str, int]]
    """(objective, HTTP status) of each resolve, in order."""


def _write_config(root: Path, executor: str) -> tuple[Path, Path, Path]:
    build = root / "build"
    write_build(compiled(reference_document()), build)
    bindings = {
        "environment": "test",
        "revision": 3,
        "tools": {
            t: {"endpoint": f"{executor}/{t}", "secretRef": f"env:{var}"}
            for t, var in TOOL_ENV.items()
        },
    }
    credentials = {
        "credentials": [
            {
                "id": "tutor-app",
                "tokenRef": "env:SEIF_APP_TOKEN",
                "scopes": ["context.resolve", "tools.execute", "traces.read"],
            }
        ]
    }
    (root / "bindings.json").write_text(json.dumps(bindings))
    (root / "credentials.json").write_text(json.dumps(credentials))
    return build, root / "bindings.json", root / "credentials.json"


async def _post(http: aiohttp.ClientSession, url: str, body: Any) -> tuple[int, Any]:
    headers = {"Authorization": f"Bearer {APP_TOKEN}"}
    async with http.post(url, json=body, headers=headers) as reply:
        return reply.status, await reply.json()


async def _flow(runtime: str, executor_app: web.Application, during: Any) -> list[tuple[str, int]]:
    """Resolves under changing availability, a read, a report; ``during(data)`` runs while the
    runtime still serves."""
    state, knobs = executor_app[EXECUTOR["STATE"]], EXECUTOR["Knobs"]
    seen: list[tuple[str, int]] = []
    async with aiohttp.ClientSession() as http:

        async def resolve(objective: str, consumer: str) -> Any:
            url = f"{runtime}/v1/context/resolve"
            status, body = await _post(http, url, {"objective": objective, "consumer": consumer})
            seen.append((objective, status))
            return body

        first = await resolve("learner", "tutor-app")
        await resolve("authoring", "course-authoring")
        await resolve("learner", "tutor-app")
        state.knobs["search-knowledge"] = knobs(invalid_json=True)  # unavailable
        await resolve("learner", "tutor-app")
        await resolve("authoring", "course-authoring")
        state.knobs["propose-change"] = knobs(changed_digest=True)  # incompatible
        await resolve("authoring", "course-authoring")
        state.knobs.clear()
        call = {
            "contextRef": first["contextRef"],
            "tool": "inspect-context",
            "callId": "read-1",
            "arguments": {"ref": "course/data-literacy/module-2/lesson-3"},
        }
        await _post(http, f"{runtime}/v1/context/tools/execute", call)
        report = {"contextRef": first["contextRef"], "tools": ["inspect_context"]}
        await _post(http, f"{runtime}/v1/context/disclosures", report)
        state.knobs["inspect-context"] = knobs(invalid_json=True)  # blocks learner
        await resolve("learner", "tutor-app")
        state.knobs.clear()
        await resolve("learner", "tutor-app")
        await during()
    return seen


async def record_session(root: Path, during: Any = None) -> Session:
    """A session of the real runtime (``prepare`` + ``create_app``) against the synthetic
    executor; both are stopped when this returns."""
    from servers.http.app import create_app
    from servers.runtime.startup import prepare

    async def nothing() -> None:
        await asyncio.sleep(0)

    executor_app = EXECUTOR["create_app"](tokens=TOOL_TOKENS)
    async with serving(executor_app) as executor:
        build, bindings, credentials = _write_config(root, executor)
        prepared = prepare(
            build_dir=build,
            bindings_path=bindings,
            credentials_path=credentials,
            data_dir=root / "data",
            env=ENV,
            keyring_get=lambda _service, _user: None,
        )
        try:
            async with serving(create_app(prepared)) as runtime:
                seen = await _flow(runtime, executor_app, during or nothing)
        finally:
            prepared.close()
    return Session(build, root / "data", prepared.build.digest, seen)
