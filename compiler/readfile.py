"""Reading a file a person names: a regular file of bounded size, opened without blocking.

A project, bindings or configuration file is read whole, so the path must not name what never
ends (``/dev/zero``), what blocks (a FIFO with no writer: a plain ``open`` waits for one), or a
directory or socket. :func:`read_regular` opens the path with ``O_NONBLOCK`` (so opening a FIFO
returns at once), then checks the *opened* descriptor with ``fstat`` (no window between a check
and the open: a symbolic link is followed to what it names, and a link to a device is a device),
and reads at most :data:`MAX_FILE_BYTES`. A refusal is an :class:`OSError` (its ``strerror``
says what is wrong), so every reader's ``except OSError`` reports it as it reports a missing
file.
"""

from __future__ import annotations

import errno
import os
import stat

MAX_FILE_BYTES = 4 << 20
"""The largest project, bindings or configuration file read (4 MiB, as a CA bundle of
``servers.config.tls``): the reference project is 29 KiB, a project's tools at most 64 KiB
(``CATALOGUE_TOO_LARGE``), a bindings entry about 200 bytes."""

_KINDS = (
    (stat.S_ISDIR, "a directory"),
    (stat.S_ISFIFO, "a FIFO"),
    (stat.S_ISSOCK, "a socket"),
    (stat.S_ISCHR, "a character device"),
    (stat.S_ISBLK, "a block device"),
)


class FileRefused(OSError):
    """A path that names no regular file, or a file over the bound (``strerror`` says which)."""


class NotRegularFile(FileRefused):
    """The path names a directory, a FIFO, a socket or a device (after following links)."""


class FileTooLarge(FileRefused):
    """The file holds more than the bound."""


def read_regular(path: str | os.PathLike[str], limit: int = MAX_FILE_BYTES) -> bytes:
    """The bytes of the regular file at ``path``; :class:`NotRegularFile` or
    :class:`FileTooLarge` (both :class:`OSError`), or the ``OSError`` of the open."""
    fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_NOCTTY | os.O_CLOEXEC)
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            raise NotRegularFile(errno.EINVAL, f"not a regular file ({_kind(info.st_mode)})")
        if info.st_size > limit:
            raise _too_large(limit)
        data = _read_up_to(fd, limit + 1)
    finally:
        os.close(fd)
    if len(data) > limit:  # it grew since the fstat
        raise _too_large(limit)
    return data


def reason(exc: OSError | UnicodeDecodeError) -> str:
    """What a failed read says to the person who named the file."""
    if isinstance(exc, UnicodeDecodeError):
        return "not UTF-8 text"
    return exc.strerror or str(exc)


def _kind(mode: int) -> str:
    return next((name for test, name in _KINDS if test(mode)), "not a file")


def _too_large(limit: int) -> FileTooLarge:
    whole_mib = limit >= 1 << 20 and limit % (1 << 20) == 0
    shown = f"{limit >> 20} MiB" if whole_mib else f"{limit} bytes"
    return FileTooLarge(errno.EFBIG, f"larger than {shown}")


def _read_up_to(fd: int, most: int) -> bytes:
    chunks: list[bytes] = []
    left = most
    while left > 0:
        chunk = os.read(fd, min(left, 1 << 20))
        if not chunk:
            break
        chunks.append(chunk)
        left -= len(chunk)
    return b"".join(chunks)
