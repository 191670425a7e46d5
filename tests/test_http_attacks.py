"""The runtime's HTTP layer under attack, each attack against a real `seif serve` process (or
the real aiohttp app on the production listener) on loopback, over raw sockets where a client
library would refuse to misbehave:

- slow clients: a connection that never completes its headers is closed after the header
  timeout; a flood of such connections past the connection limit neither makes `/v1/health`
  unreachable nor grows the process's open files; connections past the limit while every
  one is busy are answered 503 and closed;
- bodies: an integer of more than 4,300 digits, a body that is not the gzip its
  `Content-Encoding` claims, an unsupported encoding, a client gone mid-body, a body that
  never arrives: 400 (or 408), never a 500, nothing logged as an internal error, no state left;
- headers: a malformed header carrying a bearer token is refused without echoing it (in the
  answer or in the log); a 405 carries `Allow`; `/v1/ready`'s 503 matches its declared schema.
"""

from __future__ import annotations

import asyncio
import gzip
import json
import os
import socket
import subprocess
import sys
import time
import zlib
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import jsonschema
import pytest
from runtime_harness import (
    APP_TOKEN,
    APPROVAL_TOKEN,
    READ_ARGS,
    guarded_stack,
    listening,
    reference_project,
    run_async,
    running_stack,
    start_executor_process,
    start_serve,
    stop,
    write_config,
)

from seif.cli import build_parser
from seif.serve import run_loop
from servers.http import openapi
from servers.http.serving import Limits

LIMIT = 16
HEADER_TIMEOUT = 2.0
BEARER = f"Bearer {APP_TOKEN}"
LEAKS = (APP_TOKEN, APPROVAL_TOKEN)


@dataclass
class Served:
    host: str
    port: int
    pid: int
    executor: str
    stderr: Path

    def log(self) -> str:
        return self.stderr.read_text(errors="replace")


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Served]:
    root = tmp_path_factory.mktemp("attacks")
    executor, executor_url = start_executor_process(root)
    config = write_config(root, executor_url)
    limits = ("--max-connections", str(LIMIT), "--header-timeout", str(HEADER_TIMEOUT))
    proc = start_serve(config, *limits)
    try:
        url = listening(proc)
        host, port = url.removeprefix("http://").rsplit(":", 1)
        yield Served(host, int(port), proc.pid, executor_url, config.data.parent / "serve.err")
    finally:
        stop(proc)
        stop(executor)


# --- raw HTTP ------------------------------------------------------------------------------


def connect(served: Served) -> socket.socket:
    return socket.create_connection((served.host, served.port), timeout=5)


def read_all(sock: socket.socket, timeout: float = 5.0) -> bytes:
    """Everything until the peer closes (or ``timeout``)."""
    sock.settimeout(timeout)
    out = b""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            chunk = sock.recv(65536)
        except (TimeoutError, ConnectionResetError):
            break
        if not chunk:
            break
        out += chunk
    return out


@dataclass
class Answer:
    status: int
    headers: dict[str, str]
    body: bytes
    raw: bytes

    def json(self) -> Any:
        return json.loads(self.body)


def parse(raw: bytes) -> Answer:
    head, _, body = raw.partition(b"\r\n\r\n")
    lines = head.decode("latin-1").split("\r\n")
    headers = {}
    for line in lines[1:]:
        name, _, value = line.partition(":")
        headers[name.strip().lower()] = value.strip()
    length = int(headers.get("content-length", len(body)))
    return Answer(int(lines[0].split()[1]), headers, body[:length], raw)


def request(
    served: Served,
    method: str,
    path: str,
    body: bytes = b"",
    headers: dict[str, str] | None = None,
) -> Answer:
    """One request on its own connection (``Connection: close``)."""
    lines = [f"{method} {path} HTTP/1.1", f"Host: {served.host}", "Connection: close"]
    lines += [f"{k}: {v}" for k, v in (headers or {}).items()]
    if body or method == "POST":
        lines.append(f"Content-Length: {len(body)}")
    with connect(served) as sock:
        sock.sendall("\r\n".join(lines).encode("latin-1") + b"\r\n\r\n" + body)
        return parse(read_all(sock))


def send_raw(served: Served, data: bytes) -> Answer:
    with connect(served) as sock:
        sock.sendall(data)
        return parse(read_all(sock))


def post_json(served: Served, path: str, body: Any, **headers: str) -> Answer:
    return request(
        served, "POST", path, json.dumps(body).encode(), {"Authorization": BEARER, **headers}
    )


def assert_error(answer: Answer, status: int, code: str | None = None) -> dict[str, Any]:
    assert answer.status == status, answer.raw[:400]
    assert answer.headers["content-type"].startswith("application/json"), answer.headers
    error: dict[str, Any] = answer.json()["error"]
    assert isinstance(error["message"], str) and error["message"]
    if code is not None:
        assert error["code"] == code, error
    return error


