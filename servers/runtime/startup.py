"""Everything the runtime checks before it accepts a request, in one place.

``prepare`` loads and verifies the build, the credentials, the bindings and the approval token,
then takes the data directory. Each refusal is an exception the CLI maps to its exit code:
:class:`~compiler.diagnostics.CompileError` and :class:`~servers.config.files.ConfigError` (2),
:class:`~servers.store.datadir.DataDirLocked` (3).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path

import keyring

from compiler.build import Build, load_build
from servers.config.files import (
    Bindings,
    Credentials,
    approval_token,
    load_bindings,
    load_credentials,
)
from servers.store.datadir import DataDir

Clock = Callable[[], int]


def wall_clock() -> int:
    """Milliseconds since the epoch: the only clock the runtime reads."""
    return time.time_ns() // 1_000_000


@dataclass(frozen=True)
class Prepared:
    build: Build
    bindings: Bindings
    credentials: Credentials
    data: DataDir
    fingerprint_key: bytes = field(repr=False)
    approval_token: str | None = field(default=None, repr=False)
    require_turn: bool = False
    clock: Clock = wall_clock


def prepare(
    *,
    build_dir: str | Path,
    bindings_path: str | Path,
    credentials_path: str | Path,
    data_dir: str | Path,
    env: Mapping[str, str],
    require_turn: bool = False,
    clock: Clock = wall_clock,
    keyring_get: Callable[[str, str], str | None] = keyring.get_password,
) -> Prepared:
    build: Build = load_build(build_dir)
    credentials: Credentials = load_credentials(credentials_path, env, keyring_get=keyring_get)
    bindings: Bindings = load_bindings(bindings_path, build.project, env, keyring_get)
    token = approval_token(env, credentials, required=build.project.has_tools)
    data = DataDir.open(data_dir)
    key = bindings.trace_key if bindings.trace_key is not None else data.runtime_key()
    return Prepared(
        build=build,
        bindings=bindings,
        credentials=credentials,
        data=data,
        fingerprint_key=key,
        approval_token=token,
        require_turn=require_turn,
        clock=clock,
    )
