"""The processes and stores of ``python -m bench replicas``: the PostgreSQL server and one new
database per configuration, the run's files (bindings with a shared ``traceKeyRef``) and the
client processes."""

from __future__ import annotations

import contextlib
import importlib
import json
import os
import secrets
import sys
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit, urlunsplit

from bench.harness import REPO, Process, proc_stat
from bench.replicas.config import (
    DATABASE_PREFIX,
    MACHINE_PG_URL,
    PG_URL_ENV,
    TRACE_KEY,
    TRACE_KEY_ENV,
    Load,
)
from bench.runtime import APP_TOKEN, LOAD_TOKEN_ENV, Setup, prepare_setup

# ================================================================ PostgreSQL


@dataclass
class PgServer:
    """The server the run creates its databases on."""

    url: str
    kind: str  # "configured", "machine" or "private"
    settings: dict[str, str]
    postmaster: int | None
    stop: Callable[[], None] = lambda: None

    @property
    def durable(self) -> bool:
        return self.settings.get("fsync") == "on" and self.settings.get("synchronous_commit") in (
            "on",
            "remote_write",
            "remote_apply",
        )


def _answers(url: str) -> bool:
    import psycopg

    try:
        with psycopg.connect(url, connect_timeout=3, autocommit=True) as conn:
            conn.execute("SELECT 1")
    except (psycopg.Error, OSError):
        return False
    return True


def _private_server() -> Any:
    """A private server started from the installed binaries, as the tests start one."""
    if str(REPO) not in sys.path:  # the tests' helpers are the package tests.support
        sys.path.insert(0, str(REPO))
    try:
        support: Any = importlib.import_module("tests.support.pg_support")
        return support.start_private_server()
    except Exception as error:  # no binaries, or they did not start
        raise RuntimeError(
            f"no PostgreSQL server: nothing answered at {MACHINE_PG_URL}, "
            f"{PG_URL_ENV} is not set, and a private server did not start ({error})"
        ) from None


def find_server() -> PgServer:
    """``SEIF_BENCH_PG_URL``, else the machine's server, else a private one (fsync off)."""
    import psycopg

    stop: Callable[[], None] = lambda: None  # noqa: E731
    configured = os.environ.get(PG_URL_ENV)
    if configured:
        url, kind = configured, "configured"
    elif _answers(MACHINE_PG_URL):
        url, kind = MACHINE_PG_URL, "machine"
    else:
        private = _private_server()
        url, kind, stop = private.url, "private", private.stop
    names = ("server_version", "fsync", "synchronous_commit", "full_page_writes",
             "wal_sync_method", "commit_delay", "max_connections", "shared_buffers")  # fmt: skip
    with psycopg.connect(url, connect_timeout=5, autocommit=True) as conn:
        settings = {name: str(_one(conn, f"SHOW {name}")) for name in names}
        backend = int(_one(conn, "SELECT pg_backend_pid()"))
    postmaster = parent_of(backend)  # None unless the server runs on this machine
    if postmaster is not None and not _is_postgres(postmaster):
        postmaster = None
    return PgServer(url, kind, settings, postmaster, stop)


def _one(conn: Any, query: str) -> Any:
    row = conn.execute(query).fetchone()
    assert row is not None
    return row[0]


def parent_of(pid: int) -> int | None:
    found = proc_stat(f"/proc/{pid}/stat")
    return None if found is None else found.ppid


def _is_postgres(pid: int) -> bool:
    try:
        return b"postgres" in Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return False


def with_database(url: str, name: str) -> str:
    if url.startswith(("postgresql://", "postgres://")):
        return urlunsplit(urlsplit(url)._replace(path="/" + name))
    from psycopg.conninfo import make_conninfo

    return make_conninfo(url, dbname=name)


@contextlib.contextmanager
def new_database(server: PgServer) -> Iterator[tuple[str, str]]:
    """A new empty database (its URL and name), dropped afterwards (its sessions ended)."""
    import psycopg
    from psycopg import sql

    name = DATABASE_PREFIX + secrets.token_hex(6)
    create = sql.SQL(
        "CREATE DATABASE {} TEMPLATE template0 ENCODING 'UTF8' LC_COLLATE 'C' LC_CTYPE 'C'"
    ).format(sql.Identifier(name))
    with psycopg.connect(server.url, connect_timeout=5, autocommit=True) as conn:
        conn.execute(create)
    try:
        yield with_database(server.url, name), name
    finally:
        drop = sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(sql.Identifier(name))
        with psycopg.connect(server.url, connect_timeout=5, autocommit=True) as conn:
            conn.execute(drop)


