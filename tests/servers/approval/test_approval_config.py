"""`seif approval-server`'s configuration and process: the approvers file (every problem named
with its pointer and code, no token repeated), the runner approval credential (required,
distinct from every approver's), the runtime URL, and the command itself: refusals exit 2, the
start line, SIGTERM exits 0."""

from __future__ import annotations

import json
import signal
import time
import urllib.request
from pathlib import Path
from typing import Any

import pytest

from policy.diagnostic import render
from servers.config.approvers import load_approvers, runner_token, runtime_url
from servers.config.files import ConfigError
from tests.support.approval_harness import ANA_TOKEN, APPROVER_ENV, APPROVERS, write_approvers
from tests.support.runtime_harness import APPROVAL_TOKEN, _read_url, seif_command, spawn, stop


def _problems(document: Any, env: dict[str, str] | None = None, tmp: Path | None = None) -> list:
    assert tmp is not None
    path = tmp / "approvers.json"
    path.write_text(document if isinstance(document, str) else json.dumps(document))
    with pytest.raises(ConfigError) as refused:
        load_approvers(path, APPROVER_ENV if env is None else env)
    return [(p.pointer, p.code) for p in refused.value.diagnostics]


def test_the_approvers_file_is_checked_whole(tmp_path: Path) -> None:
    ana = {"id": "ops-ana", "tokenRef": "env:SEIF_APPROVER_ANA"}
    cases = {
        "not json": ("{", [("", "JSON_SYNTAX")]),
        "empty": ({"approvers": []}, [("/approvers", "APPROVERS_EMPTY")]),
        "unknown key": ({"approvers": [ana], "x": 1}, [("/x", "UNKNOWN_KEY")]),
        "duplicate id": (
            {"approvers": [ana, {"id": "ops-ana", "tokenRef": "env:SEIF_APPROVER_BEN"}]},
            [("/approvers/1/id", "DUPLICATE_ID")],
        ),
        "duplicate token": (
            {"approvers": [ana, {"id": "ops-ben", "tokenRef": "env:SEIF_APPROVER_ANA"}]},
            [("/approvers/1/tokenRef", "DUPLICATE_TOKEN")],
        ),
        "keychain": (
            {"approvers": [{"id": "ops-ana", "tokenRef": "keychain:ana"}]},
            [("/approvers/0/tokenRef", "APPROVER_TOKEN_REF_INVALID")],
        ),
        "another env": (
            {"approvers": [{"id": "ops-ana", "tokenRef": "env:SEIF_APP_TOKEN"}]},
            [("/approvers/0/tokenRef", "APPROVER_TOKEN_REF_INVALID")],
        ),
        "unset": (
            {"approvers": [{"id": "ops-cy", "tokenRef": "env:SEIF_APPROVER_CY"}]},
            [("/approvers/0/tokenRef", "SECRET_MISSING")],
        ),
        "bad id": (
            {"approvers": [{"id": "Ana", "tokenRef": "env:SEIF_APPROVER_ANA"}]},
            [("/approvers/0/id", "INVALID_ID")],
        ),
    }
    for name, (document, expected) in cases.items():
        assert _problems(document, tmp=tmp_path) == expected, name


def test_a_token_pasted_as_a_reference_is_never_repeated(tmp_path: Path) -> None:
    path = write_approvers(tmp_path, {"approvers": [{"id": "ops-ana", "tokenRef": ANA_TOKEN}]})
    with pytest.raises(ConfigError) as refused:
        load_approvers(path, APPROVER_ENV)
    assert ANA_TOKEN not in str(refused.value)
    assert ANA_TOKEN not in " ".join(render(p) for p in refused.value.diagnostics)


def test_the_runner_credential_is_required_and_no_approver_s(tmp_path: Path) -> None:
    approvers = load_approvers(write_approvers(tmp_path), APPROVER_ENV)
    assert runner_token({"SEIF_CONTEXT_TOOL_APPROVAL_TOKEN": APPROVAL_TOKEN}, approvers)
    for env, code in (
        ({}, "APPROVAL_TOKEN_MISSING"),
        ({"SEIF_CONTEXT_TOOL_APPROVAL_TOKEN": ""}, "APPROVAL_TOKEN_MISSING"),
        ({"SEIF_CONTEXT_TOOL_APPROVAL_TOKEN": ANA_TOKEN}, "APPROVER_TOKEN_NOT_DISTINCT"),
    ):
        with pytest.raises(ConfigError) as refused:
            runner_token(env, approvers)
        assert [p.code for p in refused.value.diagnostics] == [code]
        assert ANA_TOKEN not in str(refused.value)


def test_the_runtime_url_keeps_the_runner_credential_safe() -> None:
    assert runtime_url("http://127.0.0.1:8787/") == "http://127.0.0.1:8787"
    assert runtime_url("https://runtime.example") == "https://runtime.example"
    for url, code in (
        ("http://runtime.example", "ENDPOINT_HTTP_NOT_LOOPBACK"),
        ("ftp://127.0.0.1", "ENDPOINT_SCHEME_REFUSED"),
        ("https://user:pw@runtime.example", "ENDPOINT_USERINFO_REFUSED"),
        ("127.0.0.1:8787", "ENDPOINT_INVALID"),
    ):
        with pytest.raises(ConfigError) as refused:
            runtime_url(url)
        assert refused.value.diagnostics[0].code == code, url


def _command(tmp: Path, *extra: str) -> list[str]:
    return [
        *seif_command(),
        "approval-server",
        "--runtime",
        "http://127.0.0.1:9",
        "--approvers",
        str(tmp / "approvers.json"),
        "--port",
        "0",
        *extra,
    ]


def test_the_command_refuses_bad_configuration_with_exit_2(tmp_path: Path) -> None:
    write_approvers(tmp_path, {"approvers": [APPROVERS["approvers"][0]] * 2})
    env = {**APPROVER_ENV, "SEIF_CONTEXT_TOOL_APPROVAL_TOKEN": APPROVAL_TOKEN}
    proc = spawn(_command(tmp_path), env, tmp_path / "err")
    assert proc.wait(30) == 2
    err = (tmp_path / "err").read_text()
    assert "/approvers/1/id: DUPLICATE_ID" in err and ANA_TOKEN not in err
    write_approvers(tmp_path)
    proc = spawn(_command(tmp_path), APPROVER_ENV, tmp_path / "err")
    assert proc.wait(30) == 2
    assert "APPROVAL_TOKEN_MISSING" in (tmp_path / "err").read_text()


def test_the_command_starts_serves_the_page_and_stops_on_sigterm(tmp_path: Path) -> None:
    write_approvers(tmp_path)
    env = {**APPROVER_ENV, "SEIF_CONTEXT_TOOL_APPROVAL_TOKEN": APPROVAL_TOKEN}
    proc = spawn(_command(tmp_path), env, tmp_path / "err")
    try:
        url = _read_url(proc, "seif approval-server listening on ", time.monotonic() + 30)
        opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))
        with opener.open(url + "/", timeout=10) as page:
            assert page.status == 200 and b"/app.js" in page.read()
            assert page.headers["X-Frame-Options"] == "DENY"
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(15) == 0
    finally:
        stop(proc)
