"""``seif serve --log-format json``: the server's own log on stderr is one JSON object per
line (``time``, ``level``, ``logger``, ``event``, ``message``), for every event: start,
listening, readiness, a refused start; ``text`` (the default) is the plain lines it was.

One event is one line in either format, and no client writes a line of its choosing: a log
line names the route's template, never the path asked for (the attack: ``%0A`` in a path
wrote a forged line into the text log)."""

from __future__ import annotations

import contextlib
import json
import logging
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import aiohttp
import psycopg
import pytest
from aiohttp import web
from psycopg import sql

from seif.serve import log as serve_log
from servers.http.app import create_app
from tests.servers.store.test_replicas import replicas
from tests.support.runtime_harness import (
    APP_TOKEN,
    ENV,
    executor_process,
    listening,
    prepare_config,
    run_async,
    serve_args,
    serving,
    start_serve,
    stop,
    write_config,
)

KEYS = {"time", "level", "logger", "event", "message"}


def _lines(path: Path) -> list[str]:
    return [line for line in path.read_text().splitlines() if line]


def _until(path: Path, wanted: str, bound: float = 15.0) -> list[dict[str, Any]]:
    started = time.monotonic()
    while time.monotonic() - started < bound:
        found = [json.loads(line) for line in _lines(path)]
        if any(r["event"] == wanted for r in found):
            return found
        time.sleep(0.1)
    raise AssertionError(f"no `{wanted}` event in {path.read_text()[-2000:]}")


def test_json_log_lines_for_start_listening_and_readiness(tmp_path: Path) -> None:
    with executor_process(tmp_path) as executor_url:
        config = write_config(tmp_path, executor_url)
        proc = start_serve(config, "--log-format", "json")
        try:
            listening(proc)
            records = _until(config.data.parent / "serve.err", "readiness")
        finally:
            stop(proc)
    assert all(set(r) == KEYS for r in records), records
    events = [r["event"] for r in records]
    assert events[0] == "start" and "listening" in events
    assert all(r["time"].endswith("Z") and r["level"] == "info" for r in records)
    assert any("runtime: build blake3:" in r["message"] for r in records if r["event"] == "start")


def test_a_refused_start_is_json_too_and_text_stays_plain(tmp_path: Path) -> None:
    with executor_process(tmp_path) as executor_url:
        config = write_config(tmp_path, executor_url)
        args = serve_args(config, "--log-format", "json")
        args[args.index("--build") + 1] = str(tmp_path / "no-such-build")
        refused = subprocess.run(args, check=False, env=ENV, capture_output=True, text=True)
        assert refused.returncode == 2
        records = [json.loads(line) for line in refused.stderr.splitlines() if line]
        assert records and all(set(r) == KEYS for r in records)
        assert {r["event"] for r in records} == {"refused"}
        assert records[-1]["message"].startswith("seif serve: not started")
        args.remove("json")
        args.remove("--log-format")
        plain = subprocess.run(args, check=False, env=ENV, capture_output=True, text=True)
        assert plain.returncode == 2
        assert plain.stderr.splitlines()[-1].startswith("seif serve: not started")


def test_every_logger_writes_json_lines_in_json_mode(capsys: pytest.CaptureFixture[str]) -> None:
    """The executor client's, aiohttp's, the MCP SDK's and asyncio's warnings too (once they
    came out as plain text between the JSON lines); an exception gives its type only."""
    root = logging.getLogger()
    saved = (root.handlers[:], root.level)
    try:
        serve_log.configure("json")
        for name in ("servers.executor.client", "aiohttp.server", "mcp.server", "asyncio"):
            logging.getLogger(name).warning("executor %s: TIMEOUT", "inspect-context")
        try:
            raise ValueError("secret-detail-7f3a")
        except ValueError:
            logging.getLogger("seif.runtime").exception("a failure")
        misfit = "%s and %s"  # a format its arguments do not fit: the format, not a traceback
        logging.getLogger("seif.http").warning(misfit, "only-one")
    finally:
        serve_log.configure("text")
        root.handlers[:] = saved[0]
        root.setLevel(saved[1])
    lines = [json.loads(line) for line in capsys.readouterr().err.splitlines() if line]
    assert len(lines) == 6 and all(set(r) >= KEYS for r in lines)
    assert lines[0]["message"] == "executor inspect-context: TIMEOUT"
    assert lines[4]["error"] == "ValueError" and "secret-detail" not in json.dumps(lines)


# --- a client's text never writes a line ----------------------------------------------------

FORGED = "forged-7c1e"
"""In every path sent below: no log line may carry it."""
INJECTED = (
    f"x%0A{FORGED}%20line%0D%0A%22level%22:%22error%22,%22message%22:%22{FORGED}%22%0D"
    "%E2%80%A8%1B[31m"
)
"""A path segment decoding to line breaks (``\\n``, ``\\r``, U+2028), a terminal escape and
a forged JSON fragment."""
BRACED = f"%7B%22level%22:%22error%22,%22message%22:%22{FORGED}%22%7D%0A{FORGED}"


