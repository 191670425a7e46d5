"""Approvers admitted by an issuer (docs/approval-server.md), against a real runtime, the approval
server, and a JWKS endpoint on loopback: a token whose claims hold ``requireClaims`` signs an
approver in, named by its ``nameClaim``, recorded by the runtime as
``<issuer id>:<subject fingerprint>`` (never the subject); a valid token without the claim is 403,
a token failing a check 401, never 500; the issuer's ``applications`` narrow what it decides; the
approvers file's ``issuers`` are checked as the credentials file's are."""

from __future__ import annotations

import json
import logging
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import pytest

from servers.approval.approvers import fingerprint_key
from servers.config.approvers import load_approvers
from servers.config.files import ConfigError
from servers.identity.principal import subject_fingerprint
from tests.support.approval_harness import APPROVER_ENV, ApprovalStack, approval_stack
from tests.support.identity import AUDIENCE, ISS, claims, provider, rsa_key, token
from tests.support.runtime_harness import (
    APP_TOKEN,
    APPROVAL_TOKEN,
    OTHER_APP_TOKEN,
    PROPOSAL,
    Stack,
    run_async,
)

KEY = rsa_key("k1")
APPROVALS = "https://approvals.example/"
NAME = "ana.lima@example.org"


def approvers_issuer(jwks: dict[str, str], **overrides: Any) -> dict[str, Any]:
    """The approvers file's issuer ``corp``: ``jwks`` is its ``jwksUri`` or ``jwksFile``."""
    entry: dict[str, Any] = {
        "id": "corp",
        "issuer": ISS,
        **jwks,
        "audience": APPROVALS,
        "requireClaims": {"groups": "approvers"},
        "nameClaim": "email",
        "applications": ["tutor-app"],
    }
    entry.update(overrides)
    return {k: v for k, v in entry.items() if v is not ...}


def approver_token(**extra: Any) -> str:
    """A token of ``corp`` for the approval server: ana, in the group of approvers."""
    body = {"aud": APPROVALS, "sub": "user-ana-31", "groups": ["support", "approvers"]}
    return token(KEY, claims(int(time.time()), **{**body, "email": NAME, **extra}))


