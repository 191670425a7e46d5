"""Nothing private reaches the disk or a log: after a full run with sentinel strings in
arguments, approval reasons, executor outputs and secrets, every byte of the data directory
(the SQLite database with its -wal, the decision log, the key and the lock) and every captured
log line is free of them."""

from __future__ import annotations

import http.client
import logging
import signal
from collections.abc import Iterator
from pathlib import Path
from urllib.parse import urlsplit

import pytest

from tests.support.runtime_harness import (
    APP_TOKEN,
    APPROVAL,
    ENV,
    EXECUTOR,
    PROPOSAL,
    Stack,
    listening,
    run_async,
    running_stack,
    start_serve,
    stop,
    write_config,
)

ARG = "sentinel-argument-4b7e1c9a"
REASON = "sentinel-approval-reason-d83f02"
OUTPUT = "sentinel-executor-output-71a5e6"
TRACE_SECRET = "sentinel-trace-key-secret-0c9d4b"
ENTRY = "course/data-literacy/sentinel-entry"
SECRETS = [*ENV.values(), TRACE_SECRET]
SENTINELS = [ARG, REASON, OUTPUT, *SECRETS]


class Capture(logging.Handler):
    def __init__(self) -> None:
        super().__init__(logging.DEBUG)
        self.lines: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        text = record.getMessage()
        if record.exc_info:
            text += logging.Formatter().formatException(record.exc_info)
        self.lines.append(f"{record.name}: {text}")


@pytest.fixture
def captured() -> Iterator[Capture]:
    handler = Capture()
    root = logging.getLogger()
    level = root.level
    root.addHandler(handler)
    root.setLevel(logging.DEBUG)
    try:
        yield handler
    finally:
        root.removeHandler(handler)
        root.setLevel(level)


@pytest.fixture
def sentinel_entry() -> Iterator[None]:
    """A catalogue entry of the synthetic executor whose text is a sentinel."""
    EXECUTOR.CATALOGUE[ENTRY] = ("Sentinel entry", f"This entry says {OUTPUT}.")
    try:
        yield
    finally:
        del EXECUTOR.CATALOGUE[ENTRY]


def scan(root: Path) -> dict[str, list[str]]:
    """Sentinel -> files of ``root`` (recursively) holding it, as text or as hex."""
    found: dict[str, list[str]] = {}
    files = [p for p in root.rglob("*") if p.is_file()]
    assert files
    for path in files:
        data = path.read_bytes()
        for sentinel in SENTINELS:
            raw = sentinel.encode()
            if raw in data or raw.hex().encode() in data or sentinel.encode("utf-16-le") in data:
                found.setdefault(sentinel, []).append(path.name)
    return found


