"""Issuers on runtime replicas sharing one PostgreSQL store (issue 32): a token of an issuer
authenticates the same on every replica (each fetches the issuer's keys itself), a context it
resolved on one is used on another by the same issuer, client and subject only, and an issuer
narrowed to some objectives is refused the others on every replica."""

from __future__ import annotations

import itertools
import time
from pathlib import Path
from typing import Any

from tests.servers.store.test_replicas import replicas
from tests.support.identity import claims, issuer_entry, provider, rsa_key, token
from tests.support.runtime_harness import CREDENTIALS, READ_ARGS, run_async

KEY = rsa_key("replicas-k1")


def bearer(**extra: Any) -> dict[str, str]:
    presented = token(KEY, claims(int(time.time()), **extra))
    return {"Authorization": f"Bearer {presented}"}


RESOLVE = {"objective": "authoring", "consumer": "course-authoring"}


def test_a_token_s_context_is_used_across_replicas_by_its_own_client_only(
    tmp_path: Path, pg_url: str
) -> None:
    async def scenario() -> None:
        async with provider([KEY]) as idp:
            document = {**CREDENTIALS, "issuers": [issuer_entry(idp.url)]}
            async with replicas(tmp_path, pg_url, credentials=document) as (a, b):
                mine = bearer()
                resolved = await a.call("POST", "/v1/context/resolve", RESOLVE, headers=mine)
                assert resolved.status == 200, resolved
                ref = resolved.body["contextRef"]
                body = {"contextRef": ref, "tool": "inspect-context", "callId": "c1",
                        "arguments": READ_ARGS}  # fmt: skip
                done = await b.call("POST", "/v1/context/tools/execute", body, headers=mine)
                assert done.status == 200 and done.body["status"] == "SUCCEEDED", done
                again = await a.call("POST", "/v1/context/tools/execute", body, headers=mine)
                assert again.body["duplicate"] is True
                # another client of the same issuer, or another user of the same client, on
                # either replica: an unknown context (the owner's subject is in the shared store,
                # as a keyed fingerprint every replica computes alike)
                scope = "seif.resolve seif.execute seif.traces"
                for theirs, replica in itertools.product(
                    (bearer(client_id="another-app", scope=scope), bearer(sub="u-2", scope=scope)),
                    (a, b),
                ):
                    other = {**body, "callId": "c2"}
                    refused = await replica.call(
                        "POST", "/v1/context/tools/execute", other, headers=theirs
                    )
                    assert refused.status == 200, refused  # a receipt: as for an unknown context
                    assert (refused.body["status"], refused.body["reason"]) == (
                        "DENIED",
                        "CONTEXT_UNKNOWN",
                    )
                    trace = await replica.call("GET", f"/v1/traces/{ref}", headers=theirs)
                    assert trace.status == 404, trace
                # the static credential does not own it either
                assert (await b.call("GET", f"/v1/traces/{ref}")).status == 404
            assert idp.fetches >= 2, "each replica fetched the issuer's keys itself"

    run_async(scenario())


def test_an_issuer_narrowed_to_an_objective_is_refused_the_others_on_every_replica(
    tmp_path: Path, pg_url: str
) -> None:
    async def scenario() -> None:
        async with provider([KEY]) as idp:
            narrowed = issuer_entry(idp.url, objectives=["authoring"])
            document = {**CREDENTIALS, "issuers": [narrowed]}
            async with replicas(tmp_path, pg_url, credentials=document) as stacks:
                for replica in stacks:
                    allowed = await replica.call(
                        "POST", "/v1/context/resolve", RESOLVE, headers=bearer()
                    )
                    assert allowed.status == 200, allowed
                    learner = {"objective": "learner", "consumer": "tutor-app"}
                    refused = await replica.call(
                        "POST", "/v1/context/resolve", learner, headers=bearer()
                    )
                    assert refused.status == 403, refused
                    assert refused.body["error"]["code"] == "OBJECTIVE_FORBIDDEN"

    run_async(scenario())
