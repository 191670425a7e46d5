"""`seif serve` as an operator starts it (a subprocess, with the synthetic executor): every
problem of every file reported before exit 2, in one rendering, with did-you-mean for a tool id
in the bindings, and nothing created; once started, stderr names the build, the bound tools and
each tool's readiness."""

from __future__ import annotations

import sys
import time
from pathlib import Path

from policy.json.strict import loads
from tests.support.runtime_harness import (
    ENV,
    bindings_document,
    executor_process,
    listening,
    start_serve,
    stop,
    write_config,
)


def test_a_refused_start_reports_every_problem_and_creates_nothing(tmp_path: Path) -> None:
    document = bindings_document("http://127.0.0.1:9")
    document["tools"]["inspect-contxt"] = document["tools"].pop("inspect-context")
    config = write_config(tmp_path, "http://127.0.0.1:9", bindings=document)
    env = {k: v for k, v in ENV.items() if k != "SEIF_APP_TOKEN"}  # and a token missing
    proc = start_serve(config, env=env)
    assert proc.wait(60) == 2
    err = (tmp_path / "serve.err").read_text()
    assert f"{config.credentials}:/credentials/0/tokenRef: SECRET_MISSING:" in err
    assert (
        f"{config.bindings}:/tools/inspect-contxt: UNKNOWN_TOOL: tool `inspect-contxt` is not"
        " declared; did you mean `inspect-context`?"
    ) in err
    assert "::" not in err  # one rendering: FILE:POINTER: CODE, or FILE: CODE at the root
    assert "not started, 2 problems; nothing was created" in err
    assert not config.data.exists()
    stop(proc)


def test_a_started_runtime_says_what_it_serves_and_whether_it_is_ready(tmp_path: Path) -> None:
    with executor_process(tmp_path) as executor:
        config = write_config(tmp_path, executor)
        build = loads((config.build / "manifest.json").read_bytes())["digest"]
        proc = start_serve(config)
        try:
            listening(proc)
            err = tmp_path / "serve.err"
            deadline = time.monotonic() + 30
            while "ready (GET /v1/ready)" not in err.read_text() and time.monotonic() < deadline:
                time.sleep(0.1)
            text = err.read_text()
        finally:
            stop(proc)
    assert f"seif runtime: build {build} (agent-tools-reference 1.0.0)" in text
    assert "3 tools bound (inspect-context, search-knowledge, propose-change)" in text
    for tool in ("inspect-context", "search-knowledge", "propose-change"):
        assert f"seif runtime: tool {tool} READY" in text
    assert "seif runtime: ready (GET /v1/ready)" in text
    assert ENV["SEIF_APP_TOKEN"] not in text


def test_the_executor_reads_the_secret_names_the_bindings_template_writes(tmp_path: Path) -> None:
    """A newcomer filled in `seif bindings template` (CONTEXT_TOOL_INSPECT_CONTEXT_TOKEN) and
    the executor read only its short default names: a tool then needed no token at all."""
    import urllib.error
    import urllib.request

    from compiler.authoring.bindings import secret_env
    from tests.support.runtime_harness import EXECUTOR_SCRIPT, HOST, _read_url, spawn

    env = {secret_env("inspect-context"): "template-named-secret-1a2b"}
    args = [sys.executable, str(EXECUTOR_SCRIPT), "--host", HOST, "--port", "0"]
    proc = spawn(args, env, tmp_path / "executor.err")
    try:
        url = _read_url(proc, "reference executor listening on ", time.monotonic() + 30)
        opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))

        def describe(token: str | None) -> int:
            headers = {"Authorization": f"Bearer {token}"} if token else {}
            request = urllib.request.Request(f"{url}/inspect-context/describe", headers=headers)
            try:
                with opener.open(request, timeout=10) as r:
                    return int(r.status)
            except urllib.error.HTTPError as e:
                return int(e.code)

        assert describe(None) == 401
        assert describe("template-named-secret-1a2b") == 200
    finally:
        stop(proc)
