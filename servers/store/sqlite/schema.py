"""The SQLite dispatch store's schema (its version and migrations' statements), and its rows
read from and written to SQLite."""

from __future__ import annotations

import sqlite3
from dataclasses import fields
from typing import Any

from policy.json.strict import loads
from servers.store.rows import ApprovalRow, ContextRow, IntentRow

SCHEMA_VERSION = 5

SCHEMA = """
CREATE TABLE contexts (
    context_ref TEXT PRIMARY KEY,
    build TEXT NOT NULL,
    objective TEXT NOT NULL,
    coordinates TEXT NOT NULL,
    observations BLOB NOT NULL,
    resolved_at INTEGER NOT NULL,
    expires_at INTEGER NOT NULL,
    binding_revision INTEGER,
    turn_id TEXT,
    credential_id TEXT,
    principal TEXT
) STRICT;
CREATE TABLE intents (
    context_ref TEXT NOT NULL,
    call_id TEXT NOT NULL,
    tool TEXT NOT NULL,
    fingerprint TEXT NOT NULL
        CHECK (length(fingerprint) = 64 AND fingerprint NOT GLOB '*[^0-9a-f]*'),
    status TEXT NOT NULL CHECK (status IN ('PENDING', 'SUCCEEDED', 'FAILED', 'UNKNOWN')),
    reason TEXT CHECK (reason IS NULL
        OR (length(reason) BETWEEN 1 AND 64 AND reason NOT GLOB '*[^A-Z0-9_]*')),
    created_at INTEGER NOT NULL,
    completed_at INTEGER,
    PRIMARY KEY (context_ref, call_id)
) STRICT;
CREATE TABLE approvals (
    approval_id TEXT PRIMARY KEY,
    context_ref TEXT NOT NULL,
    tool TEXT NOT NULL,
    call_id TEXT NOT NULL,
    fingerprint TEXT NOT NULL
        CHECK (length(fingerprint) = 64 AND fingerprint NOT GLOB '*[^0-9a-f]*'),
    expires_at INTEGER NOT NULL,
    approver_id TEXT
) STRICT;
CREATE INDEX approvals_by_context ON approvals (context_ref);
CREATE TABLE turns (
    turn_id TEXT PRIMARY KEY,
    credential_id TEXT NOT NULL,
    expires_at INTEGER NOT NULL,
    outcome TEXT CHECK (outcome IS NULL OR outcome IN ('COMPLETED', 'FAILED'))
) STRICT;
"""
LOG_MARK_SCHEMA = """
CREATE TABLE log_mark (
    id INTEGER PRIMARY KEY CHECK (id = 1),
    seq INTEGER NOT NULL CHECK (seq >= 0)
) STRICT;
INSERT INTO log_mark (id, seq) VALUES (1, 0);
"""
"""Version 2: the decision log's seq the store has seen durable (see ``Store.log_mark``)."""
OWNER_SCHEMA = "ALTER TABLE contexts ADD COLUMN credential_id TEXT;"
"""Version 3: the id of the credential that resolved each context (its owner; NULL for a
context of an older runtime, which then belongs to no credential: fail closed)."""
CALL_INDEX_SCHEMA = "CREATE INDEX IF NOT EXISTS intents_by_call ON intents (call_id);"
"""Version 4: intents by call id, whatever their context (an MCP client's call id names one
call of its credential and objective across its sessions: ``Store.intents_with_call``)."""
PRINCIPAL_SCHEMA = "ALTER TABLE contexts ADD COLUMN principal TEXT;"
"""Version 5: who resolved each context with a token of an issuer (canonical JSON of
``{issuer, clientId, subject, claims}``, the subject a keyed fingerprint); NULL for a static
credential, and for a context of an older runtime (which then belongs to no subject)."""


def row_fields(r: sqlite3.Row) -> dict[str, Any]:
    return dict(zip(r.keys(), r, strict=True))


def intent_row(r: sqlite3.Row) -> IntentRow:
    return IntentRow(**row_fields(r))


def approval_row(r: sqlite3.Row) -> ApprovalRow:
    return ApprovalRow(**row_fields(r))


def context_row(r: sqlite3.Row) -> ContextRow:
    decoded = {"coordinates": loads(r["coordinates"]), "observations": r["observations"]}
    if r["principal"] is not None:
        decoded["principal"] = loads(r["principal"])
    return ContextRow(**{**row_fields(r), **decoded})


_INSERTS: dict[tuple[str, type], tuple[tuple[str, ...], str]] = {}


def insert_row(db: sqlite3.Connection, table: str, row: Any, **encoded: object) -> None:
    """INSERT one row dataclass, its field names being the table's column names (the
    statement is built once per table and row type)."""
    found = _INSERTS.get((table, type(row)))
    if found is None:
        names = tuple(f.name for f in fields(row))
        columns, marks = ", ".join(names), ", ".join(f":{name}" for name in names)
        found = names, f"INSERT INTO {table} ({columns}) VALUES ({marks})"
        _INSERTS[(table, type(row))] = found
    names, sql = found
    values = {name: getattr(row, name) for name in names}
    values.update(encoded)
    db.execute(sql, values)


INTENT_COLUMNS = "context_ref, call_id, tool, fingerprint, status, reason, created_at, completed_at"
APPROVAL_COLUMNS = "approval_id, context_ref, tool, call_id, fingerprint, expires_at, approver_id"
INTENTS_OF_CONTEXT = f"SELECT {INTENT_COLUMNS} FROM intents WHERE context_ref = ? ORDER BY rowid"
