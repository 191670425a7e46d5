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
  answer or in the log); a 405 carries `Allow`; `/v1/ready`'s 503 matches its declared schema;
- connections held past their answer, with two connections at most, on uvloop and on asyncio:
  a flood of bodies that never come and clients that never read leave `/v1/health` reachable;
  a client that never reads is aborted after the write timeout, one evicted at once (open
  files counted); an error answer with its body unread ends its connection.
"""

from __future__ import annotations

import asyncio
import contextlib
import gzip
import json
import os
import socket
import subprocess
import sys
import threading
import time
import zlib
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import jsonschema
import pytest

from seif.cli import build_parser
from seif.serve.runtime import run_loop
from servers.http.serving import Limits
from servers.wire import openapi
from servers.wire.limits import MAX_BODY_BYTES
from tests.support.runtime_harness import (
    APP_TOKEN,
    APPROVAL_TOKEN,
    READ_ARGS,
    guarded_stack,
    listening,
    run_async,
    running_stack,
    start_executor_process,
    start_serve,
    start_serve_on,
    stop,
    write_config,
)

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
        "import resource; from seif.serve.runtime import _descriptors_for;"
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
            assert answer.headers.get("connection") == "close"
            assert time.monotonic() - started < 0.5 + 2.0 + 1.0  # deadline, then lingering

            # the body completed after its 408, and a request after it: never answered
            sock = await _open_busy(target, head)
            late = await _in_thread(lambda: read_answer(sock))
            assert_error(late, 408, "BODY_TIMEOUT")
            sock.sendall(
                b'c\r\nbjective":1}\r\n0\r\n\r\nGET /v1/health HTTP/1.1\r\nHost: x\r\n\r\n'
            )
            assert await _in_thread(lambda: read_all(sock, timeout=LINGER + 3)) == b""
            sock.close()

    run_loop(scenario())


# --- 3. headers ----------------------------------------------------------------------------

MALFORMED = {
    "control-char-in-value": b"Authorization: Bearer " + APP_TOKEN.encode() + b"\x01\r\n",
    "bad-header-name": b"Authorization" + APP_TOKEN.encode() + b"(): Bearer x\r\n",
    "too-long-value": b"Authorization: Bearer " + APP_TOKEN.encode() + b"a" * 66000 + b"\r\n",
    "space-before-colon": b"Authorization : Bearer " + APP_TOKEN.encode() + b"\r\n",
    "bare-lf-token": b"X-A: 1\nAuthorization: Bearer " + APP_TOKEN.encode() + b"\x7f\r\n",
    "approval-token": b"x-seif-tool-approval: " + APPROVAL_TOKEN.encode() + b"\x00\r\n",
    # 64 KiB fields are read (an oversized bearer token is answered 401): not many of them
    "too-many-headers": b"".join(b"X-Pad-%d: " % i + b"p" * 60000 + b"\r\n" for i in range(60))
    + b"Authorization: Bearer "
    + APP_TOKEN.encode()
    + b"\r\n",
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
    ("DELETE", "/v1/traces/head"): {"GET", "HEAD"},
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
            # served without a credential: the generic document, no objective of the build
            assert served.body == openapi.document()

    run_async(scenario())


# --- 4. connections held past their answer -------------------------------------------------
# A request in progress used to count as busy until its connection closed, and a busy
# connection was never evicted: a body that never came (aiohttp read it after the answer for
# its lingering time) or an answer the client never read (the handler waited in `drain()` for
# ever) held a slot each, and a few such connections made every new client a 503.

HELD_LIMIT = 2
WRITE_TIMEOUT = 4.0
LINGER = 2.0  # serving.LINGER_S, at most the header timeout
OPENAPI = b"GET /v1/openapi.json HTTP/1.1\r\nHost: x\r\n\r\n"  # 17 KB, no credential needed


@dataclass
class Held(Served):
    files: int = 0
    """The process's open files when it was idle."""


