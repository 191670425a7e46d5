"""What the proof starts and runs: `seif` commands as a customer runs them, and the servers
(the synthetic executor, the bundle's runtime, the approval server) as processes whose start
line is read and which are all stopped when the proof ends, however it ends."""

from __future__ import annotations

import contextlib
import json
import os
import queue
import re
import signal
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from policy.json.strict import loads

LISTENING = re.compile(r"listening on (http://\S+)")
START_TIMEOUT_S = 300.0
"""The bundle's first start creates its virtual environment and installs its wheels."""


class StepFailed(Exception):
    """A step saw something other than what the proof expects: ``observed`` says what."""

    def __init__(self, message: str, **observed: Any) -> None:
        super().__init__(message)
        self.observed = {"error": message, **observed}


@dataclass
class Ran:
    """A finished command: its exit code, stdout and the tail of stderr."""

    code: int
    out: str
    err: str

    def json(self) -> Any:
        try:
            return loads(self.out)
        except ValueError:
            raise StepFailed(
                "the command did not print one JSON document", stderr=self.err
            ) from None


def seif(args: Sequence[str], *, cwd: Path, env: Mapping[str, str]) -> Ran:
    """``seif ARGS`` with this interpreter, run from ``cwd`` (outside the repository)."""
    done = subprocess.run(
        [sys.executable, "-m", "seif.cli", *args],
        cwd=cwd,
        env=dict(env),
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    return Ran(done.returncode, done.stdout, done.stderr[-2000:])


@dataclass
class Server:
    """A server process, its log file and the URL of its start line."""

    name: str
    proc: subprocess.Popen[str]
    log: Path
    url: str = ""
    _lines: queue.Queue[str | None] = field(default_factory=queue.Queue)

    def wait_listening(self, timeout_s: float = START_TIMEOUT_S) -> str:
        assert self.proc.stdout is not None
        threading.Thread(target=self._drain, daemon=True).start()
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            try:
                line = self._lines.get(timeout=max(0.05, deadline - time.monotonic()))
            except queue.Empty:
                break
            if line is None:
                break
            found = LISTENING.search(line)
            if found:
                self.url = found.group(1)
                return self.url
        raise StepFailed(f"{self.name} did not start", exitCode=self.proc.poll(), log=self.tail())

    def _drain(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            self._lines.put(line)
        self._lines.put(None)

    def tail(self, chars: int = 1500) -> str:
        try:
            return self.log.read_text(errors="replace")[-chars:]
        except OSError:
            return ""

    def stop(self, timeout_s: float = 20.0) -> int | None:
        """SIGTERM to the server's whole process group (a clean shutdown; a bundle's first
        start may still be installing), then SIGKILL; its exit code (None if it would not
        die)."""
        if self.proc.poll() is None:
            self._signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout_s)
            except subprocess.TimeoutExpired:
                self._signal(signal.SIGKILL)
                try:
                    self.proc.wait(10)
                except subprocess.TimeoutExpired:
                    return None
        self._signal(signal.SIGKILL)  # whatever it left behind in its group
        if self.proc.stdout is not None:
            self.proc.stdout.close()
        return self.proc.returncode

    def _signal(self, sig: int) -> None:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(self.proc.pid, sig)  # its own session: the group is its pid


def start(
    name: str, argv: Sequence[str], *, cwd: Path, env: Mapping[str, str], log: Path
) -> Server:
    with log.open("w") as err:
        proc = subprocess.Popen(
            list(argv),
            cwd=cwd,
            env=dict(env),
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=err,
            text=True,
            start_new_session=True,  # a group of its own: stopped whole, never orphaned
        )
    return Server(name, proc, log)


def base_env(**extra: str) -> dict[str, str]:
    """The environment of every process the proof starts: no ``SEIF_*`` or ``CONTEXT_TOOL_*``
    variable of the caller's, no proxy; ``extra`` (the proof's own throwaway tokens) added."""
    keep = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith(("SEIF_", "CONTEXT_TOOL_", "PIP_")) and "proxy" not in k.lower()
    }
    return {**keep, **extra}


def http_json(
    method: str, url: str, body: Any = None, headers: Mapping[str, str] | None = None
) -> tuple[int, Any]:
    """One request on loopback (no proxy): the status and the decoded JSON body."""
    opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))
    data = None if body is None else json.dumps(body).encode()
    sent = {"Content-Type": "application/json", **(headers or {})}
    request = urllib.request.Request(url, data=data, method=method, headers=sent)
    try:
        with opener.open(request, timeout=30) as r:
            return r.status, loads(r.read())
    except urllib.error.HTTPError as e:
        raw = e.read()
        try:
            return e.code, loads(raw)
        except ValueError:
            return e.code, None
