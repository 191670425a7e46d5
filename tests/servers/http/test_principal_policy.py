"""The principal as a policy input, through the real runtime (``prepare`` + ``create_app``, the
synthetic executor, a JWKS endpoint on loopback): two users of one application, their tokens
differing in the ``groups`` claim, see and are decided differently by rules on
``principal.claims.groups``; a context belongs to the subject that resolved it (another user of
the same application finds it unknown, before and after a restart); records carry the principal
with the subject as a keyed fingerprint (the subject is nowhere on disk) and replay reproduces
the disclosures from them."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import pytest

from compiler.builds.build import load_build
from policy.offline.replay import replay
from seif.cli import main
from servers.log.decision_log import read_records
from tests.support.identity import Provider, issuer_entry, provider
from tests.support.principals import (
    ALICE,
    BOB,
    KEY,
    SUPPORT_ONLY,
    bearer_of,
    write_principal_build,
)
from tests.support.runtime_harness import (
    CREDENTIALS,
    READ_ARGS,
    Stack,
    run_async,
    running_stack,
)

SEARCH = {"query": "median", "limit": 2}


@asynccontextmanager
async def stack_with_issuer(root: Path, idp: Provider) -> AsyncIterator[Stack]:
    document = {**CREDENTIALS, "issuers": [issuer_entry(idp.url)]}
    async with running_stack(root, credentials=document) as stack:
        yield stack


async def resolve(s: Stack, headers: dict[str, str], objective: str = "authoring") -> Any:
    reply = await s.call(
        "POST",
        "/v1/context/resolve",
        {"objective": objective, "consumer": "course-authoring"},
        headers=headers,
    )
    assert reply.status == 200, reply
    return reply.body


async def execute(
    s: Stack, headers: dict[str, str], ctx: str, tool: str, call_id: str, arguments: Any
) -> Any:
    body = {"contextRef": ctx, "tool": tool, "callId": call_id, "arguments": arguments}
    reply = await s.call("POST", "/v1/context/tools/execute", body, headers=headers)
    assert reply.status == 200, reply
    return reply.body


def tool_ids(resolved: Any) -> list[str]:
    return [c["id"] for c in resolved["contracts"]]


def test_two_users_of_one_application_are_decided_by_their_claims(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    write_principal_build(tmp_path)
    alice = bearer_of(ALICE, ["support", "authors"])
    bob = bearer_of(BOB, ["learners"])

    async def first(idp: Provider) -> tuple[str, str]:
        async with stack_with_issuer(tmp_path, idp) as s:
            mine, theirs = await resolve(s, alice), await resolve(s, bob)
            assert tool_ids(mine) == ["inspect-context", "search-knowledge", "propose-change"]
            assert tool_ids(theirs) == ["inspect-context", "propose-change"]
            [omitted] = theirs["omitted"]
            assert (omitted["id"], omitted["reason"]) == ("search-knowledge", "CONDITION_NOT_MET")

            # the same call, decided by each caller's groups
            read = await execute(s, alice, mine["contextRef"], "inspect-context", "r1", READ_ARGS)
            assert read["status"] == "SUCCEEDED", read
            denied = await execute(s, bob, theirs["contextRef"], "inspect-context", "r1", READ_ARGS)
            assert (denied["status"], denied["reason"]) == ("DENIED", "CONDITION_DENIED")
            assert denied["decision"]["explanation"]["detail"] == SUPPORT_ONLY
            static = await s.resolve()  # the static credential: no claims, not support
            by_app = await s.execute(static["contextRef"], "inspect-context", "r1", READ_ARGS)
            assert (by_app["status"], by_app["reason"]) == ("DENIED", "CONDITION_DENIED")
            assert "search-knowledge" not in tool_ids(static)

            await refused_to_another_subject(s, mine["contextRef"], bob)
            owner = await s.call("GET", f"/v1/traces/{mine['contextRef']}", headers=alice)
            assert owner.status == 200 and owner.body["events"][0]["event"] == "DISCLOSED"
            # Alice's next token (another jti, other claims) is still Alice: her context
            again = bearer_of(ALICE, ["support", "authors"], jti="j-2")
            found = await execute(s, again, mine["contextRef"], "search-knowledge", "s1", SEARCH)
            assert found["status"] == "SUCCEEDED", found
            await learner_resolution(s)
            return mine["contextRef"], theirs["contextRef"]

    async def second(idp: Provider, mine: str, theirs: str) -> None:
        async with stack_with_issuer(tmp_path, idp) as s:  # restarted: the store keeps owners
            # the disclosure is recomputed from the row's principal: search is Alice's still
            found = await execute(s, alice, mine, "search-knowledge", "s2", SEARCH)
            assert found["status"] == "SUCCEEDED", found
            await refused_to_another_subject(s, mine, bob)
            hidden = await execute(s, bob, theirs, "search-knowledge", "s3", SEARCH)
            assert (hidden["status"], hidden["reason"]) == ("DENIED", "TOOL_NOT_DISCLOSED")

    async def scenario() -> None:
        async with provider([KEY]) as idp:
            mine, theirs = await first(idp)
            await second(idp, mine, theirs)

    run_async(scenario())
    data = tmp_path / "data"
    check_records(data)
    check_no_subject_on_disk(data)
    check_replay(tmp_path, data)
    capsys.readouterr()
    log = data / "decisions.cbor"
    assert main(["replay", "--build", str(tmp_path / "build"), "--log", str(log)]) == 0
    said = capsys.readouterr().out.splitlines()
    assert said[-1] == (
        "OK: 3 of 4 disclosures reproduce exactly; 1 not reproducible (a rule reads "
        "principal.subject)"
    )
    assert any(line.startswith("NOT REPRODUCIBLE seq ") for line in said)


async def refused_to_another_subject(s: Stack, ctx: str, other: dict[str, str]) -> None:
    """Another user of the same application cannot use, read or report on ``ctx``: it
    answers as for an unknown context."""
    used = await execute(s, other, ctx, "inspect-context", "x1", READ_ARGS)
    assert (used["status"], used["reason"]) == ("DENIED", "CONTEXT_UNKNOWN")
    traced = await s.call("GET", f"/v1/traces/{ctx}", headers=other)
    assert (traced.status, traced.body["error"]["code"]) == (404, "CONTEXT_UNKNOWN")
    reported = await s.call(
        "POST", "/v1/context/disclosures", {"contextRef": ctx, "tools": ["x"]}, headers=other
    )
    assert (reported.status, reported.body["error"]["code"]) == (404, "CONTEXT_UNKNOWN")
    status = await s.call("GET", f"/v1/context/tools/approvals/{ctx}/r1", headers=other)
    assert (status.status, status.body["error"]["code"]) == (404, "CONTEXT_UNKNOWN")


async def learner_resolution(s: Stack) -> None:
    """A learner context of Alice's: its rule reads ``principal.subject``."""
    learning = await resolve(s, bearer_of(ALICE, ["support"]), "learner")
    assert tool_ids(learning) == ["inspect-context", "search-knowledge"]


