"""A real PostgreSQL server for the store tests, and a new empty database for each test.

The server is found once per process (`server_url`): ``SEIF_TEST_PG_URL`` when set; else the
machine's server at 127.0.0.1:5432 when it answers (user ``postgres``, trust authentication);
else a private one started from the installed binaries (``initdb`` and ``pg_ctl`` on PATH or in
/usr/lib/postgresql/*/bin) in a temporary directory, stopped and removed at exit; else none.
``.ci/run`` installs Debian's ``postgresql`` when neither a server nor the binaries are there.

Tests ask for the ``pg_url`` fixture (a new database, dropped afterwards) or ``pg_databases``
(a session-wide factory of more). Without a server they skip, or fail when ``CI`` is set.

initdb and postgres refuse to run as root: as root, the private server runs as the ``postgres``
system user (else ``nobody``), through ``subprocess``'s ``user=``/``group=`` (no su or sudo),
in a temporary directory chowned to that user.
"""

from __future__ import annotations

import atexit
import contextlib
import functools
import os
import pwd
import re
import secrets
import shutil
import signal
import socket
import stat
import subprocess
import tempfile
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import NoReturn
from urllib.parse import urlsplit, urlunsplit

import psycopg
import pytest
from psycopg import sql
from psycopg.conninfo import conninfo_to_dict, make_conninfo

ENV_URL = "SEIF_TEST_PG_URL"
MACHINE_URL = "postgresql://postgres@127.0.0.1:5432/postgres"
CONNECT_TIMEOUT = 3  # seconds, for probing a server
START_TIMEOUT = 60  # seconds pg_ctl waits for a private server to accept connections
DATABASE_PREFIX = "seif_t_"
SUPERUSER = "postgres"  # the private server's superuser, so that its URLs read like the machine's

# a test server favours speed over durability; the listening settings follow (_configure)
FAST_SETTINGS = {"fsync": "off", "full_page_writes": "off", "synchronous_commit": "off"}


STARTED: list[PrivateServer] = []  # the private server `server_url` started, if it did


class PrivateServerError(RuntimeError):
    """The private server could not be set up or started (the message says why, with its log)."""


# --- finding a server ---------------------------------------------------------------------------


def answers(url: str, timeout: int = CONNECT_TIMEOUT) -> bool:
    """Whether a server at `url` accepts a connection and a query."""
    try:
        with psycopg.connect(url, connect_timeout=timeout, autocommit=True) as conn:
            conn.execute("SELECT 1")
    except (psycopg.Error, OSError):
        return False
    return True


def server_url() -> str | None:
    """The URL of a PostgreSQL server for tests, found once per process; None when there is none
    (`server_problem` says why)."""
    return _found()[0]


def server_problem() -> str:
    """Why `server_url` found no server ('' when it found one)."""
    return _found()[1]


@functools.cache
def _found() -> tuple[str | None, str]:
    configured = os.environ.get(ENV_URL)
    if configured:
        return configured, ""
    if answers(MACHINE_URL):
        return MACHINE_URL, ""
    tried = [f"nothing answered at {MACHINE_URL}"]
    if find_bin_dir() is None:
        tried.append(
            "no initdb on PATH or in /usr/lib/postgresql/*/bin (apt-get install postgresql)"
        )
        return None, "; ".join(tried)
    try:
        server = start_private_server()
    except PrivateServerError as error:
        tried.append(f"a private server did not start: {error}")
        return None, "; ".join(tried)
    atexit.register(server.stop)
    STARTED.append(server)
    return server.url, ""


# --- a private server from the installed binaries ------------------------------------------------


def find_bin_dir() -> Path | None:
    """The directory holding initdb, pg_ctl and postgres: initdb's on PATH (symlinks resolved, so
    that pg_ctl finds its postgres), else the newest /usr/lib/postgresql/*/bin."""
    candidates: list[Path] = []
    on_path = shutil.which("initdb")
    if on_path:
        candidates.append(Path(on_path).resolve().parent)
    debian = Path("/usr/lib/postgresql").glob("*/bin")
    candidates += sorted(debian, key=lambda p: _version_key(p.parent.name), reverse=True)
    for directory in candidates:
        if all(os.access(directory / tool, os.X_OK) for tool in ("initdb", "pg_ctl", "postgres")):
            return directory
    return None


def _version_key(name: str) -> tuple[int, ...]:
    return tuple(int(part) for part in re.findall(r"\d+", name)) or (0,)


