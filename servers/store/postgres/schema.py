"""The PostgreSQL dispatch store's database side: the schema and its versioned migrations,
every statement, the checks and conversions of what they write and read, and the connections
(autocommit, committing durably) with the registration of a replica.

The schema mirrors the SQLite store's (``servers.store.rows``) with what several replicas need
besides: each intent names the replica that claimed it, ``replicas`` holds every replica's
lease, and the decision log is the append-only table ``decision_log`` (a trigger refuses
``UPDATE``, ``DELETE`` and ``TRUNCATE``). The same ``CHECK`` constraints keep raw text out of
the fingerprint and reason columns. Rows keep their insertion order in an identity column
(``seq``), which stands for SQLite's ``rowid``.

Migrations are applied when a store is opened, in one transaction holding
``pg_advisory_xact_lock(MIGRATION_LOCK)``: replicas starting together apply each version once,
the others wait and find it applied. A database of a newer version than this code's is refused;
nothing is ever migrated downwards.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterator, Mapping
from dataclasses import fields
from typing import Any

import psycopg
from psycopg.conninfo import conninfo_to_dict
from psycopg.types.json import Jsonb
from psycopg_pool import AsyncConnectionPool

from policy.json.canonical import canonical_json, decode_canonical_cbor
from policy.json.strict import encodable, loads
from servers.store.rows import (
    TURN_OUTCOMES,
    ApprovalRow,
    ContextRow,
    IntentRow,
    StoreError,
    TurnRow,
    check_fingerprint,
    check_id,
    check_ms,
)
from servers.support.memo import remembered

PG_SCHEMA_VERSION = 6
MIGRATION_LOCK = 0x5E1F_0019_5C4E_3A01
"""The advisory lock key (one 64-bit integer) the migrations hold; any constant, used only here."""

_FINGERPRINT = "CHECK (fingerprint ~ '^[0-9a-f]{64}$')"
_REASON = "CHECK (reason IS NULL OR reason ~ '^[A-Z][A-Z0-9_]{0,63}$')"

SCHEMA_V1 = f"""
CREATE TABLE replicas (
    replica_id text PRIMARY KEY,
    incarnation text NOT NULL,
    lease_expires_at bigint NOT NULL,
    started_at bigint NOT NULL,
    reaped_at bigint
);
CREATE TABLE contexts (
    context_ref text PRIMARY KEY,
    build text NOT NULL,
    objective text NOT NULL,
    coordinates text NOT NULL,
    observations bytea NOT NULL,
    resolved_at bigint NOT NULL,
    expires_at bigint NOT NULL,
    binding_revision bigint,
    turn_id text,
    credential_id text
);
CREATE TABLE intents (
    seq bigint GENERATED ALWAYS AS IDENTITY,
    context_ref text NOT NULL,
    call_id text NOT NULL,
    tool text NOT NULL,
    fingerprint text NOT NULL {_FINGERPRINT},
    status text NOT NULL CHECK (status IN ('PENDING', 'SUCCEEDED', 'FAILED', 'UNKNOWN')),
    reason text {_REASON},
    created_at bigint NOT NULL,
    completed_at bigint,
    replica_id text NOT NULL,
    PRIMARY KEY (context_ref, call_id)
);
CREATE INDEX intents_by_call ON intents (call_id, seq);
CREATE INDEX intents_pending ON intents (replica_id) WHERE status = 'PENDING';
CREATE TABLE approvals (
    seq bigint GENERATED ALWAYS AS IDENTITY,
    approval_id text PRIMARY KEY,
    context_ref text NOT NULL,
    tool text NOT NULL,
    call_id text NOT NULL,
    fingerprint text NOT NULL {_FINGERPRINT},
    expires_at bigint NOT NULL,
    approver_id text
);
CREATE INDEX approvals_by_context ON approvals (context_ref, seq);
CREATE TABLE turns (
    turn_id text PRIMARY KEY,
    credential_id text NOT NULL,
    expires_at bigint NOT NULL,
    outcome text CHECK (outcome IS NULL OR outcome IN ('COMPLETED', 'FAILED'))
);
CREATE TABLE decision_log (
    seq bigserial PRIMARY KEY,
    replica text NOT NULL,
    replica_seq bigint NOT NULL CHECK (replica_seq > 0),
    context_ref text,
    event text NOT NULL,
    record bytea NOT NULL,
    UNIQUE (replica, replica_seq)
);
CREATE INDEX decision_log_by_context ON decision_log (context_ref, seq)
    WHERE context_ref IS NOT NULL;
