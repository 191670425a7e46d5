"""MCP's transport security (DNS rebinding, ``docs/mcp.md#transport-security``): the ``Origin``
of every request to ``/mcp/{objective}`` and, on a runtime listening on loopback, its ``Host``
are checked before its token: 403 ``ORIGIN_REFUSED``, never 401, nothing dispatched.

A page whose name its author points at ``127.0.0.1`` is sent by the browser with that name as
its ``Host`` and the page's ``Origin``: both are spoken raw here, to a runtime in process (on
loopback, ``https://app.example`` allowed) and to real ``seif serve --mcp`` processes, one on
loopback and one on every address (``0.0.0.0``), where the ``Host`` rule does not apply and the
loopback origins are not allowed."""

from __future__ import annotations

import argparse
import json
from collections.abc import Iterator
from pathlib import Path

import aiohttp
import pytest
from yarl import URL

from seif.cli import build_parser
from seif.serve.runtime import mcp_options
from servers.http.serving import Limits
from servers.mcp.mounted import McpOptions
from servers.mcp.origins import is_loopback, origin
from tests.servers.mcp.test_mcp_boundary import (
    AUTHORING,
    CALL_ID,
    STYLES,
    Answer,
    Boundary,
    assert_http_error,
    base_headers,
    rpc,
    session_headers,
    stack_in_a_thread,
    stateless_headers,
)
from tests.servers.mcp.test_mcp_streams import serve_mcp
from tests.support.runtime_harness import APP_TOKEN, READ_ARGS, run_async

ALLOWED = "https://app.example"
EVIL = "http://evil.example"
OPTIONS = McpOptions(approval_wait_s=1.0, allowed_origins=frozenset({ALLOWED}))
LIST = rpc("tools/list", style="stateless")


@pytest.fixture(scope="module")
def mcp(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Boundary]:
    with stack_in_a_thread(tmp_path_factory.mktemp("mcp-origins"), OPTIONS) as threaded:
        yield Boundary(threaded)


def port_of(mcp: Boundary) -> int:
    port = URL(mcp.stack.runtime).port
    assert port is not None
    return port


def assert_refused(answer: Answer) -> None:
    """403 ``ORIGIN_REFUSED``, before authentication (no ``WWW-Authenticate``)."""
    assert_http_error(answer, 403, "ORIGIN_REFUSED")
    assert "WWW-Authenticate" not in answer.headers, answer


def assert_listed(answer: Answer) -> None:
    assert answer.status == 200, answer
    assert answer.result()["tools"], answer


# --- Origin ----------------------------------------------------------------------------------


@pytest.mark.parametrize("token", [APP_TOKEN, "not-a-token", None], ids=["valid", "wrong", "none"])
@pytest.mark.parametrize("style", STYLES)
def test_a_call_from_another_origin_is_refused_before_its_token_is_looked_at(
    mcp: Boundary, style: str, token: str | None
) -> None:
    params = {"name": "inspect_context", "arguments": READ_ARGS,
              "_meta": {CALL_ID: f"evil-{style}-{token is None}"}}  # fmt: skip
    call = rpc("tools/call", params, style=style)
    headers = {**mcp.headers_for(style, call, token), "Origin": EVIL}
    before = mcp.dispatched()
    assert_refused(mcp.post(AUTHORING, call, headers))
    assert mcp.dispatched() == before


@pytest.mark.parametrize("method", ["GET", "DELETE"])
def test_a_stream_or_an_ending_asked_from_another_origin_is_refused(
    mcp: Boundary, method: str
) -> None:
    session = mcp.open_session()
    assert_refused(mcp.send(method, AUTHORING, None, {**session_headers(session), "Origin": EVIL}))
    listed = mcp.post(AUTHORING, rpc("tools/list"), session_headers(session))
    assert_listed(listed)  # the session was not ended