@dataclass
class PrivateServer:
    """A server this process started; `stop` ends it (immediately) and removes its directory."""

    url: str
    directory: Path  # holds data/ (the cluster), the unix socket and the server's log
    bin_dir: Path
    user: str | None  # the OS user it runs as; None: this process's
    port: int
    owner_pid: int = field(default_factory=os.getpid)
    stopped: bool = False

    @property
    def data(self) -> Path:
        return self.directory / "data"

    def stop(self) -> None:
        """Stop the server (``pg_ctl stop -m immediate``) and remove its directory; only in the
        process that started it (a forked child inherits the atexit hook), once."""
        if self.stopped or os.getpid() != self.owner_pid:
            return
        self.stopped = True
        if self.data.exists():
            result = _run(
                [self.bin_dir / "pg_ctl", "stop", "-D", self.data, "-m", "immediate", "-w", "-s"],
                self.user,
                self.directory,
                check=False,
            )
            if result.returncode != 0:
                _kill_postmaster(self.data)
        shutil.rmtree(self.directory, ignore_errors=True)

    def __enter__(self) -> PrivateServer:
        return self

    def __exit__(self, *_: object) -> None:
        self.stop()


def start_private_server(bin_dir: Path | None = None) -> PrivateServer:
    """Start a new server from the installed binaries: initdb (trust authentication, superuser
    ``postgres``) in a new temporary directory, listening on a free loopback port with its unix
    socket in that directory. As root it runs as the ``postgres`` (else ``nobody``) OS user.
    The caller stops it (`PrivateServer.stop`, or use it as a context manager)."""
    bin_dir = bin_dir or find_bin_dir()
    if bin_dir is None:
        raise PrivateServerError("no initdb/pg_ctl/postgres found (apt-get install postgresql)")
    user = _unprivileged_user()
    directory = Path(tempfile.mkdtemp(prefix="seif-pg-", dir=_temp_base(user)))
    server = PrivateServer(url="", directory=directory, bin_dir=bin_dir, user=user, port=0)
    try:
        if user is not None:
            entry = pwd.getpwnam(user)
            os.chown(directory, entry.pw_uid, entry.pw_gid)
        initdb = [bin_dir / "initdb", "-D", server.data, "-U", SUPERUSER, "--auth=trust"]
        initdb += ["-E", "UTF8", "--no-locale", "--no-sync", "--no-instructions"]
        _run(initdb, user, directory)
        _start(server)
    except BaseException:
        server.stop()
        raise
    return server


def _start(server: PrivateServer, attempts: int = 3) -> None:
    """pg_ctl start on a free port; another port when that one was taken meanwhile."""
    log = server.directory / "server.log"
    for _ in range(attempts):
        server.port = _free_port()
        _configure(server)
        start = ["start", "-D", server.data, "-l", log, "-w", "-s", "-t", START_TIMEOUT]
        started = _run(
            [server.bin_dir / "pg_ctl", *start],
            server.user,
            server.directory,
            check=False,
        )
        text = log.read_text(errors="replace") if log.exists() else ""
        if started.returncode == 0:
            server.url = f"postgresql://{SUPERUSER}@127.0.0.1:{server.port}/postgres"
            return
        if "could not bind" not in text and "already in use" not in text:
            break
    raise PrivateServerError(f"pg_ctl start failed: {started.stdout}\n{text[-2000:]}")


def _configure(server: PrivateServer) -> None:
    # appended settings override earlier ones (a retry appends another port)
    settings = {
        **FAST_SETTINGS,
        "listen_addresses": "'127.0.0.1'",
        "port": str(server.port),
        "unix_socket_directories": "'" + str(server.directory).replace("'", "''") + "'",
    }
    with (server.data / "postgresql.conf").open("a") as conf:
        conf.write("\n# tests/support/pg_support.py\n")
        conf.writelines(f"{key} = {value}\n" for key, value in settings.items())


def _run(
    argv: Sequence[object], user: str | None, cwd: Path, *, check: bool = True
) -> subprocess.CompletedProcess[str]:
    """Run a PostgreSQL tool (as `user` when given), its output into a file rather than a pipe:
    the server pg_ctl starts outlives pg_ctl and would hold a pipe open."""
    env = {key: value for key, value in os.environ.items() if not key.startswith("PG")}
    env.update(HOME=str(cwd), LC_ALL="C")
    uid: int | None = None
    gid: int | None = None
    groups: list[int] | None = None
    if user is not None:
        entry = pwd.getpwnam(user)
        uid, gid, groups = entry.pw_uid, entry.pw_gid, []
    with tempfile.TemporaryFile("w+") as output:
        result = subprocess.run(
            [str(arg) for arg in argv],
            cwd=cwd,
            env=env,
            stdin=subprocess.DEVNULL,
            stdout=output,
            stderr=subprocess.STDOUT,
            text=True,
            check=False,
            user=uid,
            group=gid,
            extra_groups=groups,
        )
        output.seek(0)
        text = output.read()
    if check and result.returncode != 0:
        command = " ".join(str(arg) for arg in argv)
        raise PrivateServerError(f"{command} exited {result.returncode}: {text[-2000:]}")
    return subprocess.CompletedProcess(result.args, result.returncode, text, "")