CREATE FUNCTION seif_refuse_change() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    RAISE EXCEPTION 'the decision log is append-only';
END $$;
CREATE TRIGGER decision_log_append_only BEFORE UPDATE OR DELETE ON decision_log
    FOR EACH ROW EXECUTE FUNCTION seif_refuse_change();
CREATE TRIGGER decision_log_no_truncate BEFORE TRUNCATE ON decision_log
    FOR EACH STATEMENT EXECUTE FUNCTION seif_refuse_change();
CREATE FUNCTION seif_cbor_uint(n bigint) RETURNS bytea
    LANGUAGE sql IMMUTABLE STRICT PARALLEL SAFE AS $$
    SELECT CASE
        WHEN n < 24 THEN set_byte('\\x00'::bytea, 0, n::int)
        WHEN n < 256 THEN '\\x18'::bytea || set_byte('\\x00'::bytea, 0, n::int)
        WHEN n < 65536 THEN '\\x19'::bytea || substring(int4send(n::int) FROM 3)
        WHEN n < 4294967296 THEN '\\x1a'::bytea || substring(int8send(n) FROM 5)
        ELSE '\\x1b'::bytea || int8send(n)
    END $$;
CREATE FUNCTION seif_log(p_replica text, p_replica_seq bigint, p_ref text, p_event text,
        p_head bytea, p_tail bytea) RETURNS bigint LANGUAGE sql AS $$
    INSERT INTO decision_log (seq, replica, replica_seq, context_ref, event, record)
    SELECT n.s, p_replica, p_replica_seq, p_ref, p_event, p_head || seif_cbor_uint(n.s) || p_tail
    FROM (SELECT nextval('decision_log_seq_seq') AS s) AS n
    RETURNING seq
$$;
"""
"""Version 1: the tables and the decision log's functions. ``seif_cbor_uint`` is the canonical
CBOR head of an unsigned integer (RFC 8949 §4.2.1: the shortest form); ``seif_log`` inserts a
record, its bytes completed around the ``seq`` it takes (``servers.store.postgres.log``)."""

WRITES_V1 = """
CREATE FUNCTION seif_claim(p_replica text, p_incarnation text, p_now bigint, p_ref text,
        p_call text, p_tool text, p_fingerprint text, p_seen jsonb, p_log_replica text,
        p_log_seq bigint, p_log_ref text, p_event text, p_head bytea, p_tail bytea)
        RETURNS text LANGUAGE plpgsql AS $$
DECLARE
    held record;
BEGIN
    SELECT lease_expires_at, reaped_at, incarnation INTO held FROM replicas
        WHERE replica_id = p_replica FOR KEY SHARE;
    IF NOT FOUND OR held.reaped_at IS NOT NULL OR held.lease_expires_at <= p_now
            OR held.incarnation <> p_incarnation THEN
        RETURN 'LEASE_LOST';
    END IF;
    PERFORM 1 FROM contexts WHERE context_ref = p_ref FOR UPDATE;
    IF NOT FOUND THEN
        RETURN 'NO_CONTEXT';
    END IF;
    IF p_seen IS DISTINCT FROM (SELECT coalesce(jsonb_agg(jsonb_build_array(call_id, tool,
            fingerprint, status, reason, created_at, completed_at) ORDER BY seq), '[]')
            FROM intents WHERE context_ref = p_ref) THEN
        RETURN 'CHANGED';
    END IF;
    INSERT INTO intents (context_ref, call_id, tool, fingerprint, status, created_at, replica_id)
        VALUES (p_ref, p_call, p_tool, p_fingerprint, 'PENDING', p_now, p_replica)
        ON CONFLICT (context_ref, call_id) DO NOTHING;
    IF NOT FOUND THEN
        RETURN 'EXISTS';
    END IF;
    IF p_head IS NOT NULL THEN
        PERFORM seif_log(p_log_replica, p_log_seq, p_log_ref, p_event, p_head, p_tail);
    END IF;
    RETURN 'INSERTED';