def pg_counters(server: PgServer) -> dict[str, int]:
    """The server's WAL position (bytes) and its next transaction id: exact at once (unlike the
    statistics views, which backends update up to seconds late), but for the whole server, so
    any other database's writes count too."""
    import psycopg

    with psycopg.connect(server.url, connect_timeout=5, autocommit=True) as conn:
        row = conn.execute(
            "SELECT pg_wal_lsn_diff(pg_current_wal_lsn(), '0/0')::bigint,"
            " pg_snapshot_xmax(pg_current_snapshot())::text::bigint"
        ).fetchone()
    assert row is not None
    return {"wal_bytes": int(row[0]), "transaction_ids": int(row[1])}


def pg_stored(url: str) -> dict[str, Any]:
    """Intents per status and decision-log records per event in a replicas' database."""
    import psycopg

    with psycopg.connect(url, connect_timeout=5, autocommit=True) as conn:
        intents = conn.execute("SELECT status, count(*) FROM intents GROUP BY status").fetchall()
        events = conn.execute("SELECT event, count(*) FROM decision_log GROUP BY event").fetchall()
    return {
        "intents": {str(s): int(c) for s, c in intents},
        "log_events": {str(e): int(c) for e, c in events},
    }


# ================================================================ the files and the clients


def prepare(work: Path) -> Setup:
    """The run's files as :func:`bench.runtime.prepare_setup` writes them, the bindings with
    a ``traceKeyRef`` (the same key in every replica's environment)."""
    setup = prepare_setup(work)
    setup.env[TRACE_KEY_ENV] = TRACE_KEY
    setup.trace_key_ref = f"env:{TRACE_KEY_ENV}"
    return setup


class Client(Process):
    """A client process: ``READY`` once its contexts are resolved and its warm-up done; its
    timed phase starts at :meth:`go`; :meth:`result` is its JSON line."""

    def __init__(self, argv: list[str], env: dict[str, str], log: Path) -> None:
        super().__init__("the client", argv, env, log, stdin=True)

    def _line(self, timeout: float) -> str:
        line = self.next_line(timeout)
        if line is None:
            self.kill()
            raise RuntimeError(f"the client failed or timed out: {self.tail()}")
        return line

    def ready(self, timeout: float = 600.0) -> dict[str, Any]:
        line = self._line(timeout)
        if not line.startswith("READY "):
            raise RuntimeError(f"the client said {line[:200]!r}")
        ready: dict[str, Any] = json.loads(line[6:])
        return ready

    def go(self) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.write("GO\n")
        self.proc.stdin.flush()

    def result(self, timeout: float) -> dict[str, Any]:
        result: dict[str, Any] = json.loads(self._line(timeout))
        self.proc.wait(30)
        return result


def client_argv(urls: list[str], load: Load, setup: Setup, index: int) -> list[str]:
    share = load.concurrency // load.clients + (index < load.concurrency % load.clients)
    requests = load.requests // load.clients + (index < load.requests % load.clients)
    argv = [sys.executable, "-m", "bench.replicas", "load"]
    for url in urls:
        argv += ["--url", url]
    return [
        *argv,
        *("--concurrency", str(share), "--requests", str(requests)),
        *("--warmup", str(max(1, load.warmup // load.clients))),
        *("--duration", str(load.duration_s)),
        *("--calls-per-context", str(setup.calls_per_context)),
        *("--name", f"c{index}"),
    ]


def start_clients(urls: list[str], load: Load, setup: Setup, tag: str) -> list[Client]:
    """The client processes of one configuration, on the runtimes at ``urls``."""
    env = {**setup.env, LOAD_TOKEN_ENV: APP_TOKEN}
    return [
        Client(client_argv(urls, load, setup, k), env, setup.work / f"{tag}-c{k}.log")
        for k in range(load.clients)
    ]
