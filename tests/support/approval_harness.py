"""The approval server in tests: a runtime and the synthetic executor (``running_stack``) and
an approval server in front of them, all in process on loopback ports.

- :func:`approval_stack` (async): yields an :class:`ApprovalStack`; :func:`decide` approves or
  rejects one call by its call id.
- :func:`approval_in_thread`: the same on an event loop of a background thread, for blocking
  clients such as Playwright's sync API; ``run(coro)`` runs a coroutine on that loop.

Approvers: ``ops-ana`` (``ANA``) and ``ops-ben`` (``BEN``), tokens from ``APPROVER_ENV``.
"""

from __future__ import annotations

import contextlib
import json
import tempfile
from collections.abc import AsyncIterator, Mapping
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

import aiohttp

from policy.json.strict import loads
from servers.approval.app import ApprovalConfig, create_app
from servers.config.approvers import Approvers, load_approvers
from tests.support.runtime_harness import (
    APPROVAL_TOKEN,
    ENV,
    Clock,
    Reply,
    Stack,
    Threaded,
    in_thread,
    running_stack,
    serving,
    wall_clock,
)

T = TypeVar("T")
ANA_TOKEN = "approver-ana-token-4b8d2f6a1c"
BEN_TOKEN = "approver-ben-token-9e3c7a5d0b"
APPROVER_ENV = {"SEIF_APPROVER_ANA": ANA_TOKEN, "SEIF_APPROVER_BEN": BEN_TOKEN}
APPROVERS = {
    "approvers": [
        {"id": "ops-ana", "tokenRef": "env:SEIF_APPROVER_ANA"},
        {"id": "ops-ben", "tokenRef": "env:SEIF_APPROVER_BEN"},
    ]
}
ANA = {"Authorization": f"Bearer {ANA_TOKEN}"}
BEN = {"Authorization": f"Bearer {BEN_TOKEN}"}


def APPROVERS_CREDENTIALS() -> Approvers:  # reads as the constant it builds
    """The approvers of :data:`APPROVERS`, with their tokens."""
    with tempfile.TemporaryDirectory() as tmp:
        return load_approvers(write_approvers(Path(tmp)), {**ENV, **APPROVER_ENV})


def write_approvers(root: Path, document: Mapping[str, Any] | None = None) -> Path:
    path = root / "approvers.json"
    path.write_text(json.dumps(APPROVERS if document is None else document))
    return path


@dataclass
class ApprovalStack:
    """The runtime's :class:`Stack` (``runtime``) and the approval server's URL."""

    runtime: Stack
    url: str
    http: aiohttp.ClientSession

    async def call(
        self,
        method: str,
        path: str,
        body: Any = None,
        *,
        headers: Mapping[str, str] | None = None,
    ) -> Reply:
        """A request to the approval server, as ``ops-ana`` unless ``headers`` say otherwise."""
        data = None if body is None else json.dumps(body).encode()
        sent = dict(ANA if headers is None else headers)
        async with self.http.request(method, self.url + path, data=data, headers=sent) as r:
            text = await r.read()
            try:
                parsed = loads(text)
            except ValueError:
                parsed = text
            return Reply(r.status, parsed, dict(r.headers))

    async def pending(self, headers: Mapping[str, str] | None = None) -> list[dict[str, Any]]:
        """Every pending call: ``GET /v1/pending``, then each page its ``next`` names."""
        found: list[dict[str, Any]] = []
        path: str | None = "/v1/pending"
        while path is not None:
            reply = await self.call("GET", path, headers=headers)
            assert reply.status == 200, reply
            found += reply.body["pending"]
            after = reply.body["next"]
            path = None if after is None else f"/v1/pending?after={after}"
        return found

    async def decide(self, kind: str, pending_id: str, reason: Any = "checked", **kw: Any) -> Reply:
        body = {"reason": reason} if reason is not None else {}
        return await self.call("POST", f"/v1/pending/{pending_id}/{kind}", body, **kw)


async def decide(a: ApprovalStack, kind: str, call_id: str) -> Reply:
    """Approve or reject (``kind``) the pending call of ``call_id`` as ``ops-ana``, which
    must be listed and must succeed."""
    listed = {item["callId"]: item["pendingId"] for item in await a.pending()}
    assert call_id in listed, listed
    done = await a.decide(kind, listed[call_id])
    assert done.status == 200, done
    return done


@asynccontextmanager
async def approval_stack(
    root: Path,
    *,
    clock: Clock = wall_clock,
    runtime_url: str | None = None,
    approvers: Mapping[str, Any] | None = None,
    approver_env: Mapping[str, str] | None = None,
    **options: Any,
) -> AsyncIterator[ApprovalStack]:
    """A :func:`running_stack` (``options`` are its) and an approval server in front of it
    (or of ``runtime_url``), reading ``clock``; ``approvers``: the approvers file's document
    (default :data:`APPROVERS`), its tokens from ``approver_env`` besides
    :data:`APPROVER_ENV`."""
    env = {**ENV, **APPROVER_ENV, **(approver_env or {})}
    loaded = load_approvers(write_approvers(root, approvers), env)
    async with running_stack(root, clock=clock, **options) as runtime:
        config = ApprovalConfig(
            runtime_url=runtime_url or runtime.runtime,
            approvers=loaded,
            runner_token=APPROVAL_TOKEN,
            clock=clock,
            timeout_s=5.0,
        )
        async with serving(create_app(config)) as url, aiohttp.ClientSession() as http:
            yield ApprovalStack(runtime, url, http)


ThreadedApproval = Threaded[ApprovalStack]


def approval_in_thread(
    root: Path, **options: Any
) -> contextlib.AbstractContextManager[ThreadedApproval]:
    """:func:`approval_stack` on an event loop of a background thread."""
    return in_thread(approval_stack(root, **options), "approval-loop")
