"""The check value of the fingerprint key: which key a store's fingerprints were made with.

Argument fingerprints are BLAKE3 keyed with the key in use (the bindings' ``traceKeyRef`` key,
else ``runtime.key``). A runtime started with another key computes other fingerprints for the
same arguments, so every call id recorded before would answer ``CALL_CONFLICT``, and every
held call's sealed arguments would no longer open. The store therefore remembers a *check
value* of its key: BLAKE3 keyed with the key over :data:`LABEL`, 64 hex digits. It is not the
key and tells nothing of it, and it can equal no fingerprint (every argument identity is one
canonical CBOR item; :data:`LABEL` is not). A start whose key has another check value is
refused, ``TRACE_KEY_CHANGED``:

- a data directory (``key.check``, ``servers.store.sqlite.opening``) is refused when its store or
  its log holds a fingerprint, as a missing ``runtime.key`` is (``KEY_MISSING``); while nothing
  holds one, the new key's check value replaces the old. A directory written before the check
  existed gets one at its next start;
- a PostgreSQL store (table ``key_check``, ``servers.store.postgres.schema`` version 4) keeps the
  check value of the first replica that starts on it, and refuses every replica with another:
  replicas share one store and must all compute the same fingerprints. It is never replaced
  (another replica may be running with it); a database of an earlier version gets it from the
  first replica that starts after the migration.
"""

from __future__ import annotations

import hmac
from typing import TYPE_CHECKING, Any

import blake3

if TYPE_CHECKING:
    import psycopg

LABEL = b"seif/fingerprint-key-check/v1"
TRACE_KEY_CHANGED = "TRACE_KEY_CHANGED"
CONSEQUENCE = "every call id recorded before would answer CALL_CONFLICT"

RECORD = "INSERT INTO key_check (id, value) VALUES (1, %s) ON CONFLICT (id) DO NOTHING"
RECORDED = "SELECT value FROM key_check WHERE id = 1"


class KeyChanged(Exception):
    """A store that records the check value of another key (``message`` says which store)."""

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message


def check_value(key: bytes) -> str:
    """The check value of ``key``: hex BLAKE3 keyed with it over :data:`LABEL`."""
    return blake3.blake3(LABEL, key=key).hexdigest()


def matches(recorded: str, key: bytes) -> bool:
    """Whether ``recorded`` is the check value of ``key``."""
    return hmac.compare_digest(recorded, check_value(key))


def claim(conn: psycopg.Connection[Any], value: str, where: str) -> None:
    """Record the check value ``value`` in a PostgreSQL store that has none (the first
    replica's wins: ``ON CONFLICT DO NOTHING``, then read in a statement of its own, which
    sees the winner's), or :class:`KeyChanged` when the store records another."""
    conn.execute(RECORD, (value,))
    row = conn.execute(RECORDED).fetchone()
    if row is None or not hmac.compare_digest(str(row[0]), value):
        raise KeyChanged(
            f"the fingerprint key is not the one the store `{where}` records (the key of the"
            f" first replica that started on it), whose fingerprints it keeps: {CONSEQUENCE};"
            " start every replica with the same `traceKeyRef` secret"
        )