def test_an_initialize_from_another_origin_opens_no_session(mcp: Boundary) -> None:
    initialize = rpc("initialize", {"protocolVersion": "2025-11-25", "capabilities": {},
                                    "clientInfo": {"name": "t", "version": "1"}})  # fmt: skip
    answer = mcp.post(AUTHORING, initialize, {**base_headers(), "Origin": EVIL})
    assert_refused(answer)
    assert "Mcp-Session-Id" not in answer.headers


REFUSED_ORIGINS = [
    EVIL,
    "null",  # a sandboxed page, a file
    "http://localhost.evil.example",
    "http://127.0.0.1.nip.io:8787",
    "https://localhost",  # the loopback origins are http's
    "http://app.example",  # the allowed origin is https's
    "https://app.example:8443",  # ... on its default port
    "https://app.example/",  # an origin has no path
    "http://127.0.0.1:99999",
]


@pytest.mark.parametrize("sent", REFUSED_ORIGINS)
def test_an_origin_that_is_not_allowed_is_refused(mcp: Boundary, sent: str) -> None:
    assert_refused(mcp.post(AUTHORING, LIST, {**stateless_headers(LIST), "Origin": sent}))


def test_two_origins_are_refused_even_if_one_is_allowed(mcp: Boundary) -> None:
    headers = [*stateless_headers(LIST).items(), ("Origin", ALLOWED), ("Origin", EVIL)]
    assert_refused(mcp.post(AUTHORING, LIST, headers))


@pytest.mark.parametrize(
    "sent",
    ["http://localhost:{port}", "http://127.0.0.1:{port}", "http://[::1]:9", "http://LOCALHOST",
     ALLOWED, "https://APP.example:443"],
)  # fmt: skip
def test_a_loopback_origin_and_an_allowed_one_are_served(mcp: Boundary, sent: str) -> None:
    headers = {**stateless_headers(LIST), "Origin": sent.format(port=port_of(mcp))}
    assert_listed(mcp.post(AUTHORING, LIST, headers))


def test_an_allowed_origin_still_needs_its_token(mcp: Boundary) -> None:
    answer = mcp.post(AUTHORING, LIST, {**stateless_headers(LIST, None), "Origin": ALLOWED})
    assert_http_error(answer, 401, "UNAUTHENTICATED")


# --- Host, on a runtime listening on loopback --------------------------------------------------


@pytest.mark.parametrize(
    "host",
    ["evil.example", "evil.example:{port}", "127.0.0.1.nip.io:{port}", "localhost.:{port}",
     "10.0.0.1:{port}", "[::2]:{port}", "localhost@evil.example", ""],
)  # fmt: skip
@pytest.mark.parametrize("origin_sent", [None, ALLOWED])
def test_a_host_that_is_not_a_loopback_name_is_refused(
    mcp: Boundary, host: str, origin_sent: str | None
) -> None:
    headers = {**stateless_headers(LIST), "Host": host.format(port=port_of(mcp))}
    if origin_sent is not None:
        headers["Origin"] = origin_sent
    assert_refused(mcp.post(AUTHORING, LIST, headers))


@pytest.mark.parametrize(
    "host", ["localhost:{port}", "127.0.0.1:{port}", "[::1]:{port}", "LocalHost", "127.0.0.1"]
)
def test_a_loopback_host_is_served(mcp: Boundary, host: str) -> None:
    headers = {**stateless_headers(LIST), "Host": host.format(port=port_of(mcp))}
    assert_listed(mcp.post(AUTHORING, LIST, headers))


# --- seif serve: --mcp-allowed-origin, and a runtime on a non-loopback address ----------------


