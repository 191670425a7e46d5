"""Access tokens of an issuer through the real runtime (``prepare`` + ``create_app``, the
synthetic executor, a JWKS endpoint on loopback started by the test): a valid token resolves and
executes; every attack is 401 ``TOKEN_INVALID`` with ``WWW-Authenticate: Bearer
error="invalid_token"`` (never 500), a token without the scope 403 ``INSUFFICIENT_SCOPE``; the
failed check is logged, the token never."""

from __future__ import annotations

import hashlib
import hmac
import logging
import time
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import pytest

from servers.http.serving import Limits
from servers.identity import keys
from servers.mcp.app import McpOptions
from tests.support.identity import (
    ISS,
    Provider,
    b64,
    b64json,
    claims,
    ec_key,
    issuer_entry,
    provider,
    rsa_key,
    token,
)
from tests.support.mcp_support import raw_headers, raw_initialize
from tests.support.runtime_harness import (
    CREDENTIALS,
    READ_ARGS,
    READER_TOKEN,
    Reply,
    Stack,
    run_async,
    running_stack,
)

INVALID = 'Bearer error="invalid_token"'
GENERIC = "the bearer token is not valid"
KEY = rsa_key("k1")


def now() -> int:
    return int(time.time())


def bearer(presented: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {presented}"}


def valid(**extra: Any) -> str:
    return token(KEY, claims(now(), **extra))


@asynccontextmanager
async def stack_with_issuer(root: Path, idp: Provider, **options: Any) -> AsyncIterator[Stack]:
    document = {**CREDENTIALS, "issuers": [issuer_entry(idp.url)]}
    async with running_stack(root, credentials=document, **options) as stack:
        yield stack


@pytest.fixture
def logs(caplog: pytest.LogCaptureFixture) -> Iterator[pytest.LogCaptureFixture]:
    caplog.set_level(logging.DEBUG)
    yield caplog


def assert_not_logged(caplog: pytest.LogCaptureFixture, *secrets: str) -> None:
    """No record, its message, arguments or traceback, holds any of ``secrets``."""
    for record in caplog.records:
        text = " ".join((record.getMessage(), str(record.args), record.exc_text or ""))
        for secret in secrets:
            assert secret not in text, record
            assert secret[-40:] not in text, record  # not even the signature


def assert_invalid(reply: Reply) -> None:
    assert reply.status == 401, reply
    assert reply.body["error"] == {"code": "TOKEN_INVALID", "message": GENERIC}
    assert reply.headers["WWW-Authenticate"] == INVALID


def test_a_token_resolves_and_executes_beside_static_credentials(
    tmp_path: Path, logs: pytest.LogCaptureFixture
) -> None:
    async def scenario() -> None:
        async with provider([KEY]) as idp, stack_with_issuer(tmp_path, idp) as s:
            presented = valid(scope="seif.resolve seif.execute seif.traces", groups=["support"])
            resolved = await s.call(
                "POST",
                "/v1/context/resolve",
                {"objective": "authoring", "consumer": "course-authoring"},
                headers=bearer(presented),
            )
            assert resolved.status == 200, resolved
            ctx = resolved.body["contextRef"]
            body = {"contextRef": ctx, "tool": "inspect-context", "callId": "c1"}
            read = await s.call(
                "POST",
                "/v1/context/tools/execute",
                {**body, "arguments": READ_ARGS},
                headers=bearer(presented),
            )
            assert read.status == 200 and read.body["status"] == "SUCCEEDED", read
            assert read.body["output"]["ref"] == READ_ARGS["ref"]
            trace = await s.call("GET", f"/v1/traces/{ctx}", headers=bearer(presented))
            assert trace.status == 200
            [disclosed] = [e for e in trace.body["events"] if e["event"] == "DISCLOSED"]
            assert disclosed["credential"] == "corp:tutor-web"  # the issuer and its client

            # the static credential of the same runtime works as before, and owns its own
            static = await s.resolve()
            assert (await s.call("GET", f"/v1/traces/{ctx}")).status == 404
            other = await s.call(
                "GET", f"/v1/traces/{static['contextRef']}", headers=bearer(presented)
            )
            assert other.status == 404
            assert (await stats_of(s))["inspect-context"] == 1
        assert_not_logged(logs, presented)

    run_async(scenario())


async def stats_of(s: Stack) -> dict[str, int]:
    found: dict[str, int] = (await s.stats())["executions"]
    return found


def test_a_token_without_the_scope_is_403_naming_the_token_scopes(tmp_path: Path) -> None:
    async def scenario() -> None:
        async with provider([KEY]) as idp, stack_with_issuer(tmp_path, idp) as s:
            presented = valid(scope="seif.resolve")
            ctx = (
                await s.call(
                    "POST",
                    "/v1/context/resolve",
                    {"objective": "authoring", "consumer": "course-authoring"},
                    headers=bearer(presented),
                )
            ).body["contextRef"]
            body = {"contextRef": ctx, "tool": "inspect-context", "callId": "c1"}
            denied = await s.call(
                "POST",
                "/v1/context/tools/execute",
                {**body, "arguments": READ_ARGS},
                headers=bearer(presented),
            )
            assert denied.status == 403 and denied.body["error"]["code"] == "INSUFFICIENT_SCOPE"
            assert denied.headers["WWW-Authenticate"] == (
                'Bearer error="insufficient_scope", scope="seif.execute"'
            )
            traces = await s.call("GET", f"/v1/traces/{ctx}", headers=bearer(presented))
            assert traces.headers["WWW-Authenticate"].endswith('scope="seif.traces"')
            # no token scope maps to `metrics.read`: the challenge names none
            metrics = await s.call("GET", "/metrics", headers=bearer(presented))
            assert metrics.status == 403
            assert metrics.headers["WWW-Authenticate"] == 'Bearer error="insufficient_scope"'
            # a static credential without the scope: 403 FORBIDDEN, as before
            reader = await s.call(
                "POST",
                "/v1/context/tools/execute",
                {**body, "arguments": READ_ARGS},
                headers=bearer(READER_TOKEN),
            )
            assert reader.status == 403 and reader.body["error"]["code"] == "FORBIDDEN"
            assert (await stats_of(s)) == {}

    run_async(scenario())


def _none_token() -> str:
    head = {"alg": "none", "typ": "JWT", "kid": "k1"}
    return f"{b64json(head)}.{b64json(claims(now()))}."


def _hs256_with_the_public_key() -> str:
    """HS256 signed with the issuer's public key as the HMAC secret (algorithm confusion)."""
    signing_input = (
        f"{b64json({'alg': 'HS256', 'typ': 'JWT', 'kid': 'k1'})}.{b64json(claims(now()))}"
    )
    secret = KEY.as_pem(private=False)
    signature = hmac.new(secret, signing_input.encode(), hashlib.sha256).digest()
    return f"{signing_input}.{b64(signature)}"


def _tampered() -> str:
    """A valid token whose claims were widened after signing."""
    head, _, signature = valid(scope="seif.resolve").split(".")
    widened = claims(now(), scope="seif.resolve seif.execute seif.traces")
    return f"{head}.{b64json(widened)}.{signature}"


def _another_issuer() -> str:
    other = ec_key("evil-1")
    return token(other, claims(now(), iss="https://evil.example"))


ATTACKS = {
    "alg none": (_none_token, "allowlist"),
    "HS256 with the public key": (_hs256_with_the_public_key, "allowlist"),
    "another issuer": (_another_issuer, "not a configured issuer"),
    "another issuer's key, our iss": (lambda: token(ec_key("evil-1"), claims(now())), "no key"),
    "another audience": (lambda: valid(aud="https://elsewhere.example/"), "another audience"),
    "expired": (lambda: valid(exp=now() - 120), "expired"),
    "not yet valid": (lambda: valid(nbf=now() + 600), "not valid yet"),
    "forged kid": (lambda: token(rsa_key("k1"), claims(now())), "does not verify"),
    "no exp": (lambda: valid(exp=None), "lacks `exp`"),
    "tampered claims": (_tampered, "does not verify"),
}


@pytest.mark.parametrize("attack", sorted(ATTACKS))
def test_an_attack_is_401_invalid_token_and_only_its_check_is_logged(
    tmp_path: Path, logs: pytest.LogCaptureFixture, attack: str
) -> None:
    make, reason = ATTACKS[attack]

    async def scenario() -> None:
        async with provider([KEY]) as idp, stack_with_issuer(tmp_path, idp) as s:
            presented = make()
            for method, path in (("POST", "/v1/context/resolve"), ("GET", "/v1/capabilities")):
                body = {"objective": "authoring"} if method == "POST" else None
                assert_invalid(await s.call(method, path, body, headers=bearer(presented)))
            assert reason in logs.text, logs.text
            assert "bearer token refused" in logs.text
            assert_not_logged(logs, presented)
            assert (await stats_of(s)) == {}

    run_async(scenario())


def test_an_unknown_kid_refetches_once_then_not_for_a_minute(
    tmp_path: Path, logs: pytest.LogCaptureFixture
) -> None:
    async def scenario() -> None:
        async with provider([KEY]) as idp, stack_with_issuer(tmp_path, idp) as s:
            assert idp.fetches == 1  # at start
            first = token(rsa_key("unknown-1"), claims(now()))
            assert_invalid(await s.call("GET", "/v1/capabilities", headers=bearer(first)))
            assert idp.fetches == 2
            second = token(rsa_key("unknown-2"), claims(now()))
            assert_invalid(await s.call("GET", "/v1/capabilities", headers=bearer(second)))
            assert idp.fetches == 2  # within 60 s of the last refetch: none
            ok = await s.call("GET", "/v1/capabilities", headers=bearer(valid()))
            assert ok.status == 200
            assert_not_logged(logs, first, second)

    run_async(scenario())


def test_key_rotation(tmp_path: Path) -> None:
    new = ec_key("k2")

    async def scenario() -> None:
        async with provider([KEY]) as idp, stack_with_issuer(tmp_path, idp) as s:
            old_token = valid()
            assert (
                await s.call("GET", "/v1/capabilities", headers=bearer(old_token))
            ).status == 200
            idp.set_keys(KEY, new)  # the provider publishes the next key
            new_token = token(new, claims(now()))
            assert (
                await s.call("GET", "/v1/capabilities", headers=bearer(new_token))
            ).status == 200
            assert idp.fetches == 2  # the new kid was fetched
            idp.set_keys(new)  # the old key retired: cached, it verifies until a refetch
            assert (
                await s.call("GET", "/v1/capabilities", headers=bearer(old_token))
            ).status == 200

    run_async(scenario())


@pytest.fixture
def quick_fetches(monkeypatch: pytest.MonkeyPatch) -> float:
    assert keys.FETCH_TIMEOUT_S == 5.0
    monkeypatch.setattr(keys, "FETCH_TIMEOUT_S", 1.0)
    return 1.0


@pytest.mark.parametrize("mode", ["hang", "garbage"])
def test_a_broken_jwks_keeps_the_cached_keys_and_no_request_waits_past_the_bound(
    tmp_path: Path, quick_fetches: float, mode: str, logs: pytest.LogCaptureFixture
) -> None:
    async def scenario() -> None:
        async with provider([KEY]) as idp, stack_with_issuer(tmp_path, idp) as s:
            idp.mode = mode
            unknown = token(rsa_key("k9"), claims(now()))
            began = time.monotonic()
            assert_invalid(await s.call("GET", "/v1/capabilities", headers=bearer(unknown)))
            assert time.monotonic() - began < quick_fetches + 1.0
            assert idp.fetches == 2
            began = time.monotonic()
            ok = await s.call("GET", "/v1/capabilities", headers=bearer(valid()))
            assert ok.status == 200 and time.monotonic() - began < 1.0
            assert "could not be fetched" in logs.text
            assert idp.url not in logs.text

    run_async(scenario())


def test_start_is_not_held_by_a_hanging_jwks(tmp_path: Path, quick_fetches: float) -> None:
    async def scenario() -> None:
        async with provider([KEY]) as idp:
            idp.mode = "hang"
            began = time.monotonic()
            async with stack_with_issuer(tmp_path, idp) as s:
                assert time.monotonic() - began < quick_fetches + 5.0
                assert (await s.call("GET", "/v1/health", headers={})).status == 200
                assert (await s.call("GET", "/v1/capabilities")).status == 200  # static
                began = time.monotonic()
                assert_invalid(await s.call("GET", "/v1/capabilities", headers=bearer(valid())))
                assert time.monotonic() - began < quick_fetches + 1.0
                idp.mode = "ok"  # back: the refetch waits a minute, the static token does not
                assert (await s.call("GET", "/v1/capabilities")).status == 200

    run_async(scenario())


def test_a_40_kb_token_is_401_not_500(tmp_path: Path, logs: pytest.LogCaptureFixture) -> None:
    huge = valid(padding="p" * 40_000)
    assert len(huge) > 40_000

    async def scenario() -> None:
        async with provider([KEY]) as idp, stack_with_issuer(tmp_path, idp, limits=Limits()) as s:
            assert_invalid(await s.call("GET", "/v1/capabilities", headers=bearer(huge)))
            for garbage in ("x" * 40_000, huge[:-1]):
                assert_invalid(await s.call("GET", "/v1/capabilities", headers=bearer(garbage)))
            assert (await s.call("GET", "/v1/capabilities", headers=bearer(valid()))).status == 200
        assert "longer than 16384 bytes" in logs.text
        assert_not_logged(logs, huge)

    run_async(scenario())


def test_the_mcp_endpoint_authenticates_in_the_same_place(tmp_path: Path) -> None:
    message = raw_initialize("2025-06-18")
    headers = raw_headers("2025-06-18")

    async def scenario() -> None:
        async with (
            provider([KEY]) as idp,
            stack_with_issuer(tmp_path, idp, mcp=McpOptions(approval_wait_s=1)) as s,
        ):
            for presented, status in ((_none_token(), 401), (valid(scope="seif.resolve"), 403)):
                reply = await s.call(
                    "POST", "/mcp/authoring", message, headers={**headers, **bearer(presented)}
                )
                assert reply.status == status, reply
            assert reply.body["error"]["code"] == "INSUFFICIENT_SCOPE"
            # the endpoint's challenges also name its metadata (tests/servers/mcp/
            # test_mcp_authorization.py)
            discovery = (
                'resource_metadata="https://seif.example/.well-known/oauth-protected-resource'
                '/mcp/authoring"'
            )
            assert reply.headers["WWW-Authenticate"] == (
                f'Bearer error="insufficient_scope", scope="seif.execute", {discovery}'
            )
            invalid = await s.call(
                "POST", "/mcp/authoring", message, headers={**headers, **bearer(_none_token())}
            )
            assert invalid.status == 401, invalid
            assert invalid.body["error"] == {"code": "TOKEN_INVALID", "message": GENERIC}
            assert invalid.headers["WWW-Authenticate"] == (
                f'Bearer error="invalid_token", {discovery}, scope="seif.resolve seif.execute"'
            )
            listed = await s.call(
                "POST", "/mcp/authoring", message, headers={**headers, **bearer(valid())}
            )
            assert listed.status == 200, listed

    run_async(scenario())


def test_iss_is_matched_exactly(tmp_path: Path) -> None:
    async def scenario() -> None:
        async with provider([KEY]) as idp, stack_with_issuer(tmp_path, idp) as s:
            for iss in (ISS + "/", ISS.upper(), " " + ISS):
                reply = await s.call("GET", "/v1/capabilities", headers=bearer(valid(iss=iss)))
                assert_invalid(reply)

    run_async(scenario())
