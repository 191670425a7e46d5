"""seif against a real OpenID provider (``oidc-provider`` 8.x, run by the test: see
``tests/support/oidc_provider.py``), with ``seif serve --mcp`` as a process.

- The official MCP Python SDK's OAuth clients, given only the MCP URL and their credentials (no
  seif-specific code): on the endpoint's 401 they read ``resource_metadata``, fetch seif's
  RFC 9728 metadata, discover the provider from it, obtain a token for the endpoint's resource
  URL (client credentials; authorization code with PKCE for a user) and call a tool.
- A token from the provider authenticates an application (client credentials) and a user
  (authorization code) on the HTTP API: resolve, then execute.
- A token the provider issued for another resource, or for another objective's endpoint, is
  refused (401 ``invalid_token``).
- Two users' groups decide the same call differently; the provider's key rotation is followed.
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import json
import time
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from pathlib import Path

import httpx2
import mcp
import pytest
from joserfc.jwk import RSAKey
from mcp.client.auth import OAuthClientProvider
from mcp.client.auth.extensions.client_credentials import ClientCredentialsOAuthProvider
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.auth import (
    AuthorizationCodeResult,
    OAuthClientInformationFull,
    OAuthClientMetadata,
    OAuthToken,
)

from servers.config.files import load_credentials
from servers.identity import Identities, TokenRefused, keys
from tests.support.guide_examples import free_port
from tests.support.mcp_support import (
    MODES,
    REVISION,
    call_meta,
    dumped,
    mcp_url,
    raw_headers,
    raw_initialize,
)
from tests.support.oidc_provider import (
    AGENT,
    AGENT_GROUPS,
    AGENT_SECRET,
    ALICE,
    BOB,
    REDIRECT_URI,
    WEB_CLIENT,
    OpenIdProvider,
    claims_of,
    openid_provider,
    sign_in,
    user_token,
)
from tests.support.principals import write_principal_build
from tests.support.runtime_harness import (
    CREDENTIALS,
    EXECUTOR,
    READ_ARGS,
    TOOL_TOKENS,
    listening,
    run_async,
    serving,
    start_serve,
    stop,
    write_config,
)

ELSEWHERE = "https://elsewhere.example/"
"""Another resource the provider issues tokens for: never this runtime."""


class Memory:
    """The SDK's ``TokenStorage``, in memory, keeping every token it was given."""

    def __init__(self, client: OAuthClientInformationFull | None = None) -> None:
        self.tokens: list[OAuthToken] = []
        self.client = client

    async def get_tokens(self) -> OAuthToken | None:
        return self.tokens[-1] if self.tokens else None

    async def set_tokens(self, tokens: OAuthToken) -> None:
        self.tokens.append(tokens)

    async def get_client_info(self) -> OAuthClientInformationFull | None:
        return self.client

    async def set_client_info(self, client_info: OAuthClientInformationFull) -> None:
        self.client = client_info


@dataclass
class Browser:
    """The user's browser, as the SDK's authorization code flow drives one: it is sent to the
    provider (``redirect``), the user signs in there, and the code comes back (``callback``)."""

    login: str
    opened: list[str] = field(default_factory=list)

    async def redirect(self, url: str) -> None:
        self.opened.append(url)

    async def callback(self) -> AuthorizationCodeResult:
        back = await sign_in(self.opened[-1], self.login)
        return AuthorizationCodeResult(code=back.code, state=back.state, iss=back.iss)


@dataclass
class Running:
    base: str
    op: OpenIdProvider
    err: Path


@contextlib.asynccontextmanager
async def running(root: Path) -> AsyncIterator[Running]:
    """The provider, the reference executor and ``seif serve --mcp`` whose issuer is the
    provider and whose ``audience`` is its own URL."""
    port = free_port()
    base = f"http://127.0.0.1:{port}"
    with openid_provider(root, [base + "/", ELSEWHERE]) as op:
        executor_app = EXECUTOR.create_app(tokens=TOOL_TOKENS, knobs={})
        async with serving(executor_app) as executor_url:
            credentials = {**CREDENTIALS, "issuers": [op.issuer_entry(base + "/")]}
            config = write_config(root, executor_url, credentials=credentials)
            proc = start_serve(config, "--mcp", "--port", str(port))
            try:
                assert await asyncio.to_thread(listening, proc) == base
                yield Running(base, op, root / "serve.err")
            finally:
                stop(proc)


