"""Executors over TLS, against real TLS servers on loopback (a test CA made with ``trustme``):
a binding's ``caFile`` and its refusals, verified certificates and host names, and a kept-alive
connection that the executor closes just as the client reuses it (plain and TLS, on asyncio's
loop and on uvloop, the runtime's)."""

from __future__ import annotations

import asyncio
import json
import ssl
import time
from collections.abc import AsyncIterator, Callable, Coroutine
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any, TypeVar

import pytest
from aiohttp import web

from servers.config.files import Binding, ConfigError, load_bindings
from servers.executor.client import CONTRACT, ExecutorClient, Outcome, new_transport
from tests.support.runtime_harness import (
    ENV,
    READ_ARGS,
    Stack,
    bindings_document,
    execute_request,
    reference_project,
    runtime_stack,
    write_config,
)
from tests.support.tls_executor import (
    Pki,
    calls,
    executor_in_thread,
    make_pki,
    reference_app,
    server_context,
    serving_tls,
)

T = TypeVar("T")
TOOL = reference_project().tool_by_id["inspect-context"]
LOOPS = ["asyncio", "uvloop"]
LEARNER = {"objective": "learner", "consumer": "tutor-app"}


@pytest.fixture(scope="module")
def pki() -> Pki:
    return make_pki()


def run_on(loop: str, coro: Coroutine[Any, Any, T]) -> T:
    if loop == "uvloop":
        uvloop = pytest.importorskip("uvloop")
        result: T = uvloop.run(coro)
        return result
    return asyncio.run(coro)


def bindings_file(root: Path, base: str, **fields: Any) -> Path:
    entry = {
        "endpoint": f"{base}/inspect-context",
        "secretRef": "env:CONTEXT_TOOL_INSPECT_TOKEN",
        **fields,
    }
    path = root / "bindings.json"
    path.write_text(json.dumps({"environment": "test", "revision": 1, "tools": {TOOL.id: entry}}))
    return path


def bind(root: Path, base: str, **fields: Any) -> Binding:
    return load_bindings(bindings_file(root, base, **fields), reference_project(), ENV).tools[
        TOOL.id
    ]


async def describe_then_execute(
    binding: Binding, between: Callable[[ExecutorClient], None] | None = None
) -> tuple[dict[str, Any], Outcome]:
    """One ``describe`` and one ``execute`` on one client, ``between`` run in between."""
    transport = new_transport()
    client = ExecutorClient(transport)
    try:
        seen = await client.describe(binding)
        if between is not None:
            between(client)
        return seen, await client.execute(binding, TOOL, execute_request(TOOL, READ_ARGS))
    finally:
        await transport.close()


# --- configuration -----------------------------------------------------------------------------


def test_ca_file_gives_one_verifying_context_per_file(tmp_path: Path, pki: Pki) -> None:
    ca = pki.write_ca(tmp_path / "ca.pem")
    (tmp_path / "sub").mkdir()
    tools = {
        "inspect-context": {"endpoint": "https://a.example/i", "caFile": "ca.pem"},
        "search-knowledge": {"endpoint": "https://b.example/s", "caFile": str(ca)},
        "propose-change": {"endpoint": "https://c.example/p", "caFile": "sub/../ca.pem"},
    }
    for entry in tools.values():
        entry["secretRef"] = "env:CONTEXT_TOOL_INSPECT_TOKEN"
    path = tmp_path / "bindings.json"
    path.write_text(json.dumps({"environment": "test", "revision": 1, "tools": tools}))
    bound = load_bindings(path, reference_project(), ENV).tools
    contexts = {id(b.tls) for b in bound.values()}
    assert len(contexts) == 1 and {b.ca_file for b in bound.values()} == {ca.resolve()}
    context = bound["inspect-context"].tls
    assert context is not None and context.check_hostname
    assert context.verify_mode == ssl.CERT_REQUIRED
    assert context.minimum_version == ssl.TLSVersion.TLSv1_2
    assert context.cert_store_stats()["x509_ca"] == 1  # the private CA only, no system roots
    assert "ca.pem" in repr(bound["inspect-context"]) and "SSLContext" not in repr(bound)


def test_https_without_ca_file_trusts_the_system_store_and_http_uses_no_tls(
    tmp_path: Path,
) -> None:
    document = bindings_document("https://executor.example")
    document["tools"]["propose-change"]["endpoint"] = "http://127.0.0.1:9/propose-change"
    path = tmp_path / "bindings.json"
    path.write_text(json.dumps(document))
    bound = load_bindings(path, reference_project(), ENV).tools
    inspect, search = bound["inspect-context"].tls, bound["search-knowledge"].tls
    assert inspect is not None and inspect is search  # one system context, built once
    assert inspect.check_hostname and inspect.minimum_version == ssl.TLSVersion.TLSv1_2
    assert bound["propose-change"].tls is None and bound["propose-change"].ca_file is None