def bearer(presented: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {presented}"}


@asynccontextmanager
async def issuer_stack(root: Path) -> AsyncIterator[ApprovalStack]:
    async with provider([KEY]) as idp:
        document = {
            "approvers": [{"id": "ops-ana", "tokenRef": "env:SEIF_APPROVER_ANA"}],
            "issuers": [approvers_issuer({"jwksUri": idp.url})],
        }
        async with approval_stack(root, approvers=document) as a:
            yield a


async def ask(s: Stack, call_id: str, presented: str) -> str:
    body = {"objective": "authoring", "consumer": "course-authoring"}
    resolved = await s.call("POST", "/v1/context/resolve", body, headers=bearer(presented))
    ctx: str = resolved.body["contextRef"]
    asked = {"contextRef": ctx, "tool": "propose-change", "callId": call_id, "arguments": PROPOSAL}
    receipt = await s.call("POST", "/v1/context/tools/execute", asked, headers=bearer(presented))
    assert receipt.body["reason"] == "APPROVAL_REQUIRED", receipt
    return ctx


def test_an_issuer_s_token_with_the_claim_signs_an_approver_in(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG)
    expected = "corp:" + subject_fingerprint(fingerprint_key(APPROVAL_TOKEN), "corp", "user-ana-31")

    async def scenario() -> None:
        async with issuer_stack(tmp_path) as a:
            presented = approver_token()
            me = await a.call("GET", "/v1/me", headers=bearer(presented))
            assert me.status == 200, me
            assert me.body == {"approver": expected, "name": NAME}
            assert "user-ana-31" not in me.body["approver"]
            # one person, one id, whatever the token; a list claim or a claim equal to it
            again = await a.call(
                "GET", "/v1/me", headers=bearer(approver_token(groups="approvers", jti="j-2"))
            )
            assert again.body["approver"] == expected
            other = await a.call("GET", "/v1/me", headers=bearer(approver_token(sub="user-ben")))
            assert other.status == 200 and other.body["approver"] not in (expected, "")
            nameless = await a.call("GET", "/v1/me", headers=bearer(approver_token(email=None)))
            assert nameless.body == {"approver": expected, "name": expected}

            # the issuer's approvers decide tutor-app's calls only (`applications`)
            tutor_ctx = await ask(a.runtime, "tutor-1", APP_TOKEN)
            await ask(a.runtime, "other-1", OTHER_APP_TOKEN)
            listed = await a.pending(headers=bearer(presented))
            assert [p["callId"] for p in listed] == ["tutor-1"]
            everything = {p["callId"]: p["pendingId"] for p in await a.pending()}  # ops-ana
            hidden = await a.decide("approve", everything["other-1"], headers=bearer(presented))
            assert (hidden.status, hidden.body["error"]["code"]) == (404, "PENDING_UNKNOWN")
            approved = await a.decide("approve", listed[0]["pendingId"], headers=bearer(presented))
            assert approved.status == 200 and approved.body["approver"] == expected, approved
            trace = (await a.runtime.call("GET", f"/v1/traces/{tutor_ctx}")).body
            [record] = [e for e in trace["events"] if e["event"] == "APPROVED"]
            assert record["approver"] == expected
        for record in caplog.records:  # neither the token, the subject nor the name is logged
            text = record.getMessage()
            assert presented[-40:] not in text and "user-ana-31" not in text
            assert NAME not in text

    run_async(scenario())


def test_a_token_that_does_not_make_an_approver_is_refused(tmp_path: Path) -> None:
    async def scenario() -> None:
        async with issuer_stack(tmp_path) as a:
            now = int(time.time())
            cases = [
                # a valid token without the claim, or without a subject: not an approver
                (approver_token(groups=["support"]), 403, "FORBIDDEN"),
                (approver_token(groups=None), 403, "FORBIDDEN"),
                (approver_token(groups="approvers-2"), 403, "FORBIDDEN"),
                (approver_token(sub=None), 403, "FORBIDDEN"),
                # failing a check: expired, another audience (the runtime's), another key
                (approver_token(exp=now - 120), 401, "TOKEN_INVALID"),
                (approver_token(aud=AUDIENCE), 401, "TOKEN_INVALID"),
                (token(rsa_key("k1"), claims(now, aud=APPROVALS)), 401, "TOKEN_INVALID"),
                # no approver's at all: an application's token, the runner credential
                (APP_TOKEN, 401, "UNAUTHENTICATED"),
                (APPROVAL_TOKEN, 401, "UNAUTHENTICATED"),
            ]
            for presented, status, code in cases:
                for method, path in (("GET", "/v1/me"), ("GET", "/v1/pending")):
                    reply = await a.call(method, path, headers=bearer(presented))
                    assert (reply.status, reply.body["error"]["code"]) == (status, code), path
                decided = await a.decide("approve", "pnd_" + "0" * 32, headers=bearer(presented))
                assert (decided.status, decided.body["error"]["code"]) == (status, code)
            invalid = await a.call("GET", "/v1/me", headers=bearer(approver_token(aud=AUDIENCE)))
            assert invalid.headers["WWW-Authenticate"] == 'Bearer error="invalid_token"'

    run_async(scenario())


def _problems(tmp_path: Path, issuer: Any) -> list[tuple[str, str, str]]:
    path = tmp_path / "approvers.json"
    path.write_text(json.dumps({"issuers": [issuer]}))
    with pytest.raises(ConfigError) as refused:
        load_approvers(path, APPROVER_ENV)
    return [(p.pointer, p.code, p.message) for p in refused.value.diagnostics]


def test_the_approvers_issuers_are_checked(tmp_path: Path) -> None:
    uri = {"jwksUri": "https://idp.example/jwks"}
    loaded = load_approvers(
        _write(tmp_path, {"issuers": [approvers_issuer(uri, objectives=["authoring"])]}),
        APPROVER_ENV,
    )
    [corp] = loaded.issuers
    assert (corp.issuer.id, corp.issuer.audience, corp.name_claim) == ("corp", APPROVALS, "email")
    assert dict(corp.require) == {"groups": "approvers"} and corp.issuer.scopes == {}
    assert corp.issuer.claims == ("groups", "email")  # the claims read: no other
    assert corp.narrowing.admits("authoring", "tutor-app")
    assert not corp.narrowing.admits("learner", "tutor-app")
    assert not corp.narrowing.admits("authoring", "other-app")
    assert len(loaded.static.tokens()) == 0

    cases = [
        (approvers_issuer(uri, requireClaims=...), "", "missing key `requireClaims`"),
        (approvers_issuer(uri, requireClaims={}), "/requireClaims", "require a claim"),
        (approvers_issuer(uri, requireClaims={"groups": 1.5}), "/requireClaims/groups", "string"),
        (approvers_issuer(uri, requireClaims={"a b": "x"}), "/requireClaims/a b", "claim name"),
        (approvers_issuer(uri, nameClaim=""), "/nameClaim", "claim name"),
        (approvers_issuer(uri, algorithms=["HS256"]), "/algorithms/0", "refused"),
        (approvers_issuer(uri, scopes={"a": "tools.approve"}), "/scopes", "unknown key"),
        (approvers_issuer(uri, applications=[]), "/applications", "name an application"),
        (approvers_issuer(uri, applications=["Tutor"]), "/applications/0", "does not match"),
        (approvers_issuer({"jwksUri": "http://idp.example/jwks"}), "/jwksUri", "loopback"),
    ]
    for issuer, pointer, word in cases:
        [(at, code, message)] = _problems(tmp_path, issuer)
        assert (at, code) == ("/issuers/0" + pointer, "ISSUER_INVALID"), (at, message)
        assert word in message, message


def test_the_approvers_file_needs_approvers_or_issuers(tmp_path: Path) -> None:
    narrowed = {
        "id": "ops-ana",
        "tokenRef": "env:SEIF_APPROVER_ANA",
        "objectives": ["authoring"],
        "applications": ["tutor-app", "corp"],
    }
    loaded = load_approvers(_write(tmp_path, {"approvers": [narrowed]}), APPROVER_ENV)
    scope = loaded.narrowing["ops-ana"]
    assert scope.admits("authoring", "tutor-app") and scope.admits("authoring", "corp:web")
    assert not scope.admits("authoring", "corporate") and not scope.admits("learner", "corp:web")
    for document, expected in (
        ({}, [("", "MISSING_KEY")]),
        (
            {"approvers": [{**narrowed, "objectives": []}]},
            [("/approvers/0/objectives", "NARROWING_EMPTY")],
        ),
        (
            {"approvers": [{**narrowed, "applications": ["corp", "corp"]}]},
            [("/approvers/0/applications/1", "DUPLICATE_ID")],
        ),
        (
            {
                "approvers": [narrowed],
                "issuers": [approvers_issuer({"jwksUri": "https://i/j"}, id="ops-ana")],
            },
            [("/issuers/0/id", "ISSUER_INVALID")],
        ),
    ):
        path = _write(tmp_path, document)
        with pytest.raises(ConfigError) as refused:
            load_approvers(path, APPROVER_ENV)
        assert [(p.pointer, p.code) for p in refused.value.diagnostics] == expected


def _write(tmp_path: Path, document: Any) -> Path:
    path = tmp_path / "approvers.json"
    path.write_text(json.dumps(document))
    return path
