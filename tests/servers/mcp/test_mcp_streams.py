"""What one credential's MCP requests may hold of the runtime's connections.

An MCP request holds its connection while it is answered: a ``GET`` event stream for as long
as its client keeps it open, a ``POST`` as long as its answer takes. The attack: one
credential opened about 1,000 event streams (sessions of several objectives, one stream each)
and every connection of the runtime was taken: ``/v1/health`` and every other application got
503. Here a real ``seif serve --mcp --max-connections 32`` (a subprocess: MCP may answer 16
requests at once, 8 of them event streams; one credential 4, 2 of them event streams) is sent
more streams than it has connections, by one credential and then by several: past a
credential's budget a request is refused 429, past MCP's share 503, and health, the HTTP API
and the ``tools/list`` of a credential within its budget are answered throughout.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator, Iterator
from contextlib import AsyncExitStack, ExitStack, asynccontextmanager, contextmanager
from pathlib import Path
from typing import Any

import aiohttp
import pytest

from seif.cli import build_parser
from seif.serve.runtime import mcp_options
from servers.http.serving import MAX_CONNECTIONS, Limits
from servers.mcp.mounted import SESSIONS_PER_CREDENTIAL, STREAMS_PER_CREDENTIAL, McpOptions
from servers.mcp.streams import Streams
from tests.servers.mcp.test_mcp_boundary import (
    INVALID_REQUEST,
    rpc,
    session_headers,
    stateless_headers,
)
from tests.servers.mcp.test_mcp_calls import opened_session
from tests.support.runtime_harness import (
    APP_TOKEN,
    CREDENTIALS,
    ENV,
    OTHER_APP_TOKEN,
    PROPOSAL,
    READER_TOKEN,
    executor_process,
    listening,
    run_async,
    start_serve,
    stop,
    write_config,
)

LEARNER = "/mcp/learner"
AUTHORING = "/mcp/authoring?consumer=course-authoring"
MAX_CONNECTIONS_HERE = 32
PER_CREDENTIAL, IN_ALL = 4, 16
"""What ``--max-connections 32`` gives MCP: 16 requests in all, 4 per credential."""
STREAMS_PER, STREAMS_IN_ALL = 2, 8
"""Of them, event streams: half."""
STREAMERS = [f"streamer-{n}" for n in range(4)]


def _env_name(credential: str) -> str:
    return f"SEIF_{credential.upper().replace('-', '_')}_TOKEN"


STREAMER_TOKENS = {name: f"{name}-token-9e1b5d7c3a" for name in STREAMERS}
CREDENTIALS_HERE: dict[str, Any] = {
    "credentials": [
        *CREDENTIALS["credentials"],
        *(
            {
                "id": name,
                "tokenRef": f"env:{_env_name(name)}",
                "scopes": ["context.resolve", "tools.execute"],
            }
            for name in STREAMERS
        ),
    ]
}
ENV_HERE = {**ENV, **{_env_name(name): token for name, token in STREAMER_TOKENS.items()}}
TIMEOUT = aiohttp.ClientTimeout(total=15)
WAVE = 8
"""Streams asked for at once: a burst of more connections than the runtime holds would make it
abort the newest (before their requests came), which is no MCP matter."""


# --- the budgets, by arithmetic --------------------------------------------------------------


def test_mcp_holds_at_most_half_the_connections_and_one_credential_a_quarter_of_that() -> None:
    """The production defaults: 1,024 connections, MCP at most 512 of them, one credential
    64. However many credentials stream, half the connections stay for everything else."""
    default = McpOptions()
    assert (default.streams_in_all, default.streams_per_credential) == (512, 64)
    assert McpOptions.within(MAX_CONNECTIONS) == default
    assert default.streams_per_credential == STREAMS_PER_CREDENTIAL
    assert default.sessions_per_credential == SESSIONS_PER_CREDENTIAL
    for connections in (1, 2, 3, 7, 8, 16, 100, 1024, 4096, 100_000):
        options = McpOptions.within(connections)
        assert 1 <= options.streams_per_credential <= options.streams_in_all
        if connections >= 2:  # the other half: everything else, health first
            assert connections - options.streams_in_all >= connections // 2, connections
        assert options.streams_per_credential <= max(1, options.streams_in_all // 4)
        assert options.streams_per_credential <= STREAMS_PER_CREDENTIAL
    here = McpOptions.within(MAX_CONNECTIONS_HERE)
    assert (here.streams_per_credential, here.streams_in_all) == (PER_CREDENTIAL, IN_ALL)


def test_a_credential_s_event_streams_leave_its_calls_room() -> None:
    """Event streams take at most half of a credential's budget and of MCP's share."""
    streams = Streams(PER_CREDENTIAL, IN_ALL)
    with ExitStack() as held:
        for _ in range(STREAMS_PER):
            assert held.enter_context(streams.held("a", True)) is None
        refused = held.enter_context(streams.held("a", True))
        assert refused is not None and refused.status == 429
        for _ in range(PER_CREDENTIAL - STREAMS_PER):
            assert held.enter_context(streams.held("a", False)) is None
        refused = held.enter_context(streams.held("a", False))
        assert refused is not None and refused.status == 429
        for credential in "bcd":
            for _ in range(STREAMS_PER):
                assert held.enter_context(streams.held(credential, True)) is None
        refused = held.enter_context(streams.held("e", True))  # 8 streams: MCP's share of them
        assert refused is not None and refused.status == 503
        assert held.enter_context(streams.held("e", False)) is None  # a call still has room
    assert streams.open == {} and sum(streams.totals.values()) == 0


def test_seif_serve_gives_mcp_its_share_of_the_connections_it_serves() -> None:
    files = ("--build", "b", "--bindings", "b.json", "--credentials", "c.json", "--data", "d")
    args = build_parser().parse_args(["serve", *files, "--mcp", "--mcp-approval-wait", "30"])
    options = mcp_options(args, Limits(max_connections=MAX_CONNECTIONS_HERE))
    assert options == McpOptions.within(MAX_CONNECTIONS_HERE, approval_wait_s=30.0)
    assert mcp_options(args, Limits()).streams_in_all == MAX_CONNECTIONS // 2


@pytest.mark.parametrize(
    "fields",
    [
        {"streams_per_credential": 0},
        {"streams_in_all": 0},
        {"sessions_per_credential": 0},
        {"streams_per_credential": 9, "streams_in_all": 8},
    ],
)
def test_budgets_out_of_range_are_refused(fields: dict[str, int]) -> None:
    with pytest.raises(ValueError, match="budget"):
        McpOptions(**fields)


# --- the attack, on a real `seif serve --mcp` ------------------------------------------------


@contextmanager
def serve_mcp(tmp_path: Path, *extra: str) -> Iterator[str]:
    """`seif serve --mcp --max-connections 32` (and ``extra`` arguments) on the reference
    executor: its base URL."""
    with executor_process(tmp_path) as executor_url:
        config = write_config(tmp_path, executor_url, credentials=CREDENTIALS_HERE)
        args = ("--mcp", "--mcp-approval-wait", "3", "--max-connections", "32", *extra)
        proc = start_serve(config, *args, env=ENV_HERE)
        try:
            yield listening(proc)
        finally:
            stop(proc)
        err = (config.data.parent / "serve.err").read_text()
        assert "Traceback" not in err, err


@asynccontextmanager
async def streams(base: str, token: str, count: int) -> AsyncIterator[list[Any]]:
    """``count`` sessions of ``token``'s credential at ``/mcp/learner``, each asking for its
    ``GET`` event stream (:data:`WAVE` at once); yields what each got: its open response (the
    stream, kept open until the block ends) or ``(status, body)`` of a refusal."""
    url = base + LEARNER
    connector = aiohttp.TCPConnector(limit=0)
    async with aiohttp.ClientSession(connector=connector, timeout=TIMEOUT) as http:
        sessions = [await opened_session(http, url, token) for _ in range(count)]

        async def asked(session: str) -> Any:
            response = await http.get(url, headers=session_headers(session, token))
            if response.status == 200:
                return response  # the stream: its headers came, its events would follow
            body = await response.read()
            response.release()
            return response.status, json.loads(body) if body else None

        got: list[Any] = []
        for wave in range(0, count, WAVE):  # fewer at once than the runtime has connections
            asking = (asked(s) for s in sessions[wave : wave + WAVE])
            got += await asyncio.gather(*asking, return_exceptions=True)
        try:
            yield got
        finally:
            for item in got:
                if isinstance(item, aiohttp.ClientResponse):
                    item.close()


def opened(got: list[Any]) -> int:
    return sum(isinstance(item, aiohttp.ClientResponse) for item in got)


def refused(got: list[Any], status: int) -> int:
    """Refusals of ``status``, each a JSON-RPC error saying why."""
    found = [item for item in got if isinstance(item, tuple) and item[0] == status]
    for _, body in found:
        assert body["error"]["code"] == INVALID_REQUEST and body["error"]["message"], body
    return len(found)


async def listed(http: aiohttp.ClientSession, base: str, token: str) -> int:
    """The status of ``token``'s ``tools/list`` (stateless), checked to list tools if 200."""
    listing = rpc("tools/list", style="stateless")
    headers = stateless_headers(listing, token)
    async with http.post(base + LEARNER, data=json.dumps(listing), headers=headers) as r:
        body = await r.json()
        assert r.status != 200 or body["result"]["tools"], body
        return r.status