def _unprivileged_user() -> str | None:
    """None when this process is not root; else the OS user the server runs as."""
    if os.geteuid() != 0:
        return None
    for name in ("postgres", "nobody"):
        with contextlib.suppress(KeyError):
            pwd.getpwnam(name)
            return name
    raise PrivateServerError("running as root, and there is no postgres or nobody user to run as")


def _temp_base(user: str | None) -> str:
    """The temporary directory's parent: the usual one, unless another user cannot reach it."""
    base = Path(tempfile.gettempdir()).resolve()
    if user is None:
        return str(base)
    reachable = all(p.stat().st_mode & stat.S_IXOTH for p in (base, *base.parents))
    return str(base) if reachable else "/tmp"


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
        return port


def _kill_postmaster(data: Path) -> None:
    """pg_ctl could not stop it: SIGQUIT (an immediate shutdown) to the pid in postmaster.pid."""
    with contextlib.suppress(OSError, ValueError, IndexError):
        pid = int((data / "postmaster.pid").read_text().split()[0])
        os.kill(pid, signal.SIGQUIT)


# --- databases -----------------------------------------------------------------------------------


def with_database(url: str, name: str) -> str:
    """`url` naming database `name` instead (a URL stays a URL; key=value conninfo stays one)."""
    if url.startswith(("postgresql://", "postgres://")):
        parts = urlsplit(url)
        return urlunsplit(parts._replace(path="/" + name))
    return make_conninfo(url, dbname=name)


def database_name(url: str) -> str:
    """The database a URL names."""
    return str(conninfo_to_dict(url).get("dbname", ""))


def create_database(server: str | None = None) -> str:
    """A new empty database ``seif_t_<random>`` on `server` (default: `server_url()`); its URL.
    Made from template0, which nobody connects to (copying template1 fails while anyone else is
    connected to it), in UTF8 with the C locale."""
    server = server or require_server()
    name = DATABASE_PREFIX + secrets.token_hex(6)
    statement = sql.SQL(
        "CREATE DATABASE {} TEMPLATE template0 ENCODING 'UTF8' LC_COLLATE 'C' LC_CTYPE 'C'"
    ).format(sql.Identifier(name))
    with psycopg.connect(server, connect_timeout=CONNECT_TIMEOUT, autocommit=True) as conn:
        conn.execute(statement)
    return with_database(server, name)


def drop_database(url: str, server: str | None = None) -> None:
    """Drop the database `url` names, ending its sessions (``WITH (FORCE)``); `server` is a URL
    of another database on the same server (default: `server_url()`)."""
    server = server or require_server()
    name = database_name(url)
    statement = sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(sql.Identifier(name))
    with psycopg.connect(server, connect_timeout=CONNECT_TIMEOUT, autocommit=True) as conn:
        conn.execute(statement)


@contextlib.contextmanager
def new_database(server: str | None = None) -> Iterator[str]:
    """A new empty database for the block (its URL), dropped afterwards."""
    server = server or require_server()
    url = create_database(server)
    try:
        yield url
    finally:
        drop_database(url, server)


def unavailable(reason: str) -> NoReturn:
    """No server: fail the test when ``CI`` is set, else skip it."""
    message = f"no PostgreSQL server for the tests: {reason}"
    if os.environ.get("CI"):
        pytest.fail(message)
    pytest.skip(message)


def require_server() -> str:
    """`server_url()`, or fail/skip the test (`unavailable`)."""
    url = server_url()
    if url is None:
        unavailable(server_problem())
    return url


# --- fixtures ------------------------------------------------------------------------------------


@pytest.fixture
def pg_url() -> Iterator[str]:
    """The URL of a new empty database, dropped after the test."""
    with new_database() as url:
        yield url


@pytest.fixture(scope="session")
def pg_databases() -> Iterator[Callable[[], str]]:
    """A factory of new empty databases (each call: a URL), all dropped at the session's end."""
    server = require_server()
    made: list[str] = []

    def make() -> str:
        made.append(create_database(server))
        return made[-1]

    yield make
    for url in made:
        drop_database(url, server)