def _write(tmp_path: Path, name: str, text: str) -> str:
    (tmp_path / name).write_text(text)
    return name


CA_FILE_REFUSALS: list[tuple[str, Callable[[Path, Pki], Any], str]] = [
    ("missing", lambda d, p: "absent.pem", "CA_FILE_UNREADABLE"),
    ("a directory", lambda d, p: ".", "CA_FILE_UNREADABLE"),
    ("empty path", lambda d, p: "", "CA_FILE_UNREADABLE"),
    ("not PEM", lambda d, p: _write(d, "ca.txt", "not a certificate\n"), "CA_FILE_INVALID"),
    (
        "damaged PEM",
        lambda d, p: _write(
            d, "bad.pem", "-----BEGIN CERTIFICATE-----\nAAAA\n-----END CERTIFICATE-----\n"
        ),
        "CA_FILE_INVALID",
    ),
    (
        "with a private key",
        lambda d, p: _write(
            d, "both.pem", p.ca.cert_pem.bytes().decode() + p.ca.private_key_pem.bytes().decode()
        ),
        "CA_FILE_INVALID",
    ),
    (
        "over 4 MiB",
        lambda d, p: _write(d, "huge.pem", p.ca.cert_pem.bytes().decode() + " " * (4 << 20)),
        "CA_FILE_INVALID",
    ),
    ("not a string", lambda d, p: 7, "WRONG_TYPE"),
]


@pytest.mark.parametrize(
    ("make", "code"),
    [case[1:] for case in CA_FILE_REFUSALS],
    ids=[case[0] for case in CA_FILE_REFUSALS],
)
def test_ca_file_refusals(
    tmp_path: Path, pki: Pki, make: Callable[[Path, Pki], Any], code: str
) -> None:
    ca_file = make(tmp_path, pki)
    with pytest.raises(ConfigError) as caught:
        bind(tmp_path, "https://executor.example", caFile=ca_file)
    [problem] = caught.value.diagnostics
    assert (problem.code, problem.pointer) == (code, "/tools/inspect-context/caFile")
    assert problem.file == str(tmp_path / "bindings.json")
    if isinstance(ca_file, str) and ca_file:
        assert f"`{ca_file}`" in problem.message  # the path, never the content
    for content in ("AAAA", "MII", "not a certificate"):
        assert content not in problem.message


def test_ca_file_for_http_is_refused(tmp_path: Path, pki: Pki) -> None:
    pki.write_ca(tmp_path / "ca.pem")
    with pytest.raises(ConfigError) as caught:
        bind(tmp_path, "http://127.0.0.1:9", caFile="ca.pem")
    assert [(p.code, p.pointer) for p in caught.value.diagnostics] == [
        ("CA_FILE_HTTP_REFUSED", "/tools/inspect-context/caFile")
    ]


# --- verified certificates ----------------------------------------------------------------------


@pytest.mark.parametrize("loop", LOOPS)
def test_describe_and_execute_over_tls_with_a_private_ca(
    tmp_path: Path, pki: Pki, loop: str
) -> None:
    pki.write_ca(tmp_path / "ca.pem")

    async def scenario() -> tuple[dict[str, Any], Outcome, dict[str, int]]:
        app = reference_app()
        async with serving_tls(app, server_context(pki.loopback)) as base:
            assert base.startswith("https://")
            seen, outcome = await describe_then_execute(bind(tmp_path, base, caFile="ca.pem"))
            return seen, outcome, calls(app)

    seen, outcome, count = run_on(loop, scenario())
    assert seen == {
        "state": "READY",
        "version": TOOL.version,
        "contractDigest": TOOL.contract_digest,
    }
    assert outcome.status == "SUCCEEDED" and outcome.output["ref"] == READ_ARGS["ref"]
    assert count == {"describe": 1, "execute": 1}


UNTRUSTED = {
    "system store": ("loopback", None),
    "another CA's file": ("loopback", "stranger"),
    "another CA's certificate": ("stranger_loopback", "ca"),
}