def assert_quiet(served: Served) -> None:
    """Nothing a client sent shows in the runtime's log as a failure or a secret."""
    log = served.log()
    for bad in ("Traceback", "internal error", "INTERNAL", *LEAKS):
        assert bad not in log, (bad, log[-2000:])


def open_files(pid: int) -> int:
    return len(os.listdir(f"/proc/{pid}/fd"))


needs_proc = pytest.mark.skipif(not Path("/proc/self/fd").is_dir(), reason="needs /proc")


# --- 1. slow clients -----------------------------------------------------------------------

SLOW = {
    "silent": [],
    "half-sent": [b"GET /v1/health HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer "],
    "trickle": [bytes([c]) for c in b"GET /v1/health HTTP/1.1\r\nHost: x\r\nX-Slow: abcdefghij"],
}


@pytest.mark.parametrize("kind", sorted(SLOW))
def test_a_connection_without_complete_headers_is_closed_after_the_timeout(
    served: Served, kind: str
) -> None:
    with connect(served) as sock:
        started = time.monotonic()
        for piece in SLOW[kind]:  # the trickle: a byte every 0.1 s, for longer than the timeout
            try:
                sock.sendall(piece)
            except (BrokenPipeError, ConnectionResetError):
                break  # closed by the runtime
            if kind == "trickle":
                time.sleep(0.1)
        got = read_all(sock, timeout=HEADER_TIMEOUT + 5)
        elapsed = time.monotonic() - started
    assert got == b""  # closed, nothing answered to a request that never was one
    assert HEADER_TIMEOUT - 0.2 <= elapsed <= HEADER_TIMEOUT + 2, elapsed


@needs_proc
def test_a_slowloris_flood_leaves_health_reachable_and_files_bounded(served: Served) -> None:
    # an established client: one request served, its connection kept alive
    kept = connect(served)
    health = b"GET /v1/health HTTP/1.1\r\nHost: x\r\n\r\n"
    kept.sendall(health)
    assert b'{"status":"ok"}' in kept.recv(65536)
    baseline = open_files(served.pid)

    flood = []
    for i in range(4 * LIMIT):
        sock = connect(served)
        if i % 2:
            sock.sendall(b"GET /v1/health HTTP/1.1\r\nHost: x\r\nX-Slow: ")
        flood.append(sock)
        time.sleep(0.005)
    time.sleep(0.3)
    # past the limit, the oldest connections that never sent a request are dropped
    assert open_files(served.pid) <= baseline + LIMIT + 2
    started = time.monotonic()
    assert request(served, "GET", "/v1/health").status == 200  # a new client is served
    assert time.monotonic() - started < 1.5
    kept.sendall(health)  # the established client was not the one dropped
    assert b'{"status":"ok"}' in kept.recv(65536)

    time.sleep(HEADER_TIMEOUT + 0.5)  # and every slow connection is closed by the deadline
    refused = 0
    for sock in flood:  # closed without an answer, or (in an accept burst) answered 503
        got = read_all(sock, timeout=1.0)
        if got:
            assert_error(parse(got), 503, "TOO_MANY_CONNECTIONS")
            refused += 1
        sock.close()
    assert refused < len(flood) // 2
    kept.close()
    assert open_files(served.pid) <= baseline + 1
    assert_quiet(served)


def test_connections_past_the_limit_while_all_are_busy_get_503(tmp_path: Path) -> None:
    limits = Limits(header_timeout_s=2.0, max_connections=4, body_timeout_s=1.0)
    head = (
        b"POST /v1/context/resolve HTTP/1.1\r\nHost: x\r\nAuthorization: " + BEARER.encode()
    ) + b"\r\nContent-Length: 100\r\n\r\n{"

    async def scenario() -> None:
        async with guarded_stack(tmp_path, limits) as (_stack, guarded):
            host, port = guarded.host, guarded.port
            target = Served(host, port, os.getpid(), "", tmp_path / "none")
            busy = [await _open_busy(target, head) for _ in range(4)]
            assert guarded.site.open_connections == 4
            refused = await _in_thread(lambda: send_raw(target, b""))
            assert_error(refused, 503, "TOO_MANY_CONNECTIONS")
            assert refused.headers.get("retry-after") == "1"
            for sock in busy:  # each body never completes: 408 at its deadline, then closed
                answer = await _in_thread(lambda s=sock: parse(read_all(s)))
                assert_error(answer, 408, "BODY_TIMEOUT")
                sock.close()
            health = await _in_thread(lambda: request(target, "GET", "/v1/health"))
            assert health.status == 200

    run_loop(scenario())  # the event loop `seif serve` runs (uvloop where installed)


