"""The Design workstation reads only regular files of bounded size, opened without blocking
(issue 29's attack pass): "Open bindings file" read ``/dev/zero`` until the kernel's OOM killer
ended ``seif design`` (500 ``MemoryError`` under a memory cap), and a FIFO froze every later
request by holding the workspace lock. Each case runs ``seif design`` as a process (under a
memory cap, so that a workstation that reads a device without end fails the test instead of
the machine) and asks it over loopback with a timeout: every refusal is a 4xx naming the file
and what is wrong, answered at once, and the workstation keeps answering."""

from __future__ import annotations

import contextlib
import os
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest
import requests

from compiler.readfile import MAX_FILE_BYTES
from tests.support.design_harness import Running, design_process, project_copy

MEMORY_CAP = 2 << 30
"""The workstation's address space at most: a few hundred MiB are used, /dev/zero has no end."""
PROMPT_S = 5.0
"""A refusal is answered within this (it reads nothing); a request waits at most twice this."""


def _ask(running: Running, method: str, path: str, body: Any = None) -> requests.Response:
    headers = {"Authorization": f"Bearer {running.token}"}
    return requests.request(
        method, running.base + path, json=body, headers=headers, timeout=2 * PROMPT_S
    )


def _refused(reply: requests.Response, code: str, path: Path, what: str) -> None:
    """A located 4xx: the code, and the message naming the file and what is wrong with it."""
    assert reply.status_code == 422, (reply.status_code, reply.text)
    error = reply.json()["error"]
    assert error["code"] == code, error
    assert f"`{path}`" in error["message"] and what in error["message"], error
    assert reply.json()["diagnostics"][0]["code"] == code


def _opened(running: Running, path: Path) -> tuple[requests.Response, float]:
    started = time.monotonic()
    reply = _ask(running, "POST", "/api/bindings/open", {"file": str(path)})
    return reply, time.monotonic() - started


def _still_serving(running: Running) -> None:
    assert _ask(running, "GET", "/api/project").json()["ok"] is True
    nothing = _ask(running, "GET", "/api/bindings")  # the refused file was not taken
    assert (nothing.status_code, nothing.json()["error"]["code"]) == (404, "NO_BINDINGS")


@pytest.mark.parametrize("named", ["/dev/zero", "a link to /dev/zero"])
def test_opening_a_device_is_refused_without_reading_it(tmp_path: Path, named: str) -> None:
    path = Path("/dev/zero")
    if named != "/dev/zero":
        path = tmp_path / "bindings.json"
        path.symlink_to("/dev/zero")
    with design_process(project_copy(tmp_path, "json"), memory_cap=MEMORY_CAP) as running:
        reply, took = _opened(running, path)
        _refused(reply, "BINDINGS_UNREADABLE", path, "not a regular file (a character device)")
        assert took < PROMPT_S, took
        _still_serving(running)


@pytest.mark.parametrize("named", ["a directory", "a file over the bound"])
def test_opening_a_directory_or_an_over_large_file_is_refused(tmp_path: Path, named: str) -> None:
    path = tmp_path / "bindings.json"
    if named == "a directory":
        path.mkdir()
        what = "not a regular file (a directory)"
    else:
        with path.open("wb") as fh:
            fh.truncate(MAX_FILE_BYTES + 1)  # sparse: read whole, it would be 4 MiB of zeros
        what = "larger than 4 MiB"
    with design_process(project_copy(tmp_path, "json"), memory_cap=MEMORY_CAP) as running:
        reply, took = _opened(running, path)
        _refused(reply, "BINDINGS_UNREADABLE", path, what)
        assert took < PROMPT_S, took
        _still_serving(running)


def _release_fifo(fifo: Path) -> None:
    """Let an open that waits on ``fifo`` return (a writer comes and goes): the workstation
    that waited can then be stopped, and the test fails instead of hanging."""
    with contextlib.suppress(OSError):
        os.close(os.open(fifo, os.O_WRONLY | os.O_NONBLOCK))


def test_opening_a_fifo_neither_waits_nor_holds_up_other_requests(tmp_path: Path) -> None:
    fifo = tmp_path / "bindings.json"
    os.mkfifo(fifo)  # no writer: a plain open would wait for one
    with design_process(project_copy(tmp_path, "json"), memory_cap=MEMORY_CAP) as running:
        try:
            with ThreadPoolExecutor(2) as pool:
                opening = pool.submit(_opened, running, fifo)
                time.sleep(0.2)  # the open first: the state is asked while it is in flight
                started = time.monotonic()
                state = _ask(running, "GET", "/api/project")
                assert time.monotonic() - started < PROMPT_S
                assert state.status_code == 200 and state.json()["ok"] is True
                reply, took = opening.result()
            _refused(reply, "BINDINGS_UNREADABLE", fifo, "not a regular file (a FIFO)")
            assert took < PROMPT_S, took
            _still_serving(running)
        finally:
            _release_fifo(fifo)


def test_a_project_or_release_target_that_is_no_regular_file_is_refused_at_once(
    tmp_path: Path,
) -> None:
    """The project file turned into a FIFO under the running workstation, and a release asked
    to write a bindings file where a FIFO is: every path it reads follows the same rule."""
    project = project_copy(tmp_path, "json")
    target = tmp_path / "bindings.staging.json"
    os.mkfifo(target)
    registry = ["--registry", str(tmp_path / "registry")]
    with design_process(project, *registry, memory_cap=MEMORY_CAP) as running:
        try:
            release = {"environment": "staging", "bindings": str(target)}
            reply = _ask(running, "POST", "/api/release", release)
            _refused(reply, "BINDINGS_UNREADABLE", target, "not a regular file (a FIFO)")
            project.unlink()
            os.mkfifo(project)
            state = _ask(running, "GET", "/api/project").json()
            assert state["ok"] is False, state
            assert state["diagnostics"][0]["code"] == "FILE_UNREADABLE", state
            assert "not a regular file (a FIFO)" in state["diagnostics"][0]["message"]
            change = _ask(running, "POST", "/api/tools/protect", {"tool": "inspect-context"})
            _refused(change, "FILE_UNREADABLE", project, "not a regular file (a FIFO)")
            reply = _ask(running, "POST", "/api/release", {"environment": "staging"})
            assert reply.status_code == 422 and reply.json()["error"]["code"] == "FILE_UNREADABLE"
            assert "not a regular file (a FIFO)" in reply.json()["error"]["message"]
        finally:
            for fifo in (target, project):
                _release_fifo(fifo)
    assert not (tmp_path / "registry" / "builds").exists()  # nothing was registered
