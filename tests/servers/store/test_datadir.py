"""The data directory: one owner process (flock), reclaim after death, the runtime key."""

from __future__ import annotations

import fcntl
import json
import os
import signal
import socket
import stat
import subprocess
import sys
import textwrap
from collections.abc import Iterator
from pathlib import Path

import pytest

from policy.json.strict import loads
from servers.store.sqlite.datadir import (
    KEY_BYTES,
    OWNER_LOCK,
    RUNTIME_KEY,
    DataDir,
    DataDirError,
    DataDirLocked,
)
from tests.support.paths import ROOT

HOLDER = """
import os, sys, time
from servers.store.sqlite.datadir import DataDir
d = DataDir.open(sys.argv[1])
say = lambda line: os.write(1, line.encode() + b"\\n")  # one write: lines never interleave
if len(sys.argv) > 2:  # fork a child that outlives this process
    child = os.fork()
    if child == 0:  # the after-fork hooks have run once fork() returns here
        say("ready")
        time.sleep(60)
        os._exit(0)
    say(str(child))
else:
    say("ready")
time.sleep(60)
"""


def _spawn_holder(path: Path, *extra: str) -> tuple[subprocess.Popen[str], list[str]]:
    proc = subprocess.Popen(
        [sys.executable, "-c", HOLDER, str(path), *extra],
        cwd=ROOT,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    assert proc.stdout is not None and proc.stderr is not None
    lines: list[str] = []
    while "ready" not in lines or (extra and len(lines) < 2):
        line = proc.stdout.readline().strip()
        if not line:
            proc.wait()
            raise AssertionError(f"holder exited {proc.returncode}: {proc.stderr.read()}")
        lines.append(line)
    return proc, [line for line in lines if line != "ready"]


@pytest.fixture
def holder(tmp_path: Path) -> Iterator[subprocess.Popen[str]]:
    proc, _ = _spawn_holder(tmp_path / "data")
    yield proc
    if proc.poll() is None:
        proc.kill()
    proc.wait()


def _dead_pid() -> int:
    proc = subprocess.Popen([sys.executable, "-c", "pass"])
    proc.wait()
    return proc.pid


def test_open_creates_private_directory_and_owner_record(tmp_path: Path) -> None:
    path = tmp_path / "a" / "data"
    with DataDir.open(path) as data:
        assert data.path == path
        assert stat.S_IMODE(path.stat().st_mode) == 0o700
        owner = loads((path / OWNER_LOCK).read_text())
        assert owner["pid"] == os.getpid()
        assert owner["host"] == socket.gethostname()
        assert isinstance(owner["startedAt"], int)


def test_second_open_in_same_process_is_refused(tmp_path: Path) -> None:
    with DataDir.open(tmp_path) as _first, pytest.raises(DataDirLocked) as info:
        DataDir.open(tmp_path)
    assert info.value.pid == os.getpid()
    assert info.value.host == socket.gethostname()
    assert str(os.getpid()) in str(info.value)
    assert socket.gethostname() in str(info.value)


def test_close_releases(tmp_path: Path) -> None:
    DataDir.open(tmp_path).close()
    data = DataDir.open(tmp_path)
    data.close()
    data.close()  # idempotent
    assert data.closed


def test_another_live_process_owns_it(tmp_path: Path, holder: subprocess.Popen[str]) -> None:
    with pytest.raises(DataDirLocked) as info:
        DataDir.open(tmp_path / "data")
    assert info.value.pid == holder.pid
    assert info.value.host == socket.gethostname()
    assert f"pid {holder.pid}" in str(info.value)
    assert "not running" not in str(info.value)


def test_sigkilled_owner_is_reclaimed(tmp_path: Path, holder: subprocess.Popen[str]) -> None:
    holder.send_signal(signal.SIGKILL)
    holder.wait()
    with DataDir.open(tmp_path / "data") as data:
        owner = loads((data.path / OWNER_LOCK).read_text())
        assert owner["pid"] == os.getpid()


def test_stale_file_of_a_dead_pid_is_reclaimed(tmp_path: Path) -> None:
    stale = {"pid": _dead_pid(), "host": socket.gethostname(), "startedAt": 1}
    (tmp_path / OWNER_LOCK).write_text(json.dumps(stale))
    with DataDir.open(tmp_path):
        assert loads((tmp_path / OWNER_LOCK).read_text())["pid"] == os.getpid()


def test_held_lock_with_dead_recorded_pid_is_still_refused(tmp_path: Path) -> None:
    """The flock is the truth: a recorded pid that is gone does not break a held lock."""
    fd = os.open(tmp_path / OWNER_LOCK, os.O_RDWR | os.O_CREAT, 0o600)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        dead = _dead_pid()
        os.write(fd, json.dumps({"pid": dead, "host": socket.gethostname()}).encode())
        with pytest.raises(DataDirLocked) as info:
            DataDir.open(tmp_path)
        assert info.value.pid == dead
        assert "not running here" in str(info.value)
    finally:
        os.close(fd)


def test_forked_child_does_not_keep_the_lock(tmp_path: Path) -> None:
    proc, lines = _spawn_holder(tmp_path, "fork")
    child = int(lines[0])
    try:
        with pytest.raises(DataDirLocked):
            DataDir.open(tmp_path)
        proc.send_signal(signal.SIGKILL)
        proc.wait()
        os.kill(child, 0)  # the child still lives
        DataDir.open(tmp_path).close()
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        os.kill(child, signal.SIGKILL)


def test_unreadable_owner_record_still_refuses(tmp_path: Path) -> None:
    fd = os.open(tmp_path / OWNER_LOCK, os.O_RDWR | os.O_CREAT, 0o600)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        os.write(fd, b"{not json")
        with pytest.raises(DataDirLocked) as info:
            DataDir.open(tmp_path)
        assert (info.value.pid, info.value.host) == (0, "unknown")
    finally:
        os.close(fd)


def test_runtime_key_is_created_once_private(tmp_path: Path) -> None:
    with DataDir.open(tmp_path) as data:
        key = data.runtime_key()
        assert len(key) == KEY_BYTES
        assert data.runtime_key() == key
        info = (tmp_path / RUNTIME_KEY).stat()
        assert stat.S_IMODE(info.st_mode) == 0o600
    assert sorted(p.name for p in tmp_path.iterdir()) == [OWNER_LOCK, RUNTIME_KEY]
    with DataDir.open(tmp_path) as data:
        assert data.runtime_key() == key
        assert (tmp_path / RUNTIME_KEY).stat().st_ino == info.st_ino


def test_runtime_keys_differ_between_directories(tmp_path: Path) -> None:
    with DataDir.open(tmp_path / "a") as a, DataDir.open(tmp_path / "b") as b:
        assert a.runtime_key() != b.runtime_key()


def test_leftover_temporary_key_is_replaced(tmp_path: Path) -> None:
    (tmp_path / (RUNTIME_KEY + ".tmp")).write_bytes(b"x")
    with DataDir.open(tmp_path) as data:
        assert len(data.runtime_key()) == KEY_BYTES
    assert not (tmp_path / (RUNTIME_KEY + ".tmp")).exists()


@pytest.mark.parametrize(
    ("content", "mode", "message"),
    [
        (b"k" * 31, 0o600, "31 bytes"),
        (b"k" * 33, 0o600, "33 bytes"),
        (b"", 0o600, "0 bytes"),
        (b"k" * 32, 0o640, "group and others"),
        (b"k" * 32, 0o604, "group and others"),
    ],
)
def test_bad_key_file_is_refused(tmp_path: Path, content: bytes, mode: int, message: str) -> None:
    key = tmp_path / RUNTIME_KEY
    key.write_bytes(content)
    key.chmod(mode)
    with DataDir.open(tmp_path) as data, pytest.raises(DataDirError, match=message):
        data.runtime_key()
    assert key.read_bytes() == content  # never replaced


def test_symlinked_key_is_refused(tmp_path: Path) -> None:
    target = tmp_path / "elsewhere"
    target.write_bytes(b"k" * 32)
    target.chmod(0o600)
    (tmp_path / "data").mkdir()
    (tmp_path / "data" / RUNTIME_KEY).symlink_to(target)
    with DataDir.open(tmp_path / "data") as data, pytest.raises(DataDirError, match="symbolic"):
        data.runtime_key()


def test_closed_directory_gives_no_key(tmp_path: Path) -> None:
    data = DataDir.open(tmp_path)
    data.close()
    with pytest.raises(DataDirError, match="closed"):
        data.runtime_key()


def test_cli_style_refusal_message(tmp_path: Path, holder: subprocess.Popen[str]) -> None:
    script = textwrap.dedent(
        """
        import sys
        from servers.store.sqlite.datadir import DataDir, DataDirLocked
        try:
            DataDir.open(sys.argv[1])
        except DataDirLocked as exc:
            print(exc)
            sys.exit(3)
        """
    )
    done = subprocess.run(
        [sys.executable, "-c", script, str(tmp_path / "data")],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=False,
    )
    assert done.returncode == 3
    assert f"pid {holder.pid}" in done.stdout
    assert socket.gethostname() in done.stdout


# --- the lock on the directory itself, and what closes before it is released -----------------


def test_unlinked_owner_lock_does_not_free_the_directory(
    tmp_path: Path, holder: subprocess.Popen[str]
) -> None:
    """With the path's lock gone (``owner.lock`` unlinked under a live owner), the lock on
    the directory still refuses a second owner; the refused one creates no new file."""
    (tmp_path / "data" / OWNER_LOCK).unlink()
    with pytest.raises(DataDirLocked) as info:
        DataDir.open(tmp_path / "data")
    assert (info.value.pid, info.value.code) == (0, "DATA_DIR_LOCKED")
    assert "missing or unreadable" in str(info.value)
    assert not (tmp_path / "data" / OWNER_LOCK).exists()
    holder.send_signal(signal.SIGKILL)
    holder.wait()
    with DataDir.open(tmp_path / "data"):  # the owner's death releases both locks
        assert loads((tmp_path / "data" / OWNER_LOCK).read_text())["pid"] == os.getpid()


def test_the_directory_itself_is_flocked(tmp_path: Path) -> None:
    with DataDir.open(tmp_path):
        fd = os.open(tmp_path, os.O_RDONLY | os.O_DIRECTORY)
        try:
            with pytest.raises(BlockingIOError):
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        finally:
            os.close(fd)
    fd = os.open(tmp_path, os.O_RDONLY | os.O_DIRECTORY)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)  # released on close
    finally:
        os.close(fd)