END $$;
CREATE FUNCTION seif_complete(p_ref text, p_call text, p_status text, p_reason text,
        p_now bigint, p_log_replica text, p_log_seq bigint, p_log_ref text, p_event text,
        p_head bytea, p_tail bytea) RETURNS text LANGUAGE plpgsql AS $$
DECLARE
    outcome text := 'DONE';
BEGIN
    PERFORM 1 FROM contexts WHERE context_ref = p_ref FOR UPDATE;
    UPDATE intents SET status = p_status, reason = p_reason, completed_at = p_now
        WHERE context_ref = p_ref AND call_id = p_call AND status = 'PENDING';
    IF NOT FOUND THEN
        PERFORM 1 FROM intents WHERE context_ref = p_ref AND call_id = p_call;
        IF NOT FOUND THEN
            RETURN 'NO_INTENT';
        END IF;
        outcome := 'FINAL';
    END IF;
    IF p_head IS NOT NULL THEN
        PERFORM seif_log(p_log_replica, p_log_seq, p_log_ref, p_event, p_head, p_tail);
    END IF;
    RETURN outcome;
END $$;
"""
"""Version 1: the two hot writes as single statements, each one transaction (READ COMMITTED:
each statement inside takes a new snapshot, so what is read after a lock is what is committed).

- ``seif_claim``: the claim of :meth:`~servers.store.postgres.store.PgStore.begin_intent_async` when
  the caller has seen the context's intents: the lease (``KEY SHARE``), the context's row
  (``FOR UPDATE``), its intents compared with ``p_seen`` (``CHANGED``: the caller decides
  again, in a transaction of its own), then the insert (``ON CONFLICT DO NOTHING``: ``EXISTS``)
  and its record.
- ``seif_complete``: holding the context's row, a ``PENDING`` intent made final (``DONE``), or
  found final already (``FINAL``) or absent (``NO_INTENT``, nothing logged), and its record."""

HELD_V2 = f"""
CREATE TABLE held_calls (
    context_ref text NOT NULL,
    call_id text NOT NULL,
    tool text NOT NULL,
    owner text NOT NULL,
    fingerprint text NOT NULL {_FINGERPRINT},
    reason text NOT NULL {_REASON},
    requested_at bigint NOT NULL,
    expires_at bigint NOT NULL,
    context_expires_at bigint NOT NULL,
    size integer NOT NULL CHECK (size >= 0),
    sealed bytea NOT NULL,
    replica_id text NOT NULL,
    PRIMARY KEY (context_ref, call_id)
);
CREATE INDEX held_calls_by_time ON held_calls (requested_at);
CREATE INDEX held_calls_by_expiry ON held_calls (expires_at);
CREATE TABLE held_outcomes (
    context_ref text NOT NULL,
    call_id text NOT NULL,
    outcome text NOT NULL CHECK (outcome IN ('REJECTED', 'EXPIRED')),
    decided_at bigint NOT NULL,
    PRIMARY KEY (context_ref, call_id)
);
CREATE INDEX held_outcomes_by_time ON held_outcomes (decided_at);
CREATE INDEX turns_by_credential ON turns (credential_id, expires_at);
"""
"""Version 2: the calls held for approval, shared by every replica (their arguments sealed:
``servers.store.postgres.sealing``), how each wait ended (``REJECTED`` is never replaced), and the
turns of a credential in order (``servers.store.postgres.held``)."""

COMPLETE_V3 = """
CREATE OR REPLACE FUNCTION seif_complete(p_ref text, p_call text, p_status text, p_reason text,
        p_now bigint, p_log_replica text, p_log_seq bigint, p_log_ref text, p_event text,
        p_head bytea, p_tail bytea) RETURNS text LANGUAGE plpgsql AS $$
DECLARE
    found_status text;
    outcome text := 'DONE';