@contextlib.asynccontextmanager
async def oauth_client(
    url: str, auth: httpx2.Auth, mode: str, sent: list[str] | None = None
) -> AsyncIterator[mcp.Client]:
    """The official client on ``url`` with the SDK's OAuth ``auth`` and nothing else;
    ``sent`` collects ``METHOD URL (status)`` of every request it makes, the OAuth flow's too."""

    async def seen(answer: httpx2.Response) -> None:
        if sent is not None:
            request = answer.request
            sent.append(
                f"{request.method} {request.url.copy_with(query=None)} {answer.status_code}"
            )

    hooks = {"response": [seen]}
    timeout = httpx2.Timeout(10.0, read=30.0)
    async with httpx2.AsyncClient(auth=auth, timeout=timeout, event_hooks=hooks) as http:
        client = mcp.Client(streamable_http_client(url, http_client=http), mode=mode, cache=None)
        async with client:
            assert client.protocol_version == REVISION[mode]
            yield client


def _bearer(token: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {token}"}


@pytest.mark.parametrize("mode", MODES)
def test_the_sdk_client_discovers_seif_and_gets_in_with_client_credentials(
    tmp_path: Path, mode: str
) -> None:
    async def scenario() -> None:
        async with running(tmp_path) as r:
            url = mcp_url(r.base, "learner", consumer="tutor-app")
            storage = Memory()
            auth = ClientCredentialsOAuthProvider(
                server_url=url,
                storage=storage,
                client_id=AGENT,
                client_secret=AGENT_SECRET,
                issuer=r.op.issuer,
            )
            sent: list[str] = []
            async with oauth_client(url, auth, mode, sent) as client:
                listed = await client.list_tools()
                assert [t.name for t in listed.tools] == ["inspect_context", "search_knowledge"]
                got = await client.call_tool("inspect_context", READ_ARGS, meta=call_meta("cc-1"))
                assert got.is_error is False, dumped(got)
            # what the client did: the 401, the metadata its challenge names, the provider's
            # metadata (RFC 8414's path first, then OpenID's), the token, the request again
            endpoint, op = f"{r.base}/mcp/learner", r.op.issuer
            flow = [
                f"POST {endpoint} 401",
                f"GET {r.base}/.well-known/oauth-protected-resource/mcp/learner 200",
                f"GET {op}.well-known/oauth-authorization-server 404",
                f"GET {op}.well-known/openid-configuration 200",
                f"POST {op}token 200",
                f"POST {endpoint} 200",
            ]
            assert sent[: len(flow)] == flow, sent
            assert not any(" 401" in line for line in sent[len(flow) :]), sent
            # one token, for the endpoint's own resource URL, with the scopes the 401 named
            [token] = storage.tokens
            claims = claims_of(token.access_token)
            assert claims["aud"] == f"{r.base}/mcp/learner"
            assert claims["iss"] == r.op.issuer and claims["sub"] == AGENT
            assert claims["scope"].split() == ["seif.resolve", "seif.execute"]
            assert claims["groups"] == AGENT_GROUPS
            assert token.access_token not in r.err.read_text()

    run_async(scenario())


def test_the_sdk_client_signs_a_user_in_with_the_authorization_code_flow(tmp_path: Path) -> None:
    async def scenario() -> None:
        async with running(tmp_path) as r:
            url = mcp_url(r.base, "learner", consumer="tutor-app")
            registered = OAuthClientInformationFull(
                client_id=WEB_CLIENT,
                redirect_uris=[REDIRECT_URI],
                grant_types=["authorization_code"],
                token_endpoint_auth_method="none",
            )
            storage, browser = Memory(registered), Browser(ALICE)
            auth = OAuthClientProvider(
                server_url=url,
                client_metadata=OAuthClientMetadata(
                    redirect_uris=[REDIRECT_URI],
                    grant_types=["authorization_code"],
                    token_endpoint_auth_method="none",
                ),
                storage=storage,
                redirect_handler=browser.redirect,
                callback_handler=browser.callback,
            )
            async with oauth_client(url, auth, "auto") as client:
                got = await client.call_tool("inspect_context", READ_ARGS, meta=call_meta("ac-1"))
                assert got.is_error is False, dumped(got)
            [opened] = browser.opened  # the provider's authorization endpoint, with PKCE
            assert opened.startswith(r.op.issuer + "auth?") and "code_challenge=" in opened
            [token] = storage.tokens
            claims = claims_of(token.access_token)
            assert claims["aud"] == f"{r.base}/mcp/learner"
            assert (claims["sub"], claims["client_id"]) == (ALICE, WEB_CLIENT)
            assert claims["groups"] == ["support"]

    run_async(scenario())


def test_a_provider_token_authenticates_an_application_and_a_user_on_the_http_api(
    tmp_path: Path,
) -> None:
    async def scenario() -> None:
        async with running(tmp_path) as r, httpx2.AsyncClient(timeout=10) as http:
            audience = r.base + "/"
            presented = {
                AGENT: await r.op.client_credentials(audience),
                ALICE: await user_token(r.op, ALICE, audience),
                BOB: await user_token(r.op, BOB, audience),
            }
            for who, token in presented.items():
                resolved = await http.post(
                    r.base + "/v1/context/resolve",
                    json={"objective": "learner", "consumer": "tutor-app"},
                    headers=_bearer(token),
                )
                assert resolved.status_code == 200, (who, resolved.text)
                ref = resolved.json()["contextRef"]
                executed = await http.post(
                    r.base + "/v1/context/tools/execute",
                    json={
                        "contextRef": ref,
                        "tool": "inspect-context",
                        "callId": f"http-{who}",
                        "arguments": READ_ARGS,
                    },
                    headers=_bearer(token),
                )
                assert executed.status_code == 200, (who, executed.text)
                assert executed.json()["status"] == "SUCCEEDED"
                trace = await http.get(f"{r.base}/v1/traces/{ref}", headers=_bearer(token))
                [disclosed] = [e for e in trace.json()["events"] if e["event"] == "DISCLOSED"]
                client = WEB_CLIENT if who != AGENT else AGENT
                assert disclosed["credential"] == f"op:{client}"
            log = r.err.read_text()
            assert not any(token in log for token in presented.values())

    run_async(scenario())


def test_the_principal_of_a_provider_token(tmp_path: Path) -> None:
    """The issuer entry read as `seif serve` reads it; the provider's tokens become principals:
    a user's subject and groups, an application's client id and its own groups."""

    async def scenario() -> None:
        audience = "http://127.0.0.1:9/"
        with openid_provider(tmp_path, [audience]) as op:
            path = tmp_path / "credentials.json"
            path.write_text(json.dumps({"issuers": [op.issuer_entry(audience)]}))
            identities = Identities(load_credentials(path, {}), lambda: int(time.time() * 1000))
            await identities.start()
            try:
                alice = await identities.authenticate(await user_token(op, ALICE, audience))
                bob = await identities.authenticate(await user_token(op, BOB, audience))
                agent = await identities.authenticate(await op.client_credentials(audience))
            finally:
                await identities.aclose()
        assert alice is not None and bob is not None and agent is not None
        assert alice.principal.to_json() == {
            "issuer": "op",
            "subject": ALICE,
            "clientId": WEB_CLIENT,
            "claims": {"groups": ["support"], "email": "alice@example.org"},
        }
        assert bob.principal.claims["groups"] == ("sales",)
        assert alice.id == bob.id == f"op:{WEB_CLIENT}"  # one application, two users
        assert agent.principal.to_json() == {
            "issuer": "op",
            "subject": AGENT,
            "clientId": AGENT,
            "claims": {"groups": AGENT_GROUPS},
        }
        assert alice.scopes == {"context.resolve", "tools.execute", "traces.read"}

    run_async(scenario())


def test_a_provider_token_for_another_resource_is_refused(tmp_path: Path) -> None:
    async def scenario() -> None:
        async with running(tmp_path) as r, httpx2.AsyncClient(timeout=10) as http:
            elsewhere = await r.op.client_credentials(ELSEWHERE)
            for_learner = await r.op.client_credentials(f"{r.base}/mcp/learner")
            mcp_headers = raw_headers()
            initialize = raw_initialize()
            refused: list[httpx2.Response] = []
            for token, path in (
                (elsewhere, "/mcp/learner"),
                (for_learner, "/mcp/authoring"),  # another objective's endpoint
            ):
                refused.append(
                    await http.post(
                        r.base + path,
                        json=initialize,
                        headers={**mcp_headers, **_bearer(token)},
                    )
                )
            for token in (elsewhere, for_learner):  # the HTTP API is the audience's alone
                refused.append(
                    await http.post(
                        r.base + "/v1/context/resolve",
                        json={"objective": "learner", "consumer": "tutor-app"},
                        headers=_bearer(token),
                    )
                )
            for answer in refused:
                assert answer.status_code == 401, answer.text
                assert answer.json()["error"]["code"] == "TOKEN_INVALID"
                assert answer.headers["WWW-Authenticate"].startswith('Bearer error="invalid_token"')
            accepted = await http.post(
                r.base + "/mcp/learner",
                json=initialize,
                headers={**mcp_headers, **_bearer(for_learner)},
            )
            assert accepted.status_code == 200, accepted.text

    run_async(scenario())


def test_two_users_of_the_provider_are_decided_by_their_groups(tmp_path: Path) -> None:
    """The issue's "done when": a condition on the user's group (the provider's `groups`
    claim) decides the same call differently for Alice (support) and Bob (sales)."""
    write_principal_build(tmp_path)  # served by `running`: authoring reads need `support`

    async def scenario() -> None:
        async with running(tmp_path) as r, httpx2.AsyncClient(timeout=10) as http:
            audience = r.base + "/"
            decided = {}
            for who in (ALICE, BOB):
                token = await user_token(r.op, who, audience)
                resolved = await http.post(
                    r.base + "/v1/context/resolve",
                    json={"objective": "authoring", "consumer": "course-authoring"},
                    headers=_bearer(token),
                )
                assert resolved.status_code == 200, (who, resolved.text)
                body = {
                    "contextRef": resolved.json()["contextRef"],
                    "tool": "inspect-context",
                    "callId": f"groups-{who}",
                    "arguments": READ_ARGS,
                }
                executed = await http.post(
                    r.base + "/v1/context/tools/execute", json=body, headers=_bearer(token)
                )
                assert executed.status_code == 200, (who, executed.text)
                receipt = executed.json()
                decided[who] = (receipt["status"], receipt.get("reason"))
            assert decided == {
                ALICE: ("SUCCEEDED", None),
                BOB: ("DENIED", "CONDITION_DENIED"),
            }

    run_async(scenario())


def test_the_provider_s_key_rotation(tmp_path: Path) -> None:
    """The provider rotates its signing key (restarted on its port, so its issuer is the same):
    a token under the new `kid` makes seif fetch the set again, the old key's tokens verify while
    the set still publishes it, and stop once it is removed and seif's keys were refreshed."""
    audience = "http://127.0.0.1:9/"
    old, new = (
        RSAKey.generate_key(2048, parameters={"kid": kid, "alg": "RS256", "use": "sig"})
        for kid in ("op-old", "op-new")
    )
    port = free_port()
    clock = [1000.0]

    async def scenario() -> None:
        with openid_provider(tmp_path, [audience], keys=[old], port=port) as op:
            path = tmp_path / "credentials.json"
            path.write_text(json.dumps({"issuers": [op.issuer_entry(audience)]}))
            before = await op.client_credentials(audience)
        identities = Identities(
            load_credentials(path, {}), lambda: int(time.time() * 1000), monotonic=lambda: clock[0]
        )
        try:
            with openid_provider(tmp_path, [audience], keys=[old], port=port):
                await identities.start()
                assert await identities.authenticate(before) is not None
            with openid_provider(tmp_path, [audience], keys=[new, old], port=port) as op:
                after = await op.client_credentials(audience)
                assert json.loads(b64decode_segment(after.split(".")[0]))["kid"] == "op-new"
                assert await identities.authenticate(after) is not None  # fetched again
                assert await identities.authenticate(before) is not None
            with openid_provider(tmp_path, [audience], keys=[new], port=port):
                assert await identities.authenticate(before) is not None  # cached still
                clock[0] += keys.MAX_AGE_S  # stale: refreshed in the background
                assert await identities.authenticate(before) is not None
                for _ in range(200):
                    if not any(k.fetching for k in identities.keys.values()):
                        break
                    await asyncio.sleep(0.02)
                with pytest.raises(TokenRefused):
                    await identities.authenticate(before)  # removed: no longer verifies
                assert await identities.authenticate(after) is not None
        finally:
            await identities.aclose()

    run_async(scenario())


def b64decode_segment(segment: str) -> bytes:
    return base64.urlsafe_b64decode(segment + "=" * (-len(segment) % 4))