async def _statuses(
    url: str, cases: dict[str, tuple[str | None, dict[str, str]]]
) -> dict[str, int]:
    """The status of a stateless ``tools/list`` of each case: a token (or none) and headers."""
    got = {}
    async with aiohttp.ClientSession() as http:
        for name, (token, headers) in cases.items():
            sent = {**stateless_headers(LIST, token), **headers}
            async with http.post(url, data=json.dumps(LIST), headers=sent) as reply:
                body = await reply.read()
                got[name] = reply.status
                if reply.status == 403:
                    assert json.loads(body)["error"]["code"] == "ORIGIN_REFUSED"
    return got


CLI_CASES: dict[str, tuple[str | None, dict[str, str]]] = {
    "allowed origin": (APP_TOKEN, {"Origin": ALLOWED}),
    "loopback origin": (APP_TOKEN, {"Origin": "http://localhost:8787"}),
    "evil origin": (APP_TOKEN, {"Origin": EVIL}),
    "evil origin, no token": (None, {"Origin": EVIL}),
    "evil host": (APP_TOKEN, {"Host": "evil.example"}),
}


@pytest.mark.parametrize(
    ("host", "expected"),
    [
        pytest.param("127.0.0.1", {"allowed origin": 200, "loopback origin": 200,
                                   "evil origin": 403, "evil origin, no token": 403,
                                   "evil host": 403}, id="loopback"),
        pytest.param("0.0.0.0", {"allowed origin": 200, "loopback origin": 403,
                                 "evil origin": 403, "evil origin, no token": 403,
                                 "evil host": 200}, id="every-address"),
    ],
)  # fmt: skip
def test_seif_serve_allows_the_origins_given_and_applies_the_host_rule_on_loopback_only(
    tmp_path: Path, host: str, expected: dict[str, int]
) -> None:
    given = ("--host", host, "--mcp-allowed-origin", "HTTPS://app.example:443")
    with serve_mcp(tmp_path, *given) as base:
        url = str(URL(base).with_host("127.0.0.1")) + AUTHORING  # on every address: loopback too
        assert run_async(_statuses(url, CLI_CASES)) == expected


def _parsed(*extra: str) -> argparse.Namespace:
    files = ("--build", "b", "--bindings", "b.json", "--credentials", "c.json", "--data", "d")
    return build_parser().parse_args(["serve", *files, "--mcp", *extra])


def test_the_options_say_whether_the_runtime_listens_on_loopback() -> None:
    given = ("--mcp-allowed-origin", "https://a.example", "--mcp-allowed-origin", "http://B:80")
    options = mcp_options(_parsed(*given), Limits())
    assert options.allowed_origins == {"https://a.example", "http://b"} and options.loopback
    assert not mcp_options(_parsed("--host", "0.0.0.0"), Limits()).loopback
    assert mcp_options(_parsed("--host", "::1"), Limits()).loopback
    assert mcp_options(_parsed("--host", "localhost"), Limits()).loopback


@pytest.mark.parametrize(
    "given", ["null", "https://app.example/", "app.example", "https://app.example?x", "http://:80"]
)
def test_seif_serve_refuses_an_allowed_origin_that_is_no_origin(
    given: str, capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit) as exited:
        _parsed("--mcp-allowed-origin", given)
    assert exited.value.code == 2
    assert "--mcp-allowed-origin" in capsys.readouterr().err


@pytest.mark.parametrize(
    ("host", "loopback"),
    [("127.0.0.1", True), ("127.1.2.3", True), ("::1", True), ("[::1]", True),
     ("LOCALHOST", True), ("0.0.0.0", False), ("::", False), ("192.0.2.1", False),
     ("example.com", False)],
)  # fmt: skip
def test_a_loopback_address_is_told_apart(host: str, loopback: bool) -> None:
    assert is_loopback(host) is loopback


def test_an_origin_has_one_form() -> None:
    assert origin("HTTPS://App.Example:443") == "https://app.example"
    assert origin("http://[::1]:8080") == "http://[::1]:8080"
    assert origin("http://127.0.0.1:80") == "http://127.0.0.1"
    assert origin("chrome-extension://abcdef") == "chrome-extension://abcdef"
