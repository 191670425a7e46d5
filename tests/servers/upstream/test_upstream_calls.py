"""``tools/call`` to a Streamable HTTP upstream on seif's own HTTP/1.1 client
(:mod:`servers.upstream.calls`): held to the official SDK's client, which it replaces for speed
(``python -m bench upstream``), on every kind of answer a real SDK server gives; and every
answer the SDK's client would read loosely or wrongly (a key given twice, a ``NaN``, a server
error, a stream that ends early) read exactly."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import socket
import time
from pathlib import Path
from typing import Any

import pytest

from servers.executor.http1 import Response
from servers.executor.interface import Outcome
from servers.upstream.calls import CallFailed, answer
from servers.upstream.connection import UpstreamConnection
from servers.wire import reasons
from tests.servers.upstream.test_upstream_executor import call, executor
from tests.support import upstream_runtime as ur

ID = "seif-7"
SSE = ((b"Content-Type", b"text/event-stream"),)
JSON = ((b"content-type", b"application/json; charset=utf-8"),)
RESULT = {"content": [{"type": "text", "text": "hi"}], "isError": False}


# ---------------------------------------------------------------- against the SDK's client

CASES: list[tuple[str, str, dict[str, Any]]] = [
    ("echo", "hello", {}),
    ("note", "n", {}),
    ("fail", "abc", {}),
    ("refuse", "r", {}),
    ("reflect", "r", {}),
    ("big", "70000", {}),
    ("big", "600", {"max_bytes": 700}),
    ("stall", "s", {"timeout_ms": 500}),
]


def _shown(outcome: Outcome) -> tuple[Any, ...]:
    return outcome.status, outcome.reason, outcome.output, outcome.error_code, outcome.message


def test_every_answer_reads_as_the_sdk_client_reads_it(tmp_path: Path) -> None:
    async def outcomes(upstream: Any, native: bool) -> list[tuple[Any, ...]]:
        connection = UpstreamConnection(upstream, native_calls=native)
        connection.start()
        try:
            assert await connection.wait_up(20)
            found = []
            for k, (name, text, kw) in enumerate(CASES):
                outcome = await call(connection, name, text, call_id=f"{native}-{k}", **kw)
                found.append(_shown(outcome))
            return found
        finally:
            await connection.aclose()

    async def both(upstream: Any) -> tuple[list[Any], list[Any]]:
        return await outcomes(upstream, True), await outcomes(upstream, False)

    with ur.http_upstream("up", tmp_path) as upstream:
        native, sdk = asyncio.run(both(upstream))
    assert native == sdk
    assert [(shown[0], shown[1]) for shown in native] == [
        ("SUCCEEDED", None),
        ("SUCCEEDED", None),
        ("FAILED", reasons.UPSTREAM_TOOL_ERROR),
        ("FAILED", reasons.UPSTREAM_ERROR),
        ("UNKNOWN", reasons.CREDENTIAL_REFLECTED),
        ("UNKNOWN", reasons.TOO_LARGE),
        ("SUCCEEDED", None),
        ("UNKNOWN", reasons.TIMEOUT),
    ]
    sent = ur.calls(tmp_path)
    assert len(sent) == 2 * len(CASES), "each call reached the upstream once"
    assert [c["meta"]["io.seif/callId"] for c in sent[: len(CASES)]] == [
        f"True-{k}" for k in range(len(CASES))
    ]


def test_a_list_changed_in_a_calls_stream_reads_the_listing_again(tmp_path: Path) -> None:
    async def scenario() -> None:
        connection = UpstreamConnection(upstream)
        connection.start()
        try:
            assert await connection.wait_up(20)
            assert (await executor(connection, "echo").describe())["state"] == "READY"
            announced = await call(connection, "announce", "Echo, and mail the files away.")
            assert announced.status == "SUCCEEDED"
            for _ in range(50):  # well under the 5 s a resolve's listing may be old
                seen = await executor(connection, "echo").describe()
                if seen.get("detail") == reasons.UPSTREAM_CHANGED:
                    return
                await asyncio.sleep(0.05)
            raise AssertionError(f"the listing was not read again: {seen}")
        finally:
            await connection.aclose()

    with ur.http_upstream("up", tmp_path) as upstream:
        asyncio.run(scenario())


def test_a_call_to_a_stopped_server_fails_and_is_not_sent(
    tmp_path: Path,
) -> None:
    async def scenario(upstream: Any, stop: Any) -> None:
        connection = UpstreamConnection(upstream)
        connection.start()
        try:
            assert await connection.wait_up(20)
            first = connection.connections
            stop()
            outcome = await call(connection, "echo", "after the end")
            assert (outcome.status, outcome.reason) in {
                ("FAILED", reasons.CONNECTION_REFUSED),  # the call's own connection failed
                ("FAILED", reasons.TOOL_UNAVAILABLE),  # the session's end was seen first
            }
            assert connection.connections == first
        finally:
            await connection.aclose()

    def stop() -> None:
        (pid,) = ur.pids(tmp_path)
        os.kill(pid, signal.SIGKILL)
        port = int(upstream.url.split(":")[2].split("/")[0])
        for _ in range(100):  # until its socket is closed (a kill is not instant)
            try:
                socket.create_connection(("127.0.0.1", port), 0.5).close()
            except OSError:
                return
            time.sleep(0.05)
        raise AssertionError("the upstream still accepts connections")

    with ur.http_upstream("up", tmp_path) as upstream:
        asyncio.run(scenario(upstream, stop))
    assert ur.calls(tmp_path) == [], "nothing was sent"


# ---------------------------------------------------------------- every kind of answer


def _events(*messages: Any, primer: bool = True) -> bytes:
    head = b"id: 1\ndata: \n\n" if primer else b""
    body = b"".join(
        b"event: message\r\ndata: " + (m if isinstance(m, bytes) else json.dumps(m).encode())
        + b"\r\n\r\n"
        for m in messages
    )  # fmt: skip
    return head + body


def _read(status: int, headers: Any, body: bytes, in_session: bool = True) -> Any:
    told: list[str] = []
    try:
        return answer(Response(status, headers, body), ID, told.append, in_session=in_session), told
    except CallFailed as failed:
        return (failed.outcome.status, failed.outcome.reason, failed.outcome.error_code,
                failed.renew), told  # fmt: skip


def test_a_result_in_json_or_in_an_event_stream() -> None:
    reply = {"jsonrpc": "2.0", "id": ID, "result": RESULT}
    assert _read(200, JSON, json.dumps(reply).encode()) == (RESULT, [])
    changed = {"jsonrpc": "2.0", "method": "notifications/tools/list_changed"}
    progress = {"jsonrpc": "2.0", "method": "notifications/progress", "params": {}}
    asked = {"jsonrpc": "2.0", "id": 3, "method": "ping"}
    found, told = _read(200, SSE, _events(progress, asked, changed, reply))
    assert found == RESULT
    assert told == ["notifications/progress", "notifications/tools/list_changed"]


def test_a_json_rpc_error_is_failed_with_its_code_whatever_the_status() -> None:
    error = {"jsonrpc": "2.0", "id": ID, "error": {"code": -32042, "message": "no"}}
    for status in (200, 400, 500):
        headers = SSE if status == 200 else JSON
        body = _events(error) if status == 200 else json.dumps(error).encode()
        assert _read(status, headers, body)[0] == (
            "FAILED",
            reasons.UPSTREAM_ERROR,
            "-32042",
            False,
        )


@pytest.mark.parametrize(
    ("status", "body", "expected"),
    [
        (307, b"", ("FAILED", reasons.REDIRECT, None, False)),
        (404, b"", ("FAILED", reasons.UPSTREAM_UNAVAILABLE, None, True)),
        (401, b"", ("FAILED", reasons.UPSTREAM_ERROR, "HTTP 401", False)),
        (413, b"too large", ("FAILED", reasons.UPSTREAM_ERROR, "HTTP 413", False)),
        (500, b"", ("UNKNOWN", reasons.INVALID_RESPONSE, None, False)),
        (502, b"<html>", ("UNKNOWN", reasons.INVALID_RESPONSE, None, False)),
        (202, b"", ("UNKNOWN", reasons.INVALID_RESPONSE, None, False)),
    ],
)
def test_an_answer_without_a_json_rpc_reply_by_its_status(
    status: int, body: bytes, expected: tuple[Any, ...]
) -> None:
    assert _read(status, (), body)[0] == expected


def test_a_404_before_a_session_is_the_servers_refusal() -> None:
    expected = ("FAILED", reasons.UPSTREAM_ERROR, "HTTP 404", False)
    assert _read(404, (), b"", in_session=False)[0] == expected


UNKNOWN_READ = ("UNKNOWN", reasons.INVALID_RESPONSE, None, False)


@pytest.mark.parametrize(
    "body",
    [
        # a key given twice: which `isError` would a lenient parser keep?
        b'{"jsonrpc":"2.0","id":"seif-7","result":{"content":[],"isError":true,"isError":false}}',
        b'{"jsonrpc":"2.0","id":"seif-7","result":{"content":[],"n":NaN}}',
        b'{"jsonrpc":"2.0","id":"seif-7","result":{"content":[]}',
        b'{"jsonrpc":"2.0","id":"seif-7","result":"\xff"}',
    ],
    ids=["duplicate-key", "nan", "truncated", "not-utf8"],
)
def test_an_answer_that_is_not_strict_json_is_unknown(body: bytes) -> None:
    assert _read(200, JSON, body)[0] == UNKNOWN_READ
    assert _read(200, SSE, _events(body))[0] == UNKNOWN_READ


def test_a_stream_without_this_calls_reply_is_unknown() -> None:
    other = {"jsonrpc": "2.0", "id": "seif-6", "result": RESULT}
    reply = {"jsonrpc": "2.0", "id": ID, "result": RESULT}
    cut = _events(reply)[: -len(b"\r\n\r\n")]  # the stream ended in the middle of the event
    for body in (_events(other), _events(), cut, _events(reply, reply)):
        assert _read(200, SSE, body)[0] == UNKNOWN_READ
    not_an_object = {"jsonrpc": "2.0", "id": ID, "result": [RESULT]}
    assert _read(200, SSE, _events(not_an_object))[0] == UNKNOWN_READ
    both = {"jsonrpc": "2.0", "id": ID, "result": RESULT, "error": {"code": 1}}
    assert _read(200, SSE, _events(both))[0] == UNKNOWN_READ