@pytest.fixture(scope="module", params=["uvloop", "asyncio"])
def held(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Held]:
    """`seif serve` with two connections at most, on each event loop it runs on."""
    event_loop: str = request.param
    if event_loop == "uvloop":
        pytest.importorskip("uvloop")
    root = tmp_path_factory.mktemp(f"held-{event_loop}")
    executor, executor_url = start_executor_process(root)
    config = write_config(root, executor_url)
    limits = ("--max-connections", str(HELD_LIMIT), "--header-timeout", str(HEADER_TIMEOUT))
    proc = start_serve_on(event_loop, config, *limits, "--write-timeout", str(WRITE_TIMEOUT))
    try:
        url = listening(proc)
        host, port = url.removeprefix("http://").rsplit(":", 1)
        maps = Path(f"/proc/{proc.pid}/maps")
        if maps.exists():  # the loop asked for is the loop that runs
            assert ("uvloop" in maps.read_text()) == (event_loop == "uvloop")
        stderr = config.data.parent / "serve.err"
        served = Held(host, int(port), proc.pid, executor_url, stderr)
        wait_ready(served)  # idle only once its executor is observed (a connection kept)
        served.files = open_files(proc.pid) if Path("/proc/self/fd").is_dir() else 0
        yield served
    finally:
        stop(proc)
        stop(executor)


def wait_ready(served: Served, bound: float = 10.0) -> None:
    """Until `GET /v1/ready` answers 200 (its executors observed), then a moment more."""
    started = time.monotonic()
    while request(served, "GET", "/v1/ready").status != 200:
        assert time.monotonic() - started < bound, "the runtime never became ready"
        time.sleep(0.05)
    time.sleep(0.2)


def health_within(served: Served, bound: float) -> float | None:
    """Seconds until a new client's `GET /v1/health` is answered 200 (retried while it is
    refused), or None past ``bound``."""
    started = time.monotonic()
    while time.monotonic() - started < bound:
        try:
            if request(served, "GET", "/v1/health").status == 200:
                return time.monotonic() - started
        except (OSError, IndexError, ValueError):  # refused or cut: not an answer
            pass
        time.sleep(0.05)
    return None


def files_within(served: Held, at_most: int, bound: float) -> float | None:
    """Seconds until the process holds at most ``at_most`` open files, or None past ``bound``."""
    started = time.monotonic()
    while time.monotonic() - started < bound:
        if open_files(served.pid) <= at_most:
            return time.monotonic() - started
        time.sleep(0.05)
    return None


def settled(served: Held) -> None:
    """Back to the open files of an idle process (the connections of earlier tests gone)."""
    assert files_within(served, served.files, WRITE_TIMEOUT + LINGER + 3) is not None


def never_reading(served: Served, answers: int = 300) -> socket.socket:
    """A client that pipelines ``answers`` requests for the OpenAPI document and reads none:
    its small receive window fills at once, and the runtime's writes stall."""
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
    sock.settimeout(5)
    sock.connect((served.host, served.port))
    sock.sendall(OPENAPI * answers)
    return sock


def unread_body(served: Served, path: str = "/v1/context/resolve") -> socket.socket:
    """Complete headers announcing a 100,000-byte body, no credential, and no body."""
    sock = connect(served)
    sock.sendall(f"POST {path} HTTP/1.1\r\nHost: x\r\nContent-Length: 100000\r\n\r\n".encode())
    return sock


@needs_proc
def test_bodies_that_never_arrive_do_not_fill_the_connection_limit(held: Held) -> None:
    """~50 new connections/s, each with headers and no body, answered 401 before the body: a
    new client is still served within a second, all along."""
    settled(held)
    stop_flood = threading.Event()
    flood: list[socket.socket] = []

    def attack() -> None:
        while not stop_flood.is_set():
            with contextlib.suppress(OSError):  # refused at the limit: try again
                flood.append(unread_body(held))
            time.sleep(0.02)

    attacker = threading.Thread(target=attack, daemon=True)
    attacker.start()
    try:
        time.sleep(0.5)
        waits = []
        for _ in range(8):
            waits.append(health_within(held, 1.0))
            time.sleep(0.25)
    finally:
        stop_flood.set()
        attacker.join(5)
        for sock in flood:
            sock.close()
    assert len(flood) > 40
    assert None not in waits, waits
    assert_quiet(held)


@needs_proc
def test_clients_that_never_read_do_not_fill_the_connection_limit(held: Held) -> None:
    """Every slot held by a client whose answers stalled: a new client evicts one (aborted,
    its file descriptor released at once, before any write deadline) and is served."""
    settled(held)
    readers = [never_reading(held) for _ in range(HELD_LIMIT)]
    try:
        time.sleep(0.5)  # both stalled: the handlers wait for their clients to read
        assert open_files(held.pid) >= held.files + HELD_LIMIT
        started = time.monotonic()
        waited = health_within(held, 1.0)
        assert waited is not None
        # one reader aborted: its descriptor is gone, not kept until its answer drains
        released = files_within(held, held.files + HELD_LIMIT - 1, 1.0)
        assert released is not None
        assert time.monotonic() - started < WRITE_TIMEOUT - 1.5  # eviction, not the deadline
    finally:
        for sock in readers:
            sock.close()
    assert_quiet(held)