BEGIN
    PERFORM 1 FROM contexts WHERE context_ref = p_ref FOR UPDATE;
    SELECT status INTO found_status FROM intents
        WHERE context_ref = p_ref AND call_id = p_call FOR UPDATE;
    IF NOT FOUND THEN
        RETURN 'NO_INTENT';
    END IF;
    IF found_status = 'PENDING' THEN
        UPDATE intents SET status = p_status, reason = p_reason, completed_at = p_now
            WHERE context_ref = p_ref AND call_id = p_call;
    ELSE
        outcome := 'FINAL';
    END IF;
    IF p_head IS NOT NULL THEN
        PERFORM seif_log(p_log_replica, p_log_seq, p_log_ref, p_event, p_head, p_tail);
    END IF;
    RETURN outcome;
END $$;
"""
"""Version 3: ``seif_complete`` finds the intent by its primary key (version 1's
``status = 'PENDING'`` let the planner pick the partial index of every replica's pending
intents, scanning them all on each completion)."""

KEY_CHECK_V4 = """
CREATE TABLE key_check (
    id integer PRIMARY KEY CHECK (id = 1),
    value text NOT NULL CHECK (value ~ '^[0-9a-f]{64}$')
);
"""
"""Version 4: the check value of the fingerprint key every replica must use, recorded by the
first replica that starts (``servers.store.keycheck``): never the key itself."""

GONE_V5 = """
ALTER TABLE held_calls ADD COLUMN requester_gone boolean NOT NULL DEFAULT false;
"""
"""Version 5: whether a held call's requester is gone (``servers.runtime.held.HeldCalls.left``),
so that every replica lists the mark and refuses to approve the call; calls held before it have
their requester (``false``). A constant default: no row is rewritten."""

PRINCIPAL_V6 = """
ALTER TABLE contexts ADD COLUMN principal text;
"""
"""Version 6: who resolved each context with an issuer's token (``servers.store.rows``: a
context belongs to that subject on every replica); NULL for a static credential and before."""

MIGRATIONS = {
    1: SCHEMA_V1 + WRITES_V1,
    2: HELD_V2,
    3: COMPLETE_V3,
    4: KEY_CHECK_V4,
    5: GONE_V5,
    6: PRINCIPAL_V6,
}
"""What brings a database from version ``n - 1`` to ``n``; version 0 is an empty database."""

INTENT_COLUMNS = "context_ref, call_id, tool, fingerprint, status, reason, created_at, completed_at"
APPROVAL_COLUMNS = "approval_id, context_ref, tool, call_id, fingerprint, expires_at, approver_id"
CONTEXT_COLUMNS = (
    "context_ref, build, objective, coordinates, observations, resolved_at, expires_at,"
    " binding_revision, turn_id, credential_id, principal"
)
INTENTS_OF_CONTEXT = f"SELECT {INTENT_COLUMNS} FROM intents WHERE context_ref = %s ORDER BY seq"
INTENTS_WITH_CALL = f"SELECT {INTENT_COLUMNS} FROM intents WHERE call_id = %s ORDER BY seq"
INTENT = f"SELECT {INTENT_COLUMNS} FROM intents WHERE context_ref = %s AND call_id = %s"
APPROVALS_OF_CONTEXT = (
    f"SELECT {APPROVAL_COLUMNS} FROM approvals WHERE context_ref = %s ORDER BY seq"
)
CONTEXT = f"SELECT {CONTEXT_COLUMNS} FROM contexts WHERE context_ref = %s"
TURN = "SELECT turn_id, credential_id, expires_at, outcome FROM turns WHERE turn_id = %s"
HAS_ROWS = "SELECT " + " OR ".join(
    f"EXISTS (SELECT 1 FROM {table})" for table in ("contexts", "intents", "approvals", "turns")
)
HAS_FINGERPRINTS = "SELECT EXISTS (SELECT 1 FROM intents) OR EXISTS (SELECT 1 FROM approvals)"
LOCK_CONTEXT = "SELECT 1 FROM contexts WHERE context_ref = %s FOR UPDATE"
"""Taken by every write of a context's intents: claims of one context are serial (no two call
ids together exceed a limit), and so are the seqs of their records."""
LEASE = (
    "SELECT lease_expires_at, reaped_at, incarnation FROM replicas WHERE replica_id = %s"
    " FOR KEY SHARE"
)
"""A claim's look at its replica's lease. ``KEY SHARE``: claims do not wait for one another or
for a renewal, but a reap (``FOR UPDATE``) waits for the claims in flight, and they for it.
The lease is this process's while the incarnation it took at open is still there."""