def test_an_owner_holding_only_owner_lock_still_refuses(tmp_path: Path) -> None:
    """A runtime of an earlier version locks only ``owner.lock``: still one owner."""
    fd = os.open(tmp_path / OWNER_LOCK, os.O_RDWR | os.O_CREAT, 0o600)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        os.write(fd, json.dumps({"pid": os.getpid(), "host": socket.gethostname()}).encode())
        with pytest.raises(DataDirLocked):
            DataDir.open(tmp_path)
        probe = os.open(tmp_path, os.O_RDONLY | os.O_DIRECTORY)
        try:  # the refused open released the directory's lock it had taken
            fcntl.flock(probe, fcntl.LOCK_EX | fcntl.LOCK_NB)
        finally:
            os.close(probe)
    finally:
        os.close(fd)


def test_on_close_runs_last_registered_first_before_the_release(tmp_path: Path) -> None:
    order: list[str] = []
    data = DataDir.open(tmp_path)

    def closing(name: str) -> None:
        with pytest.raises(DataDirLocked):  # still owned while the closers run
            DataDir.open(tmp_path)
        order.append(name)
        if name == "store":
            raise RuntimeError("a closer failed")

    data.on_close(lambda: closing("log"))
    data.on_close(lambda: closing("store"))
    with pytest.raises(RuntimeError, match="failed"):
        data.close()
    assert order == ["store", "log"]  # the failure did not keep the others from running
    assert data.closed
    DataDir.open(tmp_path).close()  # released all the same


def test_key_refusals_are_typed_with_a_remedy(tmp_path: Path) -> None:
    key = tmp_path / RUNTIME_KEY
    key.write_bytes(b"k" * 32)
    key.chmod(0o644)
    with DataDir.open(tmp_path) as data, pytest.raises(DataDirError) as info:
        data.runtime_key()
    assert (info.value.code, info.value.file) == ("KEY_INVALID", key)
    assert "0644" in info.value.message and "chmod 600" in info.value.remedy