async def _open_busy(served: Served, head: bytes) -> socket.socket:
    sock = connect(served)
    sock.sendall(head)
    await asyncio.sleep(0.05)  # its handler is now reading the body
    return sock


async def _in_thread(fn: Any) -> Any:
    return await asyncio.get_running_loop().run_in_executor(None, fn)


def test_the_limits_are_checked_on_the_command_line() -> None:
    parse_args = build_parser().parse_args
    base = ["serve", "--build", "b", "--bindings", "x", "--credentials", "c", "--data", "d"]
    args = parse_args(base)
    assert (args.max_connections, args.header_timeout) == (1024, 10.0)
    for bad in (["--header-timeout", "11"], ["--header-timeout", "0"], ["--max-connections", "0"]):
        with pytest.raises(SystemExit) as exc:
            parse_args([*base, *bad])
        assert exc.value.code == 2


def test_the_connection_limit_fits_the_file_descriptor_limit() -> None:
    """Asked for more connections than the hard limit can hold, `seif serve` raises its soft
    limit to the hard one and lowers the connection limit to fit (a subprocess: the test
    process keeps its own limits)."""
    resource = pytest.importorskip("resource")
    hard = resource.getrlimit(resource.RLIMIT_NOFILE)[1]
    if hard == resource.RLIM_INFINITY:
        pytest.skip("no hard file-descriptor limit to fit")
    code = (
        "import resource; from seif.serve import _descriptors_for;"
        f"print(_descriptors_for(10), _descriptors_for({hard}),"
        " resource.getrlimit(resource.RLIMIT_NOFILE)[0])"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=60
    ).stdout.split()
    small, fitted, soft_after = (int(v) for v in out)
    assert small == 10
    assert fitted == (hard - 64) // 2 < hard
    assert soft_after == hard


# --- 2. bodies -----------------------------------------------------------------------------


def test_an_integer_past_the_digit_limit_is_400(served: Served) -> None:
    for body in (
        b'{"objective": ' + b"7" * 5000 + b"}",
        b'{"contextRef": "c", "tool": "t", "callId": "x", "arguments": {"n": -'
        + b"9" * 4301
        + b"}}",
    ):
        for path in ("/v1/context/resolve", "/v1/context/tools/execute"):
            answer = request(served, "POST", path, body, {"Authorization": BEARER})
            assert "digits" in assert_error(answer, 400, "BAD_REQUEST")["message"]
    assert_quiet(served)


RESOLVE = json.dumps({"objective": "learner", "consumer": "tutor-app"}).encode()
ENCODED = {
    "not-gzip": ("gzip", RESOLVE, 400),
    "truncated-gzip": ("gzip", gzip.compress(RESOLVE)[:-12], 400),
    "not-deflate": ("deflate", b"\x78\x9c" + RESOLVE, 400),
    "unsupported": ("br", RESOLVE, 400),
    "stacked": ("gzip, gzip", gzip.compress(gzip.compress(RESOLVE)), 400),
    "gzip": ("gzip", gzip.compress(RESOLVE), 200),
    "deflate": ("deflate", zlib.compress(RESOLVE), 200),
}


@pytest.mark.parametrize("case", sorted(ENCODED))
def test_a_body_that_is_not_its_content_encoding_is_400(served: Served, case: str) -> None:
    encoding, body, status = ENCODED[case]
    answer = request(
        served,
        "POST",
        "/v1/context/resolve",
        body,
        {"Authorization": BEARER, "Content-Encoding": encoding},
    )
    if status == 200:
        assert answer.status == 200 and answer.json()["contextRef"].startswith("ctx_")
    else:
        message = assert_error(answer, 400, "BAD_REQUEST")["message"]
        assert encoding not in message or encoding in ("gzip", "deflate")
    assert_quiet(served)