@needs_proc
def test_a_client_that_never_reads_is_aborted_after_the_write_timeout(held: Held) -> None:
    settled(held)
    sock = never_reading(held)
    try:
        started = time.monotonic()
        time.sleep(0.3)
        assert open_files(held.pid) == held.files + 1
        released = files_within(held, held.files, WRITE_TIMEOUT + 3)
        assert released is not None  # aborted, not held for ever
        assert WRITE_TIMEOUT - 0.5 <= time.monotonic() - started <= WRITE_TIMEOUT + 3
        sock.settimeout(2)
        got = b""
        try:  # what had reached the client's buffers, then the end: no more answers
            while chunk := sock.recv(65536):
                got += chunk
        except (ConnectionResetError, TimeoutError):
            pass
        assert got.startswith(b"HTTP/1.1 200")
        assert got.count(b"HTTP/1.1 200") < 300
    finally:
        sock.close()
    assert_quiet(held)


UNREAD = {
    # (path, headers, the part of the body sent before the answer, the rest)
    "401": ("/v1/context/resolve", "", b'{"objective": ', b'"learner"}'),
    "401-approve": ("/v1/context/tools/approve", "", b"{", b"}"),
    "413": ("/v1/context/resolve", f"Authorization: {BEARER}\r\n", b"{", None),
}


@pytest.mark.parametrize("case", sorted(UNREAD))
def test_an_error_answer_with_an_unread_body_closes_the_connection(held: Held, case: str) -> None:
    """The answer says `Connection: close` and the connection ends: the rest of the body,
    and a request after it, are never taken as the connection's next request."""
    path, headers, first, rest = UNREAD[case]
    length = MAX_BODY_BYTES + 1 if rest is None else len(first) + len(rest)
    head = f"POST {path} HTTP/1.1\r\nHost: x\r\n{headers}Content-Length: {length}\r\n\r\n"
    with connect(held) as sock:
        sock.sendall(head.encode() + first)
        answer = read_answer(sock)
        assert answer.status == int(case[:3]), answer.raw[:300]
        assert answer.headers.get("connection") == "close", answer.headers
        started = time.monotonic()
        # the rest of the body, then a second request, as a client keeping it alive would
        with contextlib.suppress(BrokenPipeError, ConnectionResetError):  # closed already
            sock.sendall(
                (rest or b"x" * (length - len(first)))
                + b"GET /v1/health HTTP/1.1\r\nHost: x\r\n\r\n"
            )
        assert read_all(sock, timeout=LINGER + 3) == b""  # no second answer: closed
        assert time.monotonic() - started <= LINGER + 1
    assert_quiet(held)


def read_answer(sock: socket.socket, timeout: float = 5.0) -> Answer:
    """One answer (head and a body of its `Content-Length`), the connection left open."""
    sock.settimeout(timeout)
    raw = b""
    while b"\r\n\r\n" not in raw:
        chunk = sock.recv(65536)
        assert chunk, raw
        raw += chunk
    head = parse(raw)
    length = int(head.headers.get("content-length", "0"))
    while len(raw) - raw.index(b"\r\n\r\n") - 4 < length:
        chunk = sock.recv(65536)
        assert chunk, raw
        raw += chunk
    return parse(raw)


def test_the_write_timeout_is_checked_on_the_command_line() -> None:
    parse_args = build_parser().parse_args
    base = ["serve", "--build", "b", "--bindings", "x", "--credentials", "c", "--data", "d"]
    assert parse_args(base).write_timeout == 10.0
    assert parse_args([*base, "--write-timeout", "0.5"]).write_timeout == 0.5
    for bad in ("0", "-1", "301", "nan", "soon"):
        with pytest.raises(SystemExit) as exc:
            parse_args([*base, "--write-timeout", bad])
        assert exc.value.code == 2
    for bad_s in (0.0, float("nan"), 301.0):
        with pytest.raises(ValueError, match="write timeout"):
            Limits(write_timeout_s=bad_s)
