"""``seif serve --log-format json``: the server's own log on stderr is one JSON object per
line (``time``, ``level``, ``logger``, ``event``, ``message``), for every event: start,
listening, readiness, a refused start; ``text`` (the default) is the plain lines it was."""

from __future__ import annotations

import json
import logging
import subprocess
import time
from pathlib import Path
from typing import Any

import pytest
from runtime_harness import (
    ENV,
    executor_process,
    listening,
    serve_args,
    start_serve,
    stop,
    write_config,
)

from seif import serve_log

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
