"""The MCP endpoint as an OAuth 2.0 protected resource (RFC 9728, RFC 8707), through the real
runtime (``prepare`` + ``create_app`` with MCP mounted) and a JWKS endpoint on loopback:

- ``/.well-known/oauth-protected-resource`` and ``.../mcp/{objective}`` serve the metadata
  with issuers (no credential), and are 404 JSON without issuers, without MCP, or for an
  objective the build does not declare, whatever the path holds (never 500);
- a 401 from the MCP endpoint names the metadata in ``resource_metadata`` and the scope values
  it needs, with ``error="invalid_token"`` when a token was presented; a 403 for a missing
  scope is ``insufficient_scope`` and names the metadata too;
- at the endpoint of an objective, a token for that endpoint's resource URL is accepted, and
  nowhere else.
"""

from __future__ import annotations

import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import pytest

from servers.config.issuers import Issuer
from servers.identity.resource import describe, metadata_url, resource_url
from servers.mcp.app import McpOptions
from tests.support.identity import (
    AUDIENCE,
    ISS,
    claims,
    issuer_entry,
    provider,
    rsa_key,
    token,
)
from tests.support.mcp_support import raw_headers, raw_initialize
from tests.support.runtime_harness import CREDENTIALS, Reply, Stack, run_async, running_stack

KEY = rsa_key("k1")
MCP = McpOptions(approval_wait_s=1)
ROOT_METADATA = "https://seif.example/.well-known/oauth-protected-resource"
AUTHORING_METADATA = ROOT_METADATA + "/mcp/authoring"
NEEDED = 'scope="seif.resolve seif.execute"'
HEADERS = raw_headers()
INITIALIZE = raw_initialize()


def signed(**extra: Any) -> str:
    return token(KEY, claims(int(time.time()), **extra))