def check_records(data: Path) -> None:
    """``DISCLOSED`` and decision records of a token carry its principal, the subject as a
    keyed fingerprint and the allowlisted claims as given; a static credential's carry none."""
    records = list(read_records(data / "decisions.cbor"))
    disclosed = [r for r in records if r["event"] == "DISCLOSED"]
    by_token = [r for r in disclosed if r["credential"] == "corp:tutor-web"]
    assert len(by_token) == 3 and all("principal" in r for r in by_token)
    first = by_token[0]["principal"]
    assert (first["issuer"], first["clientId"]) == ("corp", "tutor-web")
    assert first["claims"] == {"groups": ["support", "authors"]}
    assert first["subject"].startswith("hmac-sha256:") and len(first["subject"]) == 44
    assert by_token[1]["principal"]["subject"] != first["subject"]  # Bob's
    assert by_token[2]["principal"]["subject"] == first["subject"]  # Alice's again
    static = [r for r in disclosed if r["credential"] == "tutor-app"]
    assert static and all("principal" not in r for r in static)  # compact: the credential
    denied = [r for r in records if r["event"] == "DENIED" and r["reason"] == "CONDITION_DENIED"]
    assert [r.get("principal", {}).get("claims") for r in denied] == [
        {"groups": ["learners"]},
        None,
    ]
    unknown = [r for r in records if r.get("reason") == "CONTEXT_UNKNOWN"]
    bobs = by_token[1]["principal"]["subject"]
    assert unknown and all(r["principal"]["subject"] == bobs for r in unknown)


def check_no_subject_on_disk(data: Path) -> None:
    """Neither subject is in any file of the data directory (the log, the store, its WAL)."""
    files = [p for p in data.rglob("*") if p.is_file()]
    assert any(p.name == "dispatch.sqlite" for p in files)
    for path in files:
        content = path.read_bytes()
        for subject in (ALICE, BOB):
            assert subject.encode() not in content, path
            assert subject.encode("utf-16-le") not in content, path


def check_replay(root: Path, data: Path) -> None:
    """Replay reproduces every disclosure from its recorded principal, but the learner one,
    whose rule reads ``principal.subject``: not reproducible from a fingerprint."""
    build = load_build(root / "build")
    records = list(read_records(data / "decisions.cbor"))
    report = replay(build.project, records, build_digest=build.digest)
    assert report.ok and not report.mismatches, report.to_json()
    assert report.disclosed == 4  # Alice's, Bob's, the static credential's, Alice's learner
    assert report.reproduced == 3
    [learner] = report.not_reproducible
    assert learner.objective == "learner"
    assert report.to_json()["notReproducible"] == [learner.to_json()]