LOG_ARGS = (
    "%(log_replica)s::text, %(log_replica_seq)s::bigint, %(log_ref)s::text, %(log_event)s::text,"
    " %(log_head)s::bytea, %(log_tail)s::bytea"
)
"""A record's parameters (``servers.store.postgres.log.Sequencer``): all NULL for no record."""
LOG_CALL = f"seif_log({LOG_ARGS})"
"""The insert of one record, which takes its ``seq``."""
APPEND = f"SELECT {LOG_CALL}"


def _values(columns: str) -> str:
    return ", ".join(f"%({name.strip()})s" for name in columns.split(","))


def _once(insert: str, logged: bool) -> str:
    """``insert`` (``ON CONFLICT DO NOTHING RETURNING 1``) and, if ``logged``, its record iff
    it inserted, in one statement; it answers how many rows it inserted."""
    log = f", (SELECT {LOG_CALL} FROM ins)" if logged else ""
    return f"WITH ins AS ({insert}) SELECT (SELECT count(*) FROM ins){log}"


_ONCE = " ON CONFLICT DO NOTHING RETURNING 1"
_CONTEXT = f"INSERT INTO contexts ({CONTEXT_COLUMNS}) VALUES ({_values(CONTEXT_COLUMNS)})"
SAVE_CONTEXT = {b: _once(_CONTEXT + _ONCE, b) for b in (False, True)}
_APPROVAL = f"INSERT INTO approvals ({APPROVAL_COLUMNS}) VALUES ({_values(APPROVAL_COLUMNS)})"
SAVE_APPROVAL = {b: _once(_APPROVAL + _ONCE, b) for b in (False, True)}
_INTENT = (
    f"INSERT INTO intents ({INTENT_COLUMNS}, replica_id)"
    f" VALUES ({_values(INTENT_COLUMNS)}, %(replica_id)s)"
    " ON CONFLICT (context_ref, call_id) DO NOTHING RETURNING 1"
)
CLAIM = {b: _once(_INTENT, b) for b in (False, True)}
CLAIM_SEEN = (
    "SELECT seif_claim(%(replica_id)s, %(incarnation)s, %(created_at)s, %(context_ref)s,"
    f" %(call_id)s, %(tool)s, %(fingerprint)s, %(seen)s, {LOG_ARGS})"
)
COMPLETE = (
    "SELECT seif_complete(%(context_ref)s, %(call_id)s, %(status)s, %(reason)s, %(now)s,"
    f" {LOG_ARGS})"
)
SAVE_TURN = _once(
    "INSERT INTO turns (turn_id, credential_id, expires_at, outcome) VALUES"
    " (%(turn_id)s, %(credential_id)s, %(expires_at)s, %(outcome)s)" + _ONCE,
    False,
)
TRY_LOCK_NAMED = "SELECT pg_try_advisory_lock(hashtextextended(%s, 0))"
TRIM_TURNS = (
    "DELETE FROM turns WHERE turn_id IN (SELECT turn_id FROM turns WHERE credential_id = %s"
    " ORDER BY expires_at DESC, turn_id OFFSET %s)"
)
COMPLETE_TURN = (
    "WITH found AS (SELECT 1 FROM turns WHERE turn_id = %(turn_id)s),"
    " done AS (UPDATE turns SET outcome = %(outcome)s WHERE turn_id = %(turn_id)s"
    " AND outcome IS NULL RETURNING 1)"
    " SELECT EXISTS (SELECT 1 FROM done), EXISTS (SELECT 1 FROM found)"
)