async def _run_everything(s: Stack) -> str:
    """Every path a private value can take: dispatched, denied, conflicting, approved,
    pending, failed, reflected and reported calls."""
    proposal = {**PROPOSAL, "summary": f"Fix {ARG}", "details": ARG}
    ctx: str = (await s.resolve(traceId="trace-privacy"))["contextRef"]
    read = await s.execute(ctx, "inspect-context", "r1", {"ref": ENTRY})
    assert OUTPUT in read["output"]["text"]  # the sentinel output went through the runtime
    missing = await s.execute(ctx, "inspect-context", "r2", {"ref": f"course/{ARG}"})
    assert missing["status"] == "FAILED"
    invalid = await s.execute(ctx, "inspect-context", "r3", {"ref": ENTRY, "section": ARG})
    assert invalid["reason"] == "ARGUMENTS_INVALID"
    conflict = await s.execute(ctx, "inspect-context", "r1", {"ref": ENTRY, "section": "lesson"})
    assert conflict["reason"] == "CALL_CONFLICT"

    asked = await s.execute(ctx, "propose-change", "p1", proposal)
    assert asked["reason"] == "APPROVAL_REQUIRED"
    pending = await s.call("GET", "/v1/context/tools/pending", headers=APPROVAL)
    assert ARG in str(pending.body)  # held in memory, shown to the approver
    wrong = await s.approve(ctx, "propose-change", "p1", {**proposal, "kind": "extend"}, REASON)
    refused = await s.execute(ctx, "propose-change", "p1", proposal, wrong.body["approvalId"])
    assert refused["reason"] == "APPROVAL_INVALID"
    right = await s.approve(ctx, "propose-change", "p1", proposal, REASON)
    done = await s.execute(ctx, "propose-change", "p1", proposal, right.body["approvalId"])
    assert done["status"] == "SUCCEEDED"
    await s.execute(ctx, "propose-change", "p1", proposal, right.body["approvalId"])

    s.set_knobs("search-knowledge", reflect="raw", routes=frozenset({"execute"}))
    reflected = await s.execute(ctx, "search-knowledge", "s1", {"query": ARG, "limit": 3})
    assert reflected["reason"] == "CREDENTIAL_REFLECTED"
    s.set_knobs("search-knowledge", invalid_output=True, routes=frozenset({"execute"}))
    bad = await s.execute(ctx, "search-knowledge", "s2", {"query": ARG, "limit": 2})
    assert bad["reason"] == "RESULT_INVALID"
    reported = await s.call(
        "POST", "/v1/context/disclosures", {"contextRef": ctx, "tools": ["inspect_context"]}
    )
    assert reported.status == 202
    traces = await s.call("GET", f"/v1/traces/{ctx}")
    assert traces.status == 200 and not any(x in str(traces.body) for x in SENTINELS)
    return ctx


def test_no_sentinel_on_disk_or_in_logs(
    tmp_path: Path, captured: Capture, sentinel_entry: None
) -> None:
    env = {**ENV, "CONTEXT_TOOL_TRACE_KEY": TRACE_SECRET}
    during: dict[str, list[str]] = {}

    async def scenario() -> None:
        async with running_stack(
            tmp_path, env=env, bindings_extra={"traceKeyRef": "env:CONTEXT_TOOL_TRACE_KEY"}
        ) as s:
            await _run_everything(s)
            stats = await s.stats()
            assert stats["byCallId"] == {"r1": 1, "p1": 1, "s1": 1, "s2": 1}
            proposals = s.executor_app[EXECUTOR.STATE].proposals.values()
            assert [p["subject"][1] for p in proposals] == [f"Fix {ARG}"]
            data = s.config.data
            assert (data / "dispatch.sqlite-wal").exists()
            assert not (data / "runtime.key").exists()  # the trace key is the binding's
            during.update(scan(data))

    run_async(scenario())
    control = tmp_path / "control"
    control.mkdir()
    (control / "positive").write_bytes(b"\x00prefix" + OUTPUT.encode() + b"suffix")
    assert scan(control) == {OUTPUT: ["positive"]}  # the scan does find what it looks for
    assert during == {}
    assert scan(tmp_path / "data") == {}
    assert captured.lines  # the loggers were really captured
    leaked = [line for line in captured.lines if any(x in line for x in SENTINELS)]
    assert leaked == []


def test_a_malformed_authorization_header_is_not_logged(tmp_path: Path) -> None:
    config = write_config(tmp_path, "http://127.0.0.1:9")
    proc = start_serve(config)
    try:
        url = urlsplit(listening(proc))
        assert url.hostname is not None and url.port is not None
        conn = http.client.HTTPConnection(url.hostname, url.port, timeout=10)
        conn.request(
            "POST",
            "/v1/context/resolve",
            body=b'{"objective": "learner"}',
            headers={"Authorization": f"Bearer {APP_TOKEN}\x01".encode()},
        )
        response = conn.getresponse()
        assert response.status == 400
        response.read()
        conn.close()
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(20) == 0
    finally:
        stop(proc)
    assert APP_TOKEN not in (tmp_path / "serve.err").read_text()