@contextlib.contextmanager
def server_log(log_format: str) -> Iterator[None]:
    """The log of ``seif serve --log-format FORMAT`` (:func:`seif.serve.log.configure`) for
    the span of the block, on this process's stderr."""
    root = logging.getLogger()
    saved = (root.handlers[:], root.level)
    try:
        serve_log.configure(log_format)
        yield
    finally:
        serve_log.configure("text")
        root.handlers[:] = saved[0]
        root.setLevel(saved[1])


def _messages_naming(err: str, log_format: str, route: str) -> list[str]:
    """The messages of the lines of ``err`` naming ``route``, after checking that every line
    is one event of ``log_format`` and that none carries the client's text."""
    lines = [line for line in err.splitlines() if line]
    assert not [line for line in lines if FORGED in line or "\x1b" in line], lines
    if log_format == "text":
        return [line for line in lines if route in line]
    records = [json.loads(line) for line in lines]  # every line is one whole event
    assert all(set(r) >= KEYS for r in records), records
    assert not [r for r in records if FORGED in r["message"]], records
    return [r["message"] for r in records if route in r["message"]]


async def _broken(request: web.Request) -> web.Response:
    raise RuntimeError(f"a bug, at {request.match_info['anything']}")  # a stand-in: any bug


@pytest.mark.parametrize("log_format", serve_log.FORMATS)
def test_an_internal_error_s_log_line_is_one_line_naming_the_route_not_the_path(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], log_format: str
) -> None:
    """A route whose handler fails (built here: the runtime's own routes fail on no input)
    asked for at paths holding line breaks and a forged JSON object: its ``500 INTERNAL``
    writes one line per request, naming the route's template."""
    config = write_config(tmp_path, "http://127.0.0.1:9")
    prepared = prepare_config(config)

    async def scenario() -> list[int]:
        app = create_app(prepared)
        app.router.add_get("/v1/broken/{anything:[^/]+}", _broken)
        async with serving(app) as url, aiohttp.ClientSession() as http:
            statuses = []
            for segment in (INJECTED, BRACED):
                async with http.get(f"{url}/v1/broken/{segment}") as r:
                    statuses.append(r.status)
            return statuses

    try:
        capsys.readouterr()
        with server_log(log_format):
            assert run_async(scenario()) == [500, 500]
    finally:
        prepared.close()
    messages = _messages_naming(capsys.readouterr().err, log_format, "/v1/broken/")
    assert messages == ["internal error in GET /v1/broken/{anything}: RuntimeError"] * 2


@pytest.mark.parametrize("log_format", serve_log.FORMATS)
def test_a_store_unavailable_log_line_is_one_line_naming_the_route_not_the_path(
    tmp_path: Path, pg_url: str, capsys: pytest.CaptureFixture[str], log_format: str
) -> None:
    """A replica whose PostgreSQL store is unreachable (its connections cut, no new one
    admitted) asked to complete a turn whose id holds line breaks and a forged JSON fragment:
    ``503 STORE_UNAVAILABLE``, and one line naming the route's template."""

    async def scenario() -> None:
        async with replicas(tmp_path, pg_url, count=1) as (a,):
            with unreachable(pg_url):
                headers = {"Authorization": f"Bearer {APP_TOKEN}"}
                path = f"{a.runtime}/v1/turns/{INJECTED}/complete"
                async with a.http.post(path, json={"outcome": "COMPLETED"}, headers=headers) as r:
                    body = await r.json()
                assert (r.status, body["error"]["code"]) == (503, "STORE_UNAVAILABLE"), body

    capsys.readouterr()
    with server_log(log_format):
        run_async(scenario())
    (message,) = _messages_naming(capsys.readouterr().err, log_format, "/v1/turns/")
    assert message.startswith("store unavailable in POST /v1/turns/{turnId}/complete: "), message


@contextlib.contextmanager
def unreachable(url: str) -> Iterator[None]:
    """The database of ``url`` admits no connection, and those it had are cut, for the span of
    the block."""
    name = sql.Identifier(psycopg.conninfo.conninfo_to_dict(url)["dbname"])
    server = url.rsplit("/", 1)[0] + "/postgres"
    with psycopg.connect(server, autocommit=True) as conn:
        conn.execute(sql.SQL("ALTER DATABASE {} WITH ALLOW_CONNECTIONS false").format(name))
        conn.execute(
            "SELECT pg_terminate_backend(pid) FROM pg_stat_activity"
            " WHERE datname = %s AND pid <> pg_backend_pid()",
            (name.as_string(None).strip('"'),),
        )
    try:
        yield
    finally:
        with psycopg.connect(server, autocommit=True) as conn:
            conn.execute(sql.SQL("ALTER DATABASE {} WITH ALLOW_CONNECTIONS true").format(name))