@pytest.mark.parametrize("loop", LOOPS)
@pytest.mark.parametrize("case", list(UNTRUSTED))
def test_an_untrusted_certificate_is_unavailable_and_never_called(
    tmp_path: Path, pki: Pki, case: str, loop: str
) -> None:
    cert, trusted = UNTRUSTED[case]
    fields = {}
    if trusted is not None:
        fields["caFile"] = pki.write_ca(tmp_path / "ca.pem", getattr(pki, trusted)).name

    async def scenario() -> tuple[dict[str, Any], Outcome, dict[str, int]]:
        app = reference_app()
        async with serving_tls(app, server_context(getattr(pki, cert))) as base:
            seen, outcome = await describe_then_execute(bind(tmp_path, base, **fields))
            return seen, outcome, calls(app)

    seen, outcome, count = run_on(loop, scenario())
    assert seen == {"state": "UNAVAILABLE", "detail": "TLS_UNTRUSTED"}
    assert outcome == Outcome("FAILED", reason="TLS_UNTRUSTED")  # unsent: nothing was written
    assert count == {"describe": 0, "execute": 0}


@pytest.mark.parametrize("loop", LOOPS)
@pytest.mark.parametrize("host", ["127.0.0.1", "localhost"])
def test_a_certificate_for_another_name_is_refused(
    tmp_path: Path, pki: Pki, host: str, loop: str
) -> None:
    pki.write_ca(tmp_path / "ca.pem")

    async def scenario() -> tuple[dict[str, Any], Outcome, dict[str, int]]:
        app = reference_app()
        async with serving_tls(app, server_context(pki.other_name)) as base:
            named = base.replace("127.0.0.1", host)
            seen, outcome = await describe_then_execute(bind(tmp_path, named, caFile="ca.pem"))
            return seen, outcome, calls(app)

    seen, outcome, count = run_on(loop, scenario())
    assert seen == {"state": "UNAVAILABLE", "detail": "TLS_NAME_MISMATCH"}
    assert outcome == Outcome("FAILED", reason="TLS_NAME_MISMATCH")
    assert count == {"describe": 0, "execute": 0}


# --- a kept-alive connection closed by the executor at reuse ----------------------------------


def _held_open(client: ExecutorClient) -> None:
    """The race is set: the client still holds the idle connection as open (its event loop
    has not run since the executor closed it)."""
    idle = [conn for pool in client._transport._idle.values() for conn in pool]
    assert len(idle) == 1 and not idle[0].closed


@pytest.mark.parametrize("loop", LOOPS)
@pytest.mark.parametrize("scheme", ["http", "https"])
@pytest.mark.parametrize("executor", ["closes idle connections", "stops"])
def test_a_connection_closed_at_reuse_sends_the_request_once_or_fails_unsent(
    tmp_path: Path, pki: Pki, scheme: str, executor: str, loop: str
) -> None:
    """The executor closes the kept-alive connection (its keep-alive timeout, or shutting
    down) while the client's event loop is blocked, and the client then reuses it. Before,
    the request was written to the closed connection: ``UNKNOWN`` ``CONNECTION_LOST``, though
    the executor never read it."""
    pki.write_ca(tmp_path / "ca.pem")
    tls = server_context(pki.loopback) if scheme == "https" else None
    fields = {"caFile": "ca.pem"} if tls is not None else {}
    app = reference_app()
    with executor_in_thread(app, tls, keepalive_timeout=0.15) as threaded:
        binding = bind(tmp_path, threaded.base, **fields)

        def executor_closes(client: ExecutorClient) -> None:
            # blocks this event loop while the executor closes the idle connection
            if executor == "stops":
                threaded.stop()
            else:
                threaded.connections_closed()  # its keep-alive timeout passed
            time.sleep(0.05)  # its FIN (and TLS close_notify) reaches this host's socket
            _held_open(client)

        seen, outcome = run_on(loop, describe_then_execute(binding, executor_closes))
    assert seen["state"] == "READY"
    if executor == "stops":
        assert outcome == Outcome("FAILED", reason="CONNECTION_REFUSED")  # unsent
        assert calls(app) == {"describe": 1, "execute": 0}
    else:
        assert outcome.status == "SUCCEEDED"  # on a new connection, sent once
        assert calls(app) == {"describe": 1, "execute": 1}


async def _read_request(reader: asyncio.StreamReader) -> bytes:
    head = await reader.readuntil(b"\r\n\r\n")
    length = 0
    for line in head.split(b"\r\n"):
        if line.lower().startswith(b"content-length:"):
            length = int(line.split(b":", 1)[1])
    await reader.readexactly(length)
    return head.split(b"\r\n", 1)[0]