def test_a_client_gone_mid_body_leaves_no_state(served: Served) -> None:
    ctx = post_json(served, "/v1/context/resolve", json.loads(RESOLVE)).json()["contextRef"]
    body = json.dumps(
        {"contextRef": ctx, "tool": "inspect-context", "callId": "gone", "arguments": READ_ARGS}
    ).encode()
    head = (
        b"POST /v1/context/tools/execute HTTP/1.1\r\nHost: x\r\nAuthorization: "
        + BEARER.encode()
        + b"\r\nContent-Length: %d\r\n\r\n" % len(body)
    )
    for cut in (0, len(body) // 2, len(body) - 1):
        with connect(served) as sock:
            sock.sendall(head + body[:cut])
            time.sleep(0.1)
        # closed: no answer can be read, and nothing may have started
    time.sleep(0.3)
    receipt = post_json(served, "/v1/context/tools/execute", json.loads(body)).json()
    assert (receipt["status"], receipt["duplicate"]) == ("SUCCEEDED", False)
    events = request(served, "GET", f"/v1/traces/{ctx}", headers={"Authorization": BEARER})
    intents = [e for e in events.json()["events"] if e["event"] == "INTENT"]
    assert [e["callId"] for e in intents] == ["gone"]
    assert_quiet(served)


def test_a_body_that_never_arrives_is_408_and_the_connection_closed(tmp_path: Path) -> None:
    limits = Limits(header_timeout_s=2.0, max_connections=8, body_timeout_s=0.5)

    async def scenario() -> None:
        async with guarded_stack(tmp_path, limits) as (_stack, guarded):
            target = Served(guarded.host, guarded.port, os.getpid(), "", tmp_path / "none")
            head = (
                b"POST /v1/context/resolve HTTP/1.1\r\nHost: x\r\nAuthorization: "
                + BEARER.encode()
                + b'\r\nTransfer-Encoding: chunked\r\n\r\n3\r\n{"o\r\n'
            )
            started = time.monotonic()
            sock = await _open_busy(target, head)
            answer = await _in_thread(lambda: parse(read_all(sock)))
            sock.close()
            assert_error(answer, 408, "BODY_TIMEOUT")
            assert time.monotonic() - started < 0.5 + 2.0 + 1.0  # deadline, then lingering

    run_loop(scenario())


# --- 3. headers ----------------------------------------------------------------------------

MALFORMED = {
    "control-char-in-value": b"Authorization: Bearer " + APP_TOKEN.encode() + b"\x01\r\n",
    "bad-header-name": b"Authorization" + APP_TOKEN.encode() + b"(): Bearer x\r\n",
    "too-long-value": b"Authorization: Bearer " + APP_TOKEN.encode() + b"a" * 9000 + b"\r\n",
    "space-before-colon": b"Authorization : Bearer " + APP_TOKEN.encode() + b"\r\n",
    "bare-lf-token": b"X-A: 1\nAuthorization: Bearer " + APP_TOKEN.encode() + b"\x7f\r\n",
    "approval-token": b"x-seif-tool-approval: " + APPROVAL_TOKEN.encode() + b"\x00\r\n",
}


@pytest.mark.parametrize("case", sorted(MALFORMED))
def test_a_malformed_header_is_refused_without_being_echoed(served: Served, case: str) -> None:
    raw = b"GET /v1/capabilities HTTP/1.1\r\nHost: x\r\n" + MALFORMED[case] + b"\r\n"
    answer = send_raw(served, raw)
    for secret in LEAKS:
        assert secret.encode() not in answer.raw, answer.raw
    assert_error(answer, 400, "BAD_REQUEST")
    assert_quiet(served)


def test_no_error_echoes_a_credential(served: Served) -> None:
    wrong = "Bearer not-a-token-5e9d1c"
    answer = request(served, "GET", "/v1/capabilities", headers={"Authorization": wrong})
    assert_error(answer, 401, "UNAUTHENTICATED")
    assert b"5e9d1c" not in answer.raw


ALLOWED = {
    ("DELETE", "/v1/health"): {"GET", "HEAD"},
    ("POST", "/v1/ready"): {"GET", "HEAD"},
    ("GET", "/v1/context/resolve"): {"POST"},
    ("PUT", "/v1/context/tools/execute"): {"POST"},
    ("PATCH", "/v1/traces/ctx_x"): {"GET", "HEAD"},
}


@pytest.mark.parametrize(("method", "path"), sorted(ALLOWED))
def test_a_405_carries_allow(served: Served, method: str, path: str) -> None:
    answer = request(served, method, path, headers={"Authorization": BEARER})
    assert_error(answer, 405, "METHOD_NOT_ALLOWED")
    allowed = {m.strip() for m in answer.headers["allow"].split(",")}
    assert allowed == ALLOWED[(method, path)]


def test_ready_503_matches_its_declared_schema(tmp_path: Path) -> None:
    async def scenario() -> None:
        async with running_stack(tmp_path) as s:
            s.set_knobs("inspect-context", changed_digest=True)
            ready = await s.call("GET", "/v1/ready", headers={})
            served = await s.call("GET", "/v1/openapi.json", headers={})
            assert ready.status == 503 and served.status == 200
            assert ready.body["tools"]["inspect-context"] == "INCOMPATIBLE"
            declared = served.body["paths"]["/v1/ready"]["get"]["responses"]["503"]
            schema = declared["content"]["application/json"]["schema"]
            jsonschema.validate(ready.body, {**schema, "components": served.body["components"]})
            objectives = reference_project().objective_by_id
            assert served.body == openapi.document(list(objectives))

    run_async(scenario())
