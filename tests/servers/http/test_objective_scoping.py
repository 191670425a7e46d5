"""A credential or an issuer narrowed to some ``objectives`` (docs/identity.md), through the real
runtime (``prepare`` + ``create_app``, MCP mounted, the synthetic executor, a JWKS endpoint on
loopback): it resolves those, and any other objective, declared or not, is 403
``OBJECTIVE_FORBIDDEN`` over HTTP and at the MCP endpoint, before anything is resolved, recorded
or opened; the others resolve as before; an objective the build does not declare is refused at
start."""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

import pytest

from seif import PermissionDeniedError, RuntimeClient
from servers.mcp.app import McpOptions
from servers.runtime.startup import StartRefused
from tests.support.identity import claims, issuer_entry, provider, rsa_key, token
from tests.support.mcp_support import raw_headers, raw_initialize
from tests.support.runtime_harness import (
    BEARER,
    CREDENTIALS,
    ENV,
    OPERATOR_TOKEN,
    READ_ARGS,
    Stack,
    prepare_config,
    run_async,
    running_stack,
    write_config,
)

LEARNER_TOKEN = "learner-app-token-7a3e9c1f5b"
LEARNER_APP = {
    "id": "learner-app",
    "tokenRef": "env:SEIF_LEARNER_TOKEN",
    "scopes": ["context.resolve", "tools.execute", "traces.read"],
    "objectives": ["learner"],
}
KEY = rsa_key("k1")
INITIALIZE = raw_initialize("2025-06-18")
MCP_HEADERS = raw_headers("2025-06-18")
FORBIDDEN = {
    "error": {
        "code": "OBJECTIVE_FORBIDDEN",
        "message": "the credential may not resolve this objective",
    }
}


