"""The runtime's data directory: one owner process, and the runtime key.

Layout (documented in ``docs/data-directory.md``)::

    DATA_DIR/                 0700
      owner.lock              flock()ed by the owner; JSON {"pid", "host", "startedAt"}
      runtime.key             32 random bytes, 0600, created once
      key.check               the check value of the fingerprint key in use (servers.store.keycheck)
      dispatch.sqlite         the dispatch store (servers.store.sqlite.store), with -wal and -shm
      decisions.cbor          the decision log (servers.log.decision_log)

Ownership is ``flock(LOCK_EX | LOCK_NB)`` on the directory itself (so that unlinking
``owner.lock`` takes nothing away) and on ``owner.lock``, both held for the life of the
process. The kernel releases them when the owner dies, however it dies, so a dead owner is
reclaimed by the next opener; the JSON in the file is information for the refusal message,
never the lock itself. A file left by a dead owner is simply overwritten.
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import os
import re
import secrets
import socket
import stat
import threading
import time
import weakref
from collections.abc import Callable, Iterable
from pathlib import Path
from types import TracebackType
from typing import Any

from policy.diagnostic import Diagnostic, DiagnosticError, Location
from policy.json.strict import JsonError, dump_bytes, loads

OWNER_LOCK = "owner.lock"
RUNTIME_KEY = "runtime.key"
KEY_CHECK = "key.check"
DISPATCH_DB = "dispatch.sqlite"
DECISION_LOG = "decisions.cbor"

KEY_BYTES = 32
CHECK_BYTES = 65
"""``key.check``: 64 lowercase hex digits and a newline."""
_READ_OWNER_TRIES = 20
_READ_OWNER_PAUSE_S = 0.025


class DataDirError(DiagnosticError):
    """The data directory cannot be used: a typed refusal with a ``code``, the ``file`` at
    fault, what is wrong (``message``) and what the operator can do (``remedy``), carried as
    one diagnostic (the remedy its hint)."""

    def __init__(self, file: Path, code: str, message: str, remedy: str = "") -> None:
        self.file = Path(file)
        self.code = code
        self.message = message
        self.remedy = remedy
        where = Location(file=str(file))
        super().__init__(
            [Diagnostic(code=code, message=message, location=where, hint=remedy or None)]
        )


class DataDirLocked(DataDirError):
    """Another live process owns the data directory."""

    def __init__(self, path: Path, pid: int, host: str, *, running_here: bool | None) -> None:
        self.path = path
        self.pid = pid
        self.host = host
        if pid <= 0:
            message = (
                f"data directory `{path}` is owned by another process (its `{OWNER_LOCK}` is"
                " missing or unreadable, so its pid is not known)"
            )
        else:
            message = f"data directory `{path}` is owned by pid {pid} on host `{host}`"
        if running_here is False:
            message += (
                " (that pid is not running here: the lock is held by a process that inherited"
                " it, or by one in another PID namespace)"
            )
        super().__init__(path, "DATA_DIR_LOCKED", message, "stop the owner first")


KEY_INVALID = "KEY_INVALID"
KEY_REMEDY = (
    f"restore `{RUNTIME_KEY}` from a backup of this data directory (a 32-byte file, mode"
    " 0600, owned by this user; `chmod 600` mends the mode); every fingerprint in the store"
    " and the log was made with it"
)


CHECK_REMEDY = (
    f"restore `{KEY_CHECK}` from a backup of this data directory (65 bytes, mode 0600, owned"
    " by this user; `chmod 600` mends the mode), or remove it if the key in use is the one"
    " its fingerprints were made with: the next start writes it again"
)


def _bad_key(path: Path, message: str) -> DataDirError:
    return DataDirError(path, KEY_INVALID, message, KEY_REMEDY)


def _bad_check(path: Path, message: str) -> DataDirError:
    return DataDirError(path, KEY_INVALID, message, CHECK_REMEDY)


def _now_ms() -> int:
    return time.time_ns() // 1_000_000


def _pid_running(pid: int) -> bool:
    if pid <= 0:
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # it exists, it is someone else's
        return True
    return True


def _fsync_dir(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def _write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view) :]


class DataDir:
    """An owned data directory. ``DataDir.open(path)`` or raise :class:`DataDirLocked`.

    Ownership is two ``flock`` locks held for the life of the owner: one on the directory
    itself (a descriptor opened ``O_RDONLY | O_DIRECTORY``), which no unlinking or renaming
    of a file inside can take away, and one on ``owner.lock``, whose JSON names the owner."""

    path: Path

    def __init__(self, path: Path, dir_fd: int, lock_fd: int) -> None:
        self.path = path
        self._dir_fd = dir_fd
        self._lock_fd = lock_fd
        self._key: bytes | None = None
        self._key_lock = threading.Lock()
        self._closers: list[Callable[[], None]] = []
        _OPEN.add(self)

    @classmethod
    def open(cls, path: str | Path) -> DataDir:
        """Create the directory (0700) if needed and take ownership of it."""
        root = Path(path).absolute()
        existed = root.exists()
        root.mkdir(mode=0o700, parents=True, exist_ok=True)
        if not existed:
            os.chmod(root, 0o700)  # mkdir's mode is filtered by the umask; make it exact
        dir_fd = _lock_directory(root)
        try:
            lock_fd = _lock_owner_file(root)
        except BaseException:
            os.close(dir_fd)  # closing the only descriptor releases the lock
            raise
        return cls(root, dir_fd, lock_fd)

    @property
    def store_path(self) -> Path:
        return self.path / DISPATCH_DB

    @property
    def log_path(self) -> Path:
        return self.path / DECISION_LOG

    @property
    def key_path(self) -> Path:
        return self.path / RUNTIME_KEY

    @property
    def key_check_path(self) -> Path:
        return self.path / KEY_CHECK

    def has_runtime_key(self) -> bool:
        """Whether ``runtime.key`` exists (any kind of file: a bad one is refused on use)."""
        return os.path.lexists(self.key_path)

    def runtime_key(self) -> bytes:
        """The 32-byte runtime key, created once (mode 0600) and read afterwards."""
        with self._key_lock:
            self._check_open()
            if self._key is None:
                if not self.has_runtime_key():
                    _create_private(self.path, RUNTIME_KEY, secrets.token_bytes(KEY_BYTES))
                self._key = _read_private(self.key_path, KEY_BYTES, _bad_key)
            return self._key

    def key_check(self) -> str | None:
        """The check value ``key.check`` records (None: there is none); a file that is not
        one is refused as a bad key file is (``KEY_INVALID``)."""
        self._check_open()
        path = self.key_check_path
        if not os.path.lexists(path):
            return None
        text = _read_private(path, CHECK_BYTES, _bad_check).decode("ascii", "replace")
        if not re.fullmatch(r"[0-9a-f]{64}\n", text):
            raise _bad_check(path, f"`{path}` does not hold 64 lowercase hex digits")
        return text[:-1]

    def record_key_check(self, value: str) -> None:
        """Write ``value`` to ``key.check`` (0600, atomically, replacing an earlier one)."""
        self._check_open()
        if not re.fullmatch(r"[0-9a-f]{64}", value):
            raise ValueError("a check value is 64 lowercase hex digits")
        _create_private(self.path, KEY_CHECK, (value + "\n").encode("ascii"), replace=True)

    def on_close(self, close: Callable[[], None]) -> None:
        """Run ``close`` in :meth:`close` before ownership is released (the last registered
        first): what writes to the directory stops before another owner can start."""
        self._check_open()
        self._closers.append(close)

    def close(self) -> None:
        """Run the :meth:`on_close` callables, then release ownership. Idempotent."""
        if self._lock_fd < 0:
            return
        closers, self._closers = self._closers, []
        try:
            _run_all(reversed(closers))
        finally:
            fd, dir_fd = self._lock_fd, self._dir_fd
            self._lock_fd = self._dir_fd = -1
            _OPEN.discard(self)
            _release(fd, dir_fd)

    @property
    def closed(self) -> bool:
        return self._lock_fd < 0

    def _check_open(self) -> None:
        if self._lock_fd < 0:
            raise DataDirError(self.path, "DATA_DIR_CLOSED", "the data directory is closed")

    def _forget_after_fork(self) -> None:
        """In a forked child: drop the inherited descriptors without unlocking (``LOCK_UN``
        would release the parent's locks, which share the open file descriptions)."""
        fds = (self._lock_fd, self._dir_fd)
        self._lock_fd = self._dir_fd = -1
        self._closers = []
        for fd in fds:
            if fd >= 0:
                with contextlib.suppress(OSError):
                    os.close(fd)

    def __enter__(self) -> DataDir:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()


_OPEN: weakref.WeakSet[DataDir] = weakref.WeakSet()


def _after_fork_in_child() -> None:
    """A forked child must never keep the lock alive after its parent dies."""
    for data_dir in list(_OPEN):
        data_dir._forget_after_fork()
    _OPEN.clear()


os.register_at_fork(after_in_child=_after_fork_in_child)


def _run_all(closers: Iterable[Callable[[], None]]) -> None:
    """Call each; the first exception is raised once all have run."""
    failed: BaseException | None = None
    for close in closers:
        try:
            close()
        except BaseException as exc:
            failed = failed or exc
    if failed is not None:
        raise failed


def _release(fd: int, dir_fd: int) -> None:
    try:
        os.ftruncate(fd, 0)  # no owner now; a stale file would be harmless anyway
        fcntl.flock(fd, fcntl.LOCK_UN)
    finally:
        os.close(fd)
        with contextlib.suppress(OSError):
            fcntl.flock(dir_fd, fcntl.LOCK_UN)
        os.close(dir_fd)


def _busy(exc: OSError) -> bool:
    return exc.errno in (errno.EWOULDBLOCK, errno.EAGAIN, errno.EACCES)


def _lock_directory(root: Path) -> int:
    """``flock`` the directory itself; refused with the owner's record if it is held."""
    fd = os.open(root, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError as exc:
        os.close(fd)
        if not _busy(exc):
            raise
        raise _locked(root, _read_owner_file(root / OWNER_LOCK)) from None
    return fd


def _lock_owner_file(root: Path) -> int:
    """``flock`` ``owner.lock`` (also held by runtimes that lock only the file) and write the
    owner's record into it."""
    fd = _open_lock_file(root / OWNER_LOCK)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError as exc:
        if not _busy(exc):
            os.close(fd)
            raise
        owner = _read_owner(fd)
        os.close(fd)
        raise _locked(root, owner) from None
    try:
        _write_owner(fd)
    except BaseException:
        os.close(fd)
        raise
    return fd


def _open_lock_file(path: Path) -> int:
    flags = os.O_RDWR | os.O_CREAT | os.O_CLOEXEC | os.O_NOFOLLOW
    try:
        fd = os.open(path, flags, 0o600)
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            raise _bad_lock_file(path, "is a symbolic link") from None
        raise
    if not stat.S_ISREG(os.fstat(fd).st_mode):
        os.close(fd)
        raise _bad_lock_file(path, "is not a regular file")
    return fd


def _bad_lock_file(path: Path, what: str) -> DataDirError:
    remedy = f"remove `{path}`: the owner's lock is the runtime's to create"
    return DataDirError(path, "LOCK_FILE_INVALID", f"`{path}` {what}", remedy)


def _write_owner(fd: int) -> None:
    owner = {"pid": os.getpid(), "host": socket.gethostname(), "startedAt": _now_ms()}
    data = dump_bytes(owner) + b"\n"
    os.ftruncate(fd, 0)
    os.pwrite(fd, data, 0)
    os.fsync(fd)


def _parse_owner(data: bytes) -> dict[str, Any] | None:
    try:
        owner = loads(data)
    except JsonError:
        return None
    if not isinstance(owner, dict):
        return None
    pid, host = owner.get("pid"), owner.get("host")
    if type(pid) is not int or not isinstance(host, str):
        return None
    return owner


def _read_owner(fd: int) -> dict[str, Any]:
    """The owner's record; the owner may be between truncating and rewriting it, so retry."""
    for _ in range(_READ_OWNER_TRIES):
        owner = _parse_owner(os.pread(fd, 4096, 0))
        if owner is not None:
            return owner
        time.sleep(_READ_OWNER_PAUSE_S)
    return _UNKNOWN_OWNER


_UNKNOWN_OWNER: dict[str, Any] = {"pid": 0, "host": "unknown"}


def _read_owner_file(path: Path) -> dict[str, Any]:
    """The record of an owner whose lock on the directory is held: ``owner.lock`` may be
    missing (unlinked under its owner) or not yet written."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC | os.O_NOFOLLOW)
    except OSError:
        return _UNKNOWN_OWNER
    try:
        return _read_owner(fd)
    finally:
        os.close(fd)


def _locked(root: Path, owner: dict[str, Any]) -> DataDirLocked:
    pid, host = int(owner["pid"]), str(owner["host"])
    running = _pid_running(pid) if host == socket.gethostname() else None
    return DataDirLocked(root, pid, host, running_here=running)


def _create_private(root: Path, name: str, data: bytes, *, replace: bool = False) -> None:
    """Write ``data`` to a temporary file (0600), fsync it, then link it into place as
    ``name`` (``link``, like ``O_CREAT | O_EXCL``, never replaces an existing file: the runtime
    key), or rename it onto ``name`` (``replace``): the name only ever appears whole."""
    tmp = root / (name + ".tmp")
    tmp.unlink(missing_ok=True)  # a crash left it; we own the directory
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC | os.O_NOFOLLOW
    fd = os.open(tmp, flags, 0o600)
    try:
        _write_all(fd, data)
        os.fsync(fd)
    finally:
        os.close(fd)
    try:
        if replace:
            os.replace(tmp, root / name)
        else:
            os.link(tmp, root / name)
    except FileExistsError:
        pass
    finally:
        tmp.unlink(missing_ok=True)
    _fsync_dir(root)


Refusal = Callable[[Path, str], DataDirError]


def _read_private(path: Path, size: int, bad: Refusal) -> bytes:
    """The ``size`` bytes of the private file at ``path`` (regular, not a link, this user's,
    no access for group or others), or ``bad``'s refusal."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC | os.O_NOFOLLOW | os.O_NONBLOCK)
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            raise bad(path, f"`{path}` is a symbolic link") from None
        raise bad(path, f"`{path}` cannot be read: {exc.strerror or exc}") from None
    try:
        info = os.fstat(fd)
        _check_private_file(path, info, size, bad)
        data = os.read(fd, size + 1)
    finally:
        os.close(fd)
    if len(data) != size:
        raise bad(path, f"`{path}` holds {len(data)} bytes, not {size}")
    return data


def _check_private_file(path: Path, info: os.stat_result, size: int, bad: Refusal) -> None:
    if not stat.S_ISREG(info.st_mode):
        raise bad(path, f"`{path}` is not a regular file")
    if info.st_mode & 0o077:
        mode = stat.S_IMODE(info.st_mode)
        message = f"`{path}` has mode {mode:04o}: group and others must have no access"
        raise bad(path, message)
    if info.st_uid != os.geteuid():
        raise bad(path, f"`{path}` is owned by uid {info.st_uid}, not by this user")
    if info.st_size != size:
        raise bad(path, f"`{path}` holds {info.st_size} bytes, not {size}")
