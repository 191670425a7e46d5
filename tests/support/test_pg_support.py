"""The PostgreSQL test support: each test gets a new, empty, writable database, dropped after it;
a private server starts from the installed binaries; without a server, CI fails and others skip."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import psycopg
import pytest

from tests.support import pg_support
from tests.support.paths import ROOT
from tests.support.pg_support import (
    DATABASE_PREFIX,
    answers,
    database_name,
    new_database,
    server_url,
    start_private_server,
    unavailable,
    with_database,
)

# the fixtures, for this module (the whole suite gets them from conftest's pytest_plugins)
pg_url = pg_support.pg_url
pg_databases = pg_support.pg_databases

SEEN: list[str] = []  # the databases the two fixture tests got, in whichever order they ran


def exists(name: str) -> bool:
    server = server_url()
    assert server is not None
    with psycopg.connect(server, autocommit=True) as conn:
        found = conn.execute("SELECT 1 FROM pg_database WHERE datname = %s", (name,)).fetchone()
    return found is not None


def tables(url: str) -> list[str]:
    with psycopg.connect(url) as conn:
        rows = conn.execute(
            "SELECT table_name FROM information_schema.tables WHERE table_schema = 'public'"
        ).fetchall()
    return [row[0] for row in rows]


def fresh_and_writable(url: str) -> None:
    """The database is new and empty: not one an earlier test had (those are dropped), no table;
    then it takes a table and a row, which the next test must not see."""
    name = database_name(url)
    assert name.startswith(DATABASE_PREFIX)
    assert name not in SEEN
    assert not any(exists(earlier) for earlier in SEEN)
    assert tables(url) == []
    SEEN.append(name)
    with psycopg.connect(url) as conn:
        conn.execute("CREATE TABLE marker (test text PRIMARY KEY)")
        conn.execute("INSERT INTO marker VALUES (%s)", (name,))
    with psycopg.connect(url) as conn:
        assert conn.execute("SELECT test FROM marker").fetchall() == [(name,)]


def test_a_fixture_database_is_fresh_and_writable(pg_url: str) -> None:
    fresh_and_writable(pg_url)


def test_another_fixture_database_is_fresh_and_writable(pg_url: str) -> None:
    fresh_and_writable(pg_url)


def test_a_database_is_dropped_after_its_block_even_while_connected() -> None:
    with new_database() as url:
        name = database_name(url)
        assert exists(name)
        held = psycopg.connect(url)  # left open: WITH (FORCE) ends it
    try:
        assert not exists(name)
    finally:
        held.close()


def test_the_session_factory_makes_distinct_databases(pg_databases: Callable[[], str]) -> None:
    first, second = pg_databases(), pg_databases()
    assert database_name(first) != database_name(second)
    assert exists(database_name(first))
    assert exists(database_name(second))
    assert tables(second) == []


def test_the_server_is_found_once() -> None:
    url = server_url()
    assert url is not None
    assert server_url() is url
    assert answers(url)


def test_a_private_server_starts_from_the_binaries_and_stops() -> None:
    if pg_support.find_bin_dir() is None:
        unavailable("no initdb/pg_ctl/postgres installed")
    with start_private_server() as server:
        assert server.port != 5432
        assert server.url == f"postgresql://postgres@127.0.0.1:{server.port}/postgres"
        if os.geteuid() == 0:  # initdb refuses root: the cluster belongs to another user
            assert server.data.stat().st_uid != 0
        assert (server.directory / f".s.PGSQL.{server.port}").is_socket()
        with new_database(server.url) as url:
            assert url.startswith(f"postgresql://postgres@127.0.0.1:{server.port}/seif_t_")
            with psycopg.connect(url) as conn:
                conn.execute("CREATE TABLE t (n int)")
                conn.execute("INSERT INTO t VALUES (1), (2)")
                assert conn.execute("SELECT sum(n) FROM t").fetchone() == (3,)
        # the unix socket is in the directory too
        socket_url = f"postgresql://postgres@/postgres?host={server.directory}&port={server.port}"
        assert answers(socket_url)
    assert server.stopped
    assert not server.directory.exists()
    assert not answers(server.url, timeout=1)
    server.stop()  # a second stop is harmless


def test_the_search_order(monkeypatch: pytest.MonkeyPatch) -> None:
    find = pg_support._found.__wrapped__  # uncached
    monkeypatch.setenv("SEIF_TEST_PG_URL", "postgresql://someone@elsewhere/db")
    assert find() == ("postgresql://someone@elsewhere/db", "")
    monkeypatch.delenv("SEIF_TEST_PG_URL")
    assert find() == (pg_support.MACHINE_URL, "")  # it answers on this machine
    monkeypatch.setattr(pg_support, "MACHINE_URL", "postgresql://postgres@127.0.0.1:1/postgres")
    monkeypatch.setattr(pg_support, "find_bin_dir", lambda: None)
    url, problem = find()
    assert url is None
    assert "nothing answered at postgresql://postgres@127.0.0.1:1/postgres" in problem
    assert "apt-get install postgresql" in problem


FALLBACK = """
import psycopg
from tests.support import pg_support
pg_support.MACHINE_URL = "postgresql://postgres@127.0.0.1:1/postgres"
url = pg_support.server_url()
assert pg_support.server_url() is url and url != pg_support.MACHINE_URL, url
with pg_support.new_database() as db, psycopg.connect(db) as conn:
    conn.execute("CREATE TABLE t (n int)")
print(url, pg_support.STARTED[0].directory)
"""


def test_without_a_machine_server_a_private_one_serves_the_process_until_it_exits() -> None:
    if pg_support.find_bin_dir() is None:
        unavailable("no initdb/pg_ctl/postgres installed")
    env = {key: value for key, value in os.environ.items() if key != "SEIF_TEST_PG_URL"}
    ran = subprocess.run(
        [sys.executable, "-c", FALLBACK],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert ran.returncode == 0, ran.stderr
    url, directory = ran.stdout.split()
    assert not Path(directory).exists()  # atexit stopped and removed it
    assert not answers(url, timeout=1)


def test_no_server_fails_under_ci_and_skips_elsewhere(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CI", "true")
    with pytest.raises(pytest.fail.Exception, match="no PostgreSQL server for the tests: why"):
        unavailable("why")
    monkeypatch.delenv("CI")
    with pytest.raises(pytest.skip.Exception, match="no PostgreSQL server"):
        unavailable("why")


def test_a_url_names_another_database() -> None:
    assert (
        with_database("postgresql://u@h:5/postgres?sslmode=disable", "x")
        == "postgresql://u@h:5/x?sslmode=disable"
    )
    assert with_database("postgresql://u@h", "x") == "postgresql://u@h/x"
    assert database_name(with_database("host=h user=u dbname=postgres", "x")) == "x"
    assert database_name("postgresql://u@h:5/y") == "y"
    assert not answers("postgresql://postgres@127.0.0.1:1/postgres", timeout=1)