def migrate(conn: psycopg.Connection[Any], where: str) -> int:
    """Bring the database to :data:`PG_SCHEMA_VERSION` in one transaction under the migrations'
    advisory lock; the version found. A newer database is a :class:`StoreError` naming both
    versions (nothing is changed)."""
    with conn.transaction():
        conn.execute("SELECT pg_advisory_xact_lock(%s)", (MIGRATION_LOCK,))
        conn.execute(
            "CREATE TABLE IF NOT EXISTS schema_version ("
            " version integer PRIMARY KEY, applied_at timestamptz NOT NULL DEFAULT now())"
        )
        row = conn.execute("SELECT coalesce(max(version), 0) FROM schema_version").fetchone()
        found = int(row[0]) if row is not None else 0
        if found > PG_SCHEMA_VERSION:
            raise StoreError(
                f"the store `{where}` has schema version {found}, newer than this runtime's"
                f" {PG_SCHEMA_VERSION}: run a newer runtime (no migration goes downwards)"
            )
        for version in range(found + 1, PG_SCHEMA_VERSION + 1):
            conn.execute(MIGRATIONS[version])
            conn.execute("INSERT INTO schema_version (version) VALUES (%s)", (version,))
    return found


def redacted(url: str) -> str:
    """The store's URL as messages name it: user, host, port and database, never a password
    (``user@host:port/dbname``); parsed by libpq's rules (``psycopg.conninfo``)."""
    try:
        parts = conninfo_to_dict(url)
    except psycopg.Error:
        return "postgresql://?"  # unparsable: say nothing of it
    user = f"{parts['user']}@" if parts.get("user") else ""
    host = str(parts.get("host") or parts.get("hostaddr") or "localhost")
    port = f":{parts['port']}" if parts.get("port") else ""
    return f"postgresql://{user}{host}{port}/{parts.get('dbname') or ''}"


def scrubbed(message: str, url: str) -> str:
    """``message`` with the URL's password, if it has one, blanked out."""
    try:
        password = conninfo_to_dict(url).get("password")
    except psycopg.Error:
        password = None
    return message.replace(str(password), "***") if password else message


def row_fields(row: Any) -> dict[str, Any]:
    return {f.name: getattr(row, f.name) for f in fields(row)}


def context_row(found: Mapping[str, Any]) -> ContextRow:
    principal = found.get("principal")
    decoded = {
        "coordinates": loads(found["coordinates"]),
        "principal": None if principal is None else loads(principal),
    }
    return ContextRow(**{**found, **decoded})


_CANONICAL: dict[bytes, bool] = {}
"""Observations already found canonical (a pure check; resolves repeat the same few)."""


def _canonical(observations: bytes) -> bool:
    decode_canonical_cbor(observations)  # EncodingError unless canonical CBOR
    return True


def context_params(row: ContextRow) -> dict[str, Any]:
    """The checks of the SQLite store's ``save_context``; the row as statement parameters."""
    check_id("context_ref", row.context_ref)
    check_ms("resolved_at", row.resolved_at)
    check_ms("expires_at", row.expires_at)
    if row.credential_id is not None:
        check_id("credential_id", row.credential_id)
    remembered(_CANONICAL, row.observations, _canonical, 256)
    principal = None if row.principal is None else canonical_json(row.principal)
    return {
        **row_fields(row),
        "coordinates": canonical_json(row.coordinates),
        "principal": principal,
    }


def turn_params(row: TurnRow) -> dict[str, Any]:
    """The checks of the SQLite store's ``save_turn``; the row as statement parameters."""
    check_id("turn_id", row.turn_id)
    check_id("credential_id", row.credential_id)
    check_ms("expires_at", row.expires_at)
    if row.outcome is not None and row.outcome not in TURN_OUTCOMES:
        raise ValueError(f"outcome must be one of {sorted(TURN_OUTCOMES)} or None")
    return row_fields(row)


def seen(intents: list[IntentRow]) -> Jsonb:
    """Intents (of one context) as ``seif_claim`` compares them with the stored ones."""
    names = ("call_id", "tool", "fingerprint", "status", "reason", "created_at", "completed_at")
    return Jsonb([[getattr(i, name) for name in names] for i in intents])


def approval_params(row: ApprovalRow) -> dict[str, Any]:
    for name in ("approval_id", "context_ref", "tool", "call_id"):
        check_id(name, getattr(row, name))
    check_fingerprint(row.fingerprint)
    check_ms("expires_at", row.expires_at)
    return row_fields(row)