def bearer(presented: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {presented}"}


@asynccontextmanager
async def stack(root: Path, *issuers: dict[str, Any], mcp: bool = True) -> AsyncIterator[Stack]:
    document = {**CREDENTIALS, "issuers": list(issuers)} if issuers else CREDENTIALS
    async with running_stack(root, credentials=document, mcp=MCP if mcp else None) as s:
        yield s


async def initialize(s: Stack, objective: str, headers: dict[str, str]) -> Reply:
    return await s.call("POST", f"/mcp/{objective}", INITIALIZE, headers={**HEADERS, **headers})


def test_resource_urls_and_where_their_metadata_is() -> None:
    assert (
        resource_url("https://seif.example/", "mcp/learner") == "https://seif.example/mcp/learner"
    )
    assert resource_url("https://seif.example", "mcp/learner") == "https://seif.example/mcp/learner"
    assert resource_url("https://seif.example/", "") == "https://seif.example/"
    assert metadata_url("https://seif.example/") == ROOT_METADATA
    assert metadata_url("https://seif.example") == ROOT_METADATA
    assert metadata_url("https://gw.example:8443/seif/mcp/learner") == (
        "https://gw.example:8443/.well-known/oauth-protected-resource/seif/mcp/learner"
    )
    for not_discoverable in ("api://seif", "seif", 'https://a.example/"x', "https://a.example/ x"):
        assert metadata_url(not_discoverable) is None, not_discoverable


def test_an_issuer_narrowed_to_other_objectives_is_not_advertised_at_their_endpoints() -> None:
    def issuer(name: str, objectives: tuple[str, ...] | None) -> Issuer:
        scopes = {f"{name}.resolve": "context.resolve", f"{name}.execute": "tools.execute"}
        return Issuer(
            name, f"https://{name}.example", AUDIENCE, ("RS256",), scopes, objectives=objectives
        )

    corp, partner = issuer("corp", ("learner",)), issuer("partner", None)
    learner = describe([corp, partner], "mcp/learner", ("context.resolve", "tools.execute"))
    authoring = describe([corp, partner], "mcp/authoring", ("context.resolve", "tools.execute"))
    assert learner is not None and authoring is not None
    assert learner.authorization_servers == ("https://corp.example", "https://partner.example")
    assert authoring.authorization_servers == ("https://partner.example",)
    assert authoring.scopes_supported == ("partner.resolve", "partner.execute")
    assert describe([corp], "mcp/authoring") is None  # no issuer may serve it: no metadata
    whole = describe([corp], "")
    assert whole is not None and whole.authorization_servers == ("https://corp.example",)


def test_the_metadata_of_the_runtime_and_of_an_objective_s_endpoint(tmp_path: Path) -> None:
    other = issuer_entry("", id="partner", issuer="https://partner.example", audience=AUDIENCE)
    other["scopes"] = {"partner.mcp": "context.resolve", "partner.call": "tools.execute"}
    elsewhere = issuer_entry("", id="lab", issuer="https://lab.example", audience="api://lab")

    async def scenario() -> None:
        async with provider([KEY]) as idp:
            for entry in (other, elsewhere):
                entry["jwksUri"] = idp.url
            async with stack(tmp_path, issuer_entry(idp.url), other, elsewhere) as s:
                whole = await s.call("GET", "/.well-known/oauth-protected-resource", headers={})
                assert whole.status == 200, whole
                assert whole.body == {
                    "resource": AUDIENCE,
                    "authorization_servers": [ISS, "https://partner.example"],
                    "scopes_supported": [
                        "seif.resolve",
                        "seif.execute",
                        "seif.traces",
                        "partner.mcp",
                        "partner.call",
                    ],
                    "bearer_methods_supported": ["header"],
                }
                assert whole.headers["Access-Control-Allow-Origin"] == "*"
                path = "/.well-known/oauth-protected-resource/mcp/authoring"
                endpoint = await s.call("GET", path, headers={})
                assert endpoint.status == 200, endpoint
                assert endpoint.body == {
                    "resource": "https://seif.example/mcp/authoring",
                    "authorization_servers": [ISS, "https://partner.example"],
                    # what the endpoint needs: never `seif.traces`
                    "scopes_supported": [
                        "seif.resolve",
                        "seif.execute",
                        "partner.mcp",
                        "partner.call",
                    ],
                    "bearer_methods_supported": ["header"],
                }
                assert (await s.call("HEAD", path, headers={})).status == 200

    run_async(scenario())


@pytest.mark.parametrize(
    "objective",
    ["nope", "%22%0d%0aX-Injected:%201", "a" * 300, "%F0%9F%92%A5", "learner%2Fx"],
    ids=["unknown", "crlf", "long", "emoji", "slash"],
)
def test_an_objective_the_build_does_not_declare_is_404_json(
    tmp_path: Path, objective: str
) -> None:
    async def scenario() -> None:
        async with provider([KEY]) as idp, stack(tmp_path, issuer_entry(idp.url)) as s:
            path = f"/.well-known/oauth-protected-resource/mcp/{objective}"
            found = await s.call("GET", path, headers={})
            assert found.status == 404, found
            assert found.body["error"]["code"] in ("OBJECTIVE_UNKNOWN", "NOT_FOUND")
            assert not any("x-injected" in k.lower() for k in found.headers)
            # the endpoint asks for a token first, naming the runtime's metadata
            asked = await initialize(s, objective, {})
            assert asked.status in (401, 404), asked
            if asked.status == 401:
                assert asked.headers["WWW-Authenticate"] == (
                    f'Bearer resource_metadata="{ROOT_METADATA}", {NEEDED}'
                )
                known = await initialize(s, objective, bearer(signed()))
                assert known.status == 404 and known.body["error"]["code"] == "OBJECTIVE_UNKNOWN"

    run_async(scenario())


def test_without_issuers_or_mcp_there_is_no_metadata(tmp_path: Path) -> None:
    async def scenario() -> None:
        async with stack(tmp_path / "static") as s:
            for path in ("", "/mcp/authoring"):
                found = await s.call("GET", f"/.well-known/oauth-protected-resource{path}")
                assert found.status == 404 and found.body["error"]["code"] == "NOT_FOUND"
            # no issuer: the challenge is as it always was
            asked = await initialize(s, "authoring", {})
            assert asked.headers["WWW-Authenticate"] == 'Bearer realm="seif"'
        async with (
            provider([KEY]) as idp,
            stack(tmp_path / "no-mcp", issuer_entry(idp.url), mcp=False) as s,
        ):
            whole = await s.call("GET", "/.well-known/oauth-protected-resource", headers={})
            assert whole.status == 200 and whole.body["resource"] == AUDIENCE
            path = "/.well-known/oauth-protected-resource/mcp/authoring"
            found = await s.call("GET", path, headers={})
            assert found.status == 404 and found.body["error"]["code"] == "NOT_FOUND"

    run_async(scenario())


def test_the_endpoint_s_challenges_name_its_metadata(tmp_path: Path) -> None:
    discovery = f'resource_metadata="{AUTHORING_METADATA}"'

    async def scenario() -> None:
        async with provider([KEY]) as idp, stack(tmp_path, issuer_entry(idp.url)) as s:
            none = await initialize(s, "authoring", {})
            assert none.status == 401 and none.body["error"]["code"] == "UNAUTHENTICATED"
            assert none.headers["WWW-Authenticate"] == f"Bearer {discovery}, {NEEDED}"
            for presented, code in (
                ("not-a-known-token", "UNAUTHENTICATED"),
                (signed(exp=int(time.time()) - 3600), "TOKEN_INVALID"),
                (signed(aud="https://elsewhere.example/"), "TOKEN_INVALID"),
            ):
                refused = await initialize(s, "authoring", bearer(presented))
                assert refused.status == 401 and refused.body["error"]["code"] == code
                assert refused.headers["WWW-Authenticate"] == (
                    f'Bearer error="invalid_token", {discovery}, {NEEDED}'
                )
            short = await initialize(s, "authoring", bearer(signed(scope="seif.resolve")))
            assert short.status == 403 and short.body["error"]["code"] == "INSUFFICIENT_SCOPE"
            assert short.headers["WWW-Authenticate"] == (
                f'Bearer error="insufficient_scope", scope="seif.execute", {discovery}'
            )
            # the HTTP API's challenges are as they were: no resource is named there
            api = await s.call("GET", "/v1/capabilities", headers={})
            assert api.headers["WWW-Authenticate"] == 'Bearer realm="seif"'

    run_async(scenario())


def test_a_token_for_an_objective_s_endpoint_is_accepted_there_only(tmp_path: Path) -> None:
    authoring = "https://seif.example/mcp/authoring"

    async def scenario() -> None:
        async with provider([KEY]) as idp, stack(tmp_path, issuer_entry(idp.url)) as s:
            for_authoring = signed(aud=authoring)
            ok = await initialize(s, "authoring", bearer(for_authoring))
            assert ok.status == 200, ok
            listed = await initialize(s, "authoring", bearer(signed(aud=[authoring, "x"])))
            assert listed.status == 200, listed
            for_runtime = await initialize(s, "authoring", bearer(signed()))
            assert for_runtime.status == 200  # the audience itself is accepted everywhere
            elsewhere = await initialize(s, "learner", bearer(for_authoring))
            assert elsewhere.status == 401 and elsewhere.body["error"]["code"] == "TOKEN_INVALID"
            api = await s.call(
                "POST",
                "/v1/context/resolve",
                {"objective": "authoring", "consumer": "course-authoring"},
                headers=bearer(for_authoring),
            )
            assert api.status == 401 and api.body["error"]["code"] == "TOKEN_INVALID"
            # the resource URL is matched exactly: with a trailing slash it is another
            near = signed(aud="https://seif.example/mcp/authoring/")
            assert (await initialize(s, "authoring", bearer(near))).status == 401

    run_async(scenario())
