"""Everything the runtime checks before it accepts a request, in one place.

``prepare`` loads and verifies the build, the credentials, the bindings and the approval token,
then takes the data directory and opens its store and log (checked for damage and reconciled:
``servers.store.sqlite.opening``). Each refusal is an exception the CLI maps to its exit code:
:class:`StartRefused` (every problem of the build and configuration files, each a diagnostic
naming its file) and :class:`~servers.store.sqlite.datadir.DataDirError` (2),
:class:`~servers.store.sqlite.datadir.DataDirLocked` (3).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path
from typing import TypeVar

import keyring

from compiler.builds.build import Build, load_build
from compiler.diagnostics import CompileError
from policy.diagnostic import DiagnosticError
from servers.config.files import (
    Bindings,
    ConfigError,
    Credentials,
    approval_token,
    load_bindings,
    load_credentials,
)
from servers.runtime.shadow import BACKLOG
from servers.store.interface import Backend, DispatchStore, RecordLog
from servers.store.memory import MemoryBackend
from servers.store.rows import Reconciled
from servers.store.sqlite.backend import LocalBackend
from servers.store.sqlite.datadir import DataDir, DataDirError

Clock = Callable[[], int]
MEMORY = "memory:"
"""The store URL of a store in memory (``servers.store.memory``)."""


def wall_clock() -> int:
    """Milliseconds since the epoch: the only clock the runtime reads."""
    return time.time_ns() // 1_000_000


@dataclass(frozen=True)
class Prepared:
    """Everything checked, and the backend open (it closes with :meth:`close`)."""

    build: Build
    bindings: Bindings
    credentials: Credentials
    backend: Backend
    """The one backend chosen at start: a data directory, or a replica's share of a database."""
    approval_token: str | None = field(default=None, repr=False)
    require_turn: bool = False
    clock: Clock = wall_clock
    shadow: Build | None = None
    """A candidate build to evaluate in shadow (``--shadow``), verified like ``build``."""
    shadow_backlog: int = BACKLOG
    """Decisions waiting for the shadow at most (``--shadow-backlog``)."""
    upstream_stderr: Path | None = None
    """Where stdio upstreams' stderr goes, one file per upstream (``--upstream-stderr``);
    None: discarded."""

    @property
    def store(self) -> DispatchStore:
        return self.backend.store

    @property
    def log(self) -> RecordLog:
        return self.backend.log

    @property
    def reconciled(self) -> Reconciled:
        return self.backend.reconciled

    def close(self) -> None:
        """Release the backend (a data directory's lock last)."""
        self.backend.close()


def prepare(
    *,
    build_dir: str | Path,
    bindings_path: str | Path,
    credentials_path: str | Path,
    data_dir: str | Path | None = None,
    store_url: str | None = None,
    replica_id: str | None = None,
    lease_ms: int = 15_000,
    env: Mapping[str, str],
    require_turn: bool = False,
    clock: Clock = wall_clock,
    keyring_get: Callable[[str, str], str | None] = keyring.get_password,
    shadow_dir: str | Path | None = None,
    shadow_backlog: int = BACKLOG,
    upstream_stderr: str | Path | None = None,
) -> Prepared:
    """Everything checked, the store open: the SQLite one of ``data_dir``, or (``store_url``)
    a replica's share of a PostgreSQL database (``servers.store.postgres.backend``), or
    ``memory:`` (:data:`MEMORY`: nothing kept across a restart). ``shadow_dir``: a candidate
    build to load (verified; its problems are refused with the others)."""
    build, credentials, bindings, token = _configuration(
        build_dir, bindings_path, credentials_path, env, keyring_get
    )
    shadow = None
    if shadow_dir is not None:
        try:
            shadow = _load_build(shadow_dir)
        except CompileError as exc:
            raise StartRefused([exc]) from None
    checked = partial(
        Prepared,
        upstream_stderr=None if upstream_stderr is None else Path(upstream_stderr),
        shadow=shadow,
        shadow_backlog=shadow_backlog,
        build=build,
        bindings=bindings,
        credentials=credentials,
        approval_token=token,
        require_turn=require_turn,
        clock=clock,
    )
    if store_url == MEMORY:
        return checked(backend=MemoryBackend.open(bindings.trace_key))
    if store_url is not None:
        from servers.store.postgres.backend import prepare_replica  # noqa: PLC0415 -- loads psycopg

        try:
            found = prepare_replica(
                store_url, replica_id, bindings, str(bindings_path), clock(), lease_ms
            )
        except ConfigError as exc:
            raise StartRefused([exc]) from None
        return checked(backend=found)
    if data_dir is None:
        raise ValueError("a data directory or a store URL is required")
    data = _own(Path(data_dir))  # only once every file is accepted: a refusal creates nothing
    return checked(backend=LocalBackend.open(data, trace_key=bindings.trace_key, now_ms=clock()))


class StartRefused(DiagnosticError):
    """Every problem of the runtime's files, found together: the ``diagnostics`` of each
    refusal (a :class:`~compiler.diagnostics.CompileError` of a build, a
    :class:`~servers.config.files.ConfigError`), each naming its file, in the order build,
    credentials, bindings, approval token."""

    def __init__(self, errors: Iterable[DiagnosticError]) -> None:
        super().__init__([d for error in errors for d in error.diagnostics])


def _load_build(build_dir: str | Path) -> Build:
    """:func:`~compiler.builds.build.load_build`, its refusal's diagnostics naming ``build_dir``."""
    try:
        return load_build(build_dir)
    except CompileError as exc:
        located = [d.moved(file=str(build_dir)) for d in exc.diagnostics]
        raise CompileError(located) from None


def _configuration(
    build_dir: str | Path,
    bindings_path: str | Path,
    credentials_path: str | Path,
    env: Mapping[str, str],
    keyring_get: Callable[[str, str], str | None],
) -> tuple[Build, Credentials, Bindings, str | None]:
    """The build, credentials, bindings and approval token, or :class:`StartRefused` with the
    problems of all of them (the bindings, and the objectives the credentials name, are checked
    against the build, so a build that does not load leaves them unchecked)."""
    errors: list[DiagnosticError] = []
    build = _attempt(errors, lambda: _load_build(build_dir))
    objectives = build.project.objective_by_id.keys() if build is not None else None
    credentials = _attempt(
        errors,
        lambda: load_credentials(
            credentials_path, env, keyring_get=keyring_get, objectives=objectives
        ),
    )
    bindings = token = None
    if build is not None:
        bindings = _attempt(
            errors, lambda: load_bindings(bindings_path, build.project, env, keyring_get)
        )
        if credentials is not None:
            required = build.project.has_tools
            token = _attempt(errors, lambda: approval_token(env, credentials, required=required))
    if errors:
        raise StartRefused(errors)
    assert build is not None and credentials is not None and bindings is not None
    return build, credentials, bindings, token


T = TypeVar("T")


def _attempt(errors: list[DiagnosticError], load: Callable[[], T]) -> T | None:
    try:
        return load()
    except (CompileError, ConfigError) as exc:
        errors.append(exc)
        return None


def _own(path: Path) -> DataDir:
    try:
        return DataDir.open(path)
    except OSError as exc:
        message = f"`{path}` cannot be used as the data directory: {exc.strerror or exc}"
        remedy = "give `--data` a directory this user can create, read and write (mode 0700)"
        raise DataDirError(path, "DATA_DIR_UNUSABLE", message, remedy) from None