@pytest.mark.parametrize("scheme", ["http", "https"])
def test_a_close_after_the_request_was_written_is_unknown_and_not_sent_again(
    tmp_path: Path, pki: Pki, scheme: str
) -> None:
    """The executor reads the request on the reused connection, then closes without an
    answer: the action may have happened (``UNKNOWN``), and the request is not resent."""
    pki.write_ca(tmp_path / "ca.pem")
    seen: list[bytes] = []
    descriptor = {"id": TOOL.id, "version": TOOL.version, "contractDigest": TOOL.contract_digest}
    answer = json.dumps({"contract": CONTRACT, "tool": descriptor}).encode()

    async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        seen.append(await _read_request(reader))
        writer.write(b"HTTP/1.1 200 OK\r\nContent-Length: %d\r\n\r\n%s" % (len(answer), answer))
        await writer.drain()
        seen.append(await _read_request(reader))
        writer.close()

    async def scenario() -> tuple[dict[str, Any], Outcome]:
        tls = server_context(pki.loopback) if scheme == "https" else None
        server = await asyncio.start_server(handle, "127.0.0.1", 0, ssl=tls)
        base = f"{scheme}://127.0.0.1:{server.sockets[0].getsockname()[1]}"
        fields = {"caFile": "ca.pem"} if tls is not None else {}
        try:
            return await describe_then_execute(bind(tmp_path, base, **fields))
        finally:
            server.close()

    described, outcome = asyncio.run(scenario())
    assert described["state"] == "READY"
    assert outcome == Outcome("UNKNOWN", reason="CONNECTION_LOST")
    assert seen == [
        b"GET /inspect-context/describe HTTP/1.1",
        b"POST /inspect-context/execute HTTP/1.1",
    ]


# --- through the runtime -------------------------------------------------------------------------


@asynccontextmanager
async def runtime(
    root: Path, base: str, app: web.Application, ca_file: str | None
) -> AsyncIterator[Stack]:
    """The runtime (``prepare`` + ``create_app``) with every reference tool bound to ``base``."""
    extra = {"caFile": ca_file} if ca_file is not None else {}
    document = bindings_document(base, {tool.id: extra for tool in reference_project().tools})
    async with runtime_stack(write_config(root, base, bindings=document), base, app) as stack:
        yield stack


def test_the_runtime_executes_over_tls_and_refuses_an_untrusted_executor(
    tmp_path: Path, pki: Pki
) -> None:
    (tmp_path / "trusted").mkdir()
    pki.write_ca(tmp_path / "trusted" / "ca.pem")

    async def scenario() -> None:
        app = reference_app()
        async with serving_tls(app, server_context(pki.loopback)) as base:
            async with runtime(tmp_path / "trusted", base, app, "ca.pem") as s:
                ready = await s.call("GET", "/v1/ready", headers={})
                assert ready.status == 200 and set(ready.body["tools"].values()) == {"READY"}
                context = await s.resolve(**LEARNER)
                assert "inspect_context" in [t["name"] for t in context["tools"]]
                receipt = await s.execute(context["contextRef"], TOOL.id, "c1", READ_ARGS)
                assert receipt["status"] == "SUCCEEDED", receipt
                assert receipt["output"]["ref"] == READ_ARGS["ref"]
            assert calls(app)["execute"] == 1
            before = calls(app)
            async with runtime(tmp_path / "system", base, app, None) as s:
                ready = await s.call("GET", "/v1/ready", headers={})
                assert ready.status == 503
                assert set(ready.body["tools"].values()) == {"UNAVAILABLE"}
                reply = await s.call("POST", "/v1/context/resolve", LEARNER)
                assert reply.status == 409, reply  # the learner's required tool is unavailable
                assert reply.body["error"]["code"] == "RESOLUTION_BLOCKED"
                causes = [(c["id"], c["reason"]) for c in reply.body["causes"]]
                assert causes == [(TOOL.id, "TOOL_UNAVAILABLE")]
            assert calls(app) == before  # not one request reached the executor

    asyncio.run(scenario())


def test_the_runtime_executes_after_the_executor_closed_its_idle_connections(
    tmp_path: Path, pki: Pki
) -> None:
    """End to end, on uvloop: resolve, the executor's keep-alive timeout closes the idle
    connections, execute once. (The runtime's own event loop turns between the two requests
    usually see the close before the probe does; the exact race, a close the event loop has
    not seen, is reproduced on the executor client above.)"""
    pki.write_ca(tmp_path / "ca.pem")
    app = reference_app()
    with executor_in_thread(app, server_context(pki.loopback), keepalive_timeout=0.15) as ex:

        async def scenario() -> dict[str, Any]:
            async with runtime(tmp_path, ex.base, app, "ca.pem") as s:
                context = await s.resolve(**LEARNER)
                ex.connections_closed()  # blocks this loop; the executor's keep-alive ends
                return await s.execute(context["contextRef"], TOOL.id, "c1", READ_ARGS)

        receipt = run_on("uvloop", scenario())
    assert receipt["status"] == "SUCCEEDED", receipt
    assert calls(app)["execute"] == 1