async def served(base: str, *tokens: str) -> None:
    """Health, readiness and the HTTP API (a resolve) answer, and so does each of ``tokens``'s
    ``tools/list``."""
    async with aiohttp.ClientSession(timeout=TIMEOUT) as http:
        for path in ("/v1/health", "/v1/ready"):
            async with http.get(base + path) as r:
                assert r.status == 200, (path, r.status, await r.text())
        resolve = {"objective": "learner"}
        headers = {"Authorization": f"Bearer {READER_TOKEN}"}
        async with http.post(base + "/v1/context/resolve", json=resolve, headers=headers) as r:
            assert r.status == 200, (r.status, await r.text())
        for token in tokens:
            assert await listed(http, base, token) == 200, token


async def held_calls(base: str, token: str, count: int) -> list[asyncio.Task[int]]:
    """``count`` calls of ``propose_change`` (it needs approval: each waits 3 s for it), under
    way; each task's result is its status."""
    url = base + AUTHORING

    async def call(n: int) -> int:
        params = {"name": "propose_change", "arguments": PROPOSAL,
                  "_meta": {"io.seif/callId": f"held-{n}"}}  # fmt: skip
        message = rpc("tools/call", params, style="stateless")
        async with aiohttp.ClientSession(timeout=TIMEOUT) as http:
            headers = stateless_headers(message, token)
            async with http.post(url, data=json.dumps(message), headers=headers) as r:
                await r.read()
                return r.status

    tasks = [asyncio.create_task(call(n)) for n in range(count)]
    await asyncio.sleep(1.0)  # every one is held, waiting
    return tasks