def bearer(presented: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {presented}"}


def document(jwks_uri: str) -> dict[str, Any]:
    """The harness's credentials, ``learner-app`` narrowed to ``learner``, and an issuer whose
    tokens are narrowed to it too."""
    entry = issuer_entry(jwks_uri, objectives=["learner"])
    return {"credentials": [*CREDENTIALS["credentials"], LEARNER_APP], "issuers": [entry]}


async def resolve(s: Stack, objective: str, headers: dict[str, str]) -> Any:
    body = {"objective": objective, "consumer": "course-authoring"}
    return await s.call("POST", "/v1/context/resolve", body, headers=headers)


async def log_head(s: Stack) -> Any:
    head = await s.call("GET", "/v1/traces/head", headers=bearer(OPERATOR_TOKEN))
    assert head.status == 200, head
    return head.body


def test_a_narrowed_credential_resolves_only_its_objectives(tmp_path: Path) -> None:
    async def scenario() -> None:
        async with (
            provider([KEY]) as idp,
            running_stack(
                tmp_path,
                credentials=document(idp.url),
                env={**ENV, "SEIF_LEARNER_TOKEN": LEARNER_TOKEN},
                mcp=McpOptions(approval_wait_s=1),
            ) as s,
        ):
            presented = token(KEY, claims(int(time.time())))
            for who in (bearer(LEARNER_TOKEN), bearer(presented)):
                allowed = await resolve(s, "learner", who)
                assert allowed.status == 200, allowed
                assert allowed.body["objective"] == "learner"
                before = await log_head(s)
                # another objective of the build, and one it does not declare: both forbidden
                # (a narrowed credential learns nothing of what the build declares)
                for objective in ("authoring", "no-such-objective"):
                    refused = await resolve(s, objective, who)
                    assert (refused.status, refused.body) == (403, FORBIDDEN), refused
                    mcp = await s.call(
                        "POST", f"/mcp/{objective}", INITIALIZE, headers={**MCP_HEADERS, **who}
                    )
                    assert (mcp.status, mcp.body) == (403, FORBIDDEN), mcp
                    assert "Mcp-Session-Id" not in mcp.headers  # no session was opened
                assert await log_head(s) == before  # nothing resolved, nothing recorded
                opened = await s.call(
                    "POST", "/mcp/learner", INITIALIZE, headers={**MCP_HEADERS, **who}
                )
                assert opened.status == 200, opened

            # the Python SDK raises its 403 error, with the code
            async with RuntimeClient(s.runtime, LEARNER_TOKEN) as sdk:
                with pytest.raises(PermissionDeniedError) as e403:
                    await sdk.resolve("authoring", consumer="course-authoring")
            assert (e403.value.status, e403.value.code) == (403, "OBJECTIVE_FORBIDDEN")

            # a credential without `objectives` resolves every objective, as before
            assert (await s.resolve("authoring"))["objective"] == "authoring"
            unknown = await resolve(s, "no-such-objective", BEARER)
            assert (unknown.status, unknown.body["error"]["code"]) == (400, "OBJECTIVE_UNKNOWN")
            headers = {**MCP_HEADERS, **BEARER}
            mcp = await s.call("POST", "/mcp/authoring", INITIALIZE, headers=headers)
            assert mcp.status == 200, mcp

    run_async(scenario())


def test_an_objective_the_build_does_not_declare_is_refused_at_start(tmp_path: Path) -> None:
    credentials = {"credentials": [{**LEARNER_APP, "objectives": ["learner", "lerner"]}]}
    config = write_config(tmp_path, "http://127.0.0.1:9", credentials=credentials)
    with pytest.raises(StartRefused) as refused:
        prepare_config(config, env={**ENV, "SEIF_LEARNER_TOKEN": LEARNER_TOKEN})
    [problem] = refused.value.diagnostics
    assert (problem.code, problem.pointer) == ("UNKNOWN_OBJECTIVE", "/credentials/0/objectives/1")
    assert problem.file == str(config.credentials)
    assert "did you mean `learner`" in problem.message

    issuer = issuer_entry("https://idp.example/jwks", objectives=["tutoring"])
    config.credentials.write_text(json.dumps({"issuers": [issuer]}))
    with pytest.raises(StartRefused) as refused:
        prepare_config(config)
    [problem] = refused.value.diagnostics
    assert (problem.code, problem.pointer) == ("ISSUER_INVALID", "/issuers/0/objectives/0")
    assert "`tutoring` is not declared" in problem.message
    assert not config.data.exists()  # a refusal creates nothing


def test_a_context_of_an_objective_narrowed_away_since_is_no_longer_its_credentials(
    tmp_path: Path,
) -> None:
    """`learner-app` resolves `authoring` while it may; restarted with `learner-app` narrowed to
    `learner`, its `authoring` context answers as an unknown one (execute, traces), while its
    `learner` context still serves it."""
    unnarrowed = {**LEARNER_APP, "objectives": ["learner", "authoring"]}
    env = {**ENV, "SEIF_LEARNER_TOKEN": LEARNER_TOKEN}
    who = bearer(LEARNER_TOKEN)

    def credentials(app: dict[str, Any]) -> dict[str, Any]:
        return {"credentials": [*CREDENTIALS["credentials"], app]}

    async def scenario() -> None:
        async with running_stack(tmp_path, credentials=credentials(unnarrowed), env=env) as s:
            authoring = (await resolve(s, "authoring", who)).body["contextRef"]
            learner = (await resolve(s, "learner", who)).body["contextRef"]
        async with running_stack(tmp_path, credentials=credentials(LEARNER_APP), env=env) as s:
            for ref, known in ((authoring, False), (learner, True)):
                body = {"contextRef": ref, "tool": "inspect-context", "callId": f"n-{ref[-6:]}",
                        "arguments": READ_ARGS}  # fmt: skip
                done = await s.call("POST", "/v1/context/tools/execute", body, headers=who)
                assert done.status == 200, done
                if known:
                    assert done.body["status"] == "SUCCEEDED", done
                else:
                    assert (done.body["status"], done.body["reason"]) == (
                        "DENIED",
                        "CONTEXT_UNKNOWN",
                    )
                trace = await s.call("GET", f"/v1/traces/{ref}", headers=who)
                assert trace.status == (200 if known else 404), trace

    run_async(scenario())