def storable(params: Any) -> bool:
    """Whether every text among a statement's parameters is text PostgreSQL can hold (no
    NUL, no lone surrogate)."""
    values = params.values() if isinstance(params, Mapping) else params
    for value in values:
        if isinstance(value, str) and ("\x00" in value or not encodable(value)):
            return False
    return True


LIVENESS = {"keepalives": 1, "keepalives_idle": 5, "keepalives_interval": 2,
            "keepalives_count": 3, "tcp_user_timeout": 15_000}  # fmt: skip
"""libpq's settings that make a database gone silent (a partition, a host that died) an error
within about 15 s on every connection, not a wait for ever (for a read on the event loop, a
frozen runtime); a URL that names one of them keeps its own value."""


def liveness(url: str) -> dict[str, Any]:
    """:data:`LIVENESS`, but for what ``url`` sets itself."""
    given = conninfo_to_dict(url)
    return {k: v for k, v in LIVENESS.items() if k not in given}


def connect(url: str, timeout_s: int) -> psycopg.Connection[Any]:
    """An autocommit connection; a failure names the store without its password."""
    try:
        conn = psycopg.connect(url, autocommit=True, connect_timeout=timeout_s, **liveness(url))
    except psycopg.Error as exc:
        message = scrubbed(str(exc).strip(), url)
        raise StoreError(f"cannot connect to the store `{redacted(url)}`: {message}") from None
    found = conn.execute("SHOW synchronous_commit").fetchone()
    if found is not None and found[0] == "off":  # a commit must be durable when it returns
        conn.execute("SET synchronous_commit TO on")
    return conn


async def connect_async(url: str, timeout_s: int) -> psycopg.AsyncConnection[Any]:
    """An autocommit connection of the event loop (the replica's named locks)."""
    try:
        return await psycopg.AsyncConnection.connect(
            url, autocommit=True, connect_timeout=timeout_s, **liveness(url)
        )
    except psycopg.Error as exc:
        message = scrubbed(str(exc).strip(), url)
        raise StoreError(f"cannot connect to the store `{redacted(url)}`: {message}") from None


async def configure(conn: psycopg.AsyncConnection[Any]) -> None:
    """Each pooled connection commits durably, whatever the server's default."""
    found = await (await conn.execute("SHOW synchronous_commit")).fetchone()
    if found is not None and found[0] == "off":
        await conn.execute("SET synchronous_commit TO on")


Pool = AsyncConnectionPool[psycopg.AsyncConnection[Any]]


def new_pool(url: str, sizes: tuple[int, int], timeout_s: int, name: str) -> Pool:
    """A pool of autocommit connections that commit durably (:func:`configure`), not opened
    yet: it opens in the event loop that uses it."""
    return AsyncConnectionPool(
        url,
        min_size=sizes[0],
        max_size=sizes[1],
        kwargs={"autocommit": True, "connect_timeout": timeout_s, **liveness(url)},
        configure=configure,
        open=False,
        name=name,
    )


def snapshot(url: str, timeout_s: int, sql: str) -> Iterator[tuple[Any, ...]]:
    """The rows of ``sql`` from one snapshot, fetched in pages by a server-side cursor on a
    connection of their own (an export holds up no other read)."""
    with connect(url, timeout_s) as conn, conn.transaction(), conn.cursor(name="rows") as cur:
        cur.itersize = 1000
        cur.execute(sql)
        yield from cur


_CLOSING: set[asyncio.Task[None]] = set()


def close_pool(pool: Pool, loop: asyncio.AbstractEventLoop | None) -> None:
    """Close ``pool`` in ``loop``: now if it is idle, from another thread if it runs there, as
    a task if it runs here; a closed loop took its connections' tasks with it."""
    if loop is None or loop.is_closed():
        return
    try:
        running: asyncio.AbstractEventLoop | None = asyncio.get_running_loop()
    except RuntimeError:
        running = None
    if running is loop:
        task = loop.create_task(pool.close())
        _CLOSING.add(task)
        task.add_done_callback(_CLOSING.discard)
    elif loop.is_running():
        asyncio.run_coroutine_threadsafe(pool.close(), loop).result(10)
    else:
        loop.run_until_complete(pool.close())