def test_one_credential_s_streams_past_its_budget_are_refused_and_everyone_else_is_served(
    tmp_path: Path,
) -> None:
    """More event streams of one credential than the runtime has connections (the attack):
    its budget's worth are open, the rest refused 429; its own calls still have room, and
    health, the HTTP API and another credential are served. Its calls count too: with two
    more waiting for approval, its next request is refused, never another's."""

    async def scenario(base: str) -> None:
        count = MAX_CONNECTIONS_HERE + 4
        async with streams(base, APP_TOKEN, count) as got:
            assert not [g for g in got if isinstance(g, BaseException)], got
            assert opened(got) == STREAMS_PER, got
            assert refused(got, 429) == count - STREAMS_PER, got
            await served(base, APP_TOKEN, OTHER_APP_TOKEN)
            waiting = await held_calls(base, APP_TOKEN, PER_CREDENTIAL - STREAMS_PER)
            async with aiohttp.ClientSession(timeout=TIMEOUT) as http:
                assert await listed(http, base, APP_TOKEN) == 429  # its budget is full
            await served(base, OTHER_APP_TOKEN)
            assert await asyncio.gather(*waiting) == [200] * len(waiting)
        await asyncio.sleep(1.0)  # the runtime sees its client gone within 0.25 s
        async with streams(base, APP_TOKEN, STREAMS_PER) as again:  # room again
            assert opened(again) == STREAMS_PER, again

    with serve_mcp(tmp_path) as base:
        run_async(scenario(base))


def test_many_credentials_streaming_fill_mcp_s_share_never_the_runtime(tmp_path: Path) -> None:
    """Five credentials, each at its budget of event streams: MCP's share of streams (8) is
    full and the rest are refused 503, while health, the HTTP API and every credential's
    ``tools/list`` are answered."""

    async def scenario(base: str) -> None:
        tokens = (APP_TOKEN, *STREAMER_TOKENS.values())
        async with AsyncExitStack() as held:
            got: list[Any] = []
            for token in tokens:
                got += await held.enter_async_context(streams(base, token, STREAMS_PER))
            assert opened(got) == STREAMS_IN_ALL, got
            assert refused(got, 503) == STREAMS_PER * len(tokens) - STREAMS_IN_ALL, got
            await served(base, *tokens, OTHER_APP_TOKEN)
        await asyncio.sleep(1.0)  # the runtime sees its clients gone within 0.25 s
        async with streams(base, STREAMER_TOKENS[STREAMERS[-1]], STREAMS_PER) as again:
            assert opened(again) == STREAMS_PER, again

    with serve_mcp(tmp_path) as base:
        run_async(scenario(base))
