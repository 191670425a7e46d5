"""Opening an owned data directory's store and log at start: damage refused, the store
reconciled with the log (``servers.store.sqlite.reconcile``), the runtime key read.

Every refusal is a :class:`~servers.store.sqlite.datadir.DataDirError` naming the file, a code and
the remedy (``seif serve`` exits 2), raised before anything is changed: a damaged store or log (a
log whose chain of record digests breaks: ``LOG_CHAIN_BROKEN``, naming the seq), a log that
lost records the store had seen (:attr:`Store.log_mark`), a missing log, store or key
while the others hold history, another fingerprint key than the one the fingerprints kept
were made with (``TRACE_KEY_CHANGED``: ``servers.store.keycheck``; ``key.check`` is written
once all is accepted). The cost is the log's one pass at open (every record decoded and
checked once, as before), ``PRAGMA quick_check`` (every page of the store read once) and, for
the records after the store's mark, one indexed query per :data:`~reconcile.CHUNK`
candidates. The table of damages and remedies is in ``docs/data-directory.md``.
"""

from __future__ import annotations

import contextlib
import sqlite3
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from servers.log.decision_log import DecisionLog, DecisionLogError, LogScan, TailNotSaved
from servers.log.index import MAX_CONTEXTS
from servers.log.reading import ChainBroken, DamagedRecord
from servers.store import keycheck
from servers.store.rows import Reconciled
from servers.store.sqlite.datadir import (
    DECISION_LOG,
    DISPATCH_DB,
    KEY_CHECK,
    RUNTIME_KEY,
    DataDir,
    DataDirError,
)
from servers.store.sqlite.reconcile import LogFacts, reconcile
from servers.store.sqlite.store import Store, StoreDamaged, StoreError

LOG_TRUNCATED = "LOG_TRUNCATED"
_STORE_FILES = f"`{DISPATCH_DB}`, `{DISPATCH_DB}-wal` and `{DISPATCH_DB}-shm`"
AFRESH = (
    f"to start afresh instead, move {_STORE_FILES} and `{DECISION_LOG}` aside (keep them for"
    " audit): contexts and approvals then start empty and old contextRefs are refused"
)
REBUILD = (
    f"move {_STORE_FILES} aside, then either restore `{DISPATCH_DB}` from a backup (without"
    " its -wal and -shm; start-up reconciles it with the log), or create an empty one"
    f" (`touch {DISPATCH_DB}; chmod 600 {DISPATCH_DB}`) to rebuild it from `{DECISION_LOG}`:"
    " every call the log records comes back UNKNOWN and is never dispatched again, contexts"
    " come back, approvals must be given again"
)
EVIDENCE = (
    f"keep `{DECISION_LOG}` as evidence: a record was changed, removed, inserted or moved after"
    f" it was written (`seif trace verify --log {DECISION_LOG}` names the same seq); to start"
    f" afresh, move {_STORE_FILES} and `{DECISION_LOG}` aside together (keep them): contexts"
    " and approvals then start empty and old contextRefs are refused; or restore both from a"
    " backup whose `seif trace verify` passes"
)
RESTORE_LOG = (
    f"restore `{DECISION_LOG}` from a backup at least as recent as the store's last write; "
    + AFRESH
)


@dataclass(frozen=True)
class OpenedData:
    store: Store
    log: DecisionLog
    key: bytes
    """The fingerprint key: the bindings' ``traceKeyRef`` key, else ``runtime.key``."""
    reconciled: Reconciled


def open_data(
    data: DataDir, *, trace_key: bytes | None, now_ms: int, trace_contexts: int = MAX_CONTEXTS
) -> OpenedData:
    """Check, open and reconcile the store and the log of ``data`` (owned); on a refusal
    everything opened here is closed again. ``trace_contexts``: how many contexts the log's
    traces index holds at most (``servers.log.index``)."""
    key = trace_key
    if key is None and data.has_runtime_key():
        key = data.runtime_key()  # a bad key file is refused before anything is opened
    recorded = data.key_check()  # and so is a bad check file
    with contextlib.ExitStack() as undo:
        store = _existing_store(data, now_ms)
        if store is not None:
            undo.callback(store.close)
        mark = store.log_mark if store is not None else 0
        if store is not None and not data.log_path.exists() and store.has_rows():
            raise _refused(data.log_path, "LOG_MISSING", _log_missing(mark), RESTORE_LOG)
        facts = LogFacts(store, mark)
        accept = _acceptor(data, store, mark, facts, (key, recorded))
        log = _open_log(data.log_path, facts, accept, trace_contexts)
        undo.callback(log.close)
        facts.finish()
        if store is None:
            store = _open_store(data.store_path, now_ms)
            undo.callback(store.close)
        if key is None:
            key = _new_runtime_key(data, store, facts)
        store.attach_log(log)
        reconciled = reconcile(store, log, facts, now_ms)
        store.mark_log()
        if recorded is None or not keycheck.matches(recorded, key):
            data.record_key_check(keycheck.check_value(key))  # the first start with this key
        undo.pop_all()
    return OpenedData(store=store, log=log, key=key, reconciled=reconciled)


def _refused(file: Path, code: str, message: str, remedy: str) -> DataDirError:
    return DataDirError(file, code, message, remedy)


def _log_missing(mark: int) -> str:
    held = f" (it had recorded the log up to seq {mark})" if mark else ""
    return f"`{DECISION_LOG}` is missing, but `{DISPATCH_DB}` holds history{held}"


def _existing_store(data: DataDir, now_ms: int) -> Store | None:
    """The store, if its file exists; a write-ahead log without its database is damage."""
    path = data.store_path
    wal = path.with_name(path.name + "-wal")
    if not path.exists() or path.stat().st_size == 0:
        if wal.exists() and wal.stat().st_size > 0:
            message = f"`{wal.name}` is there without the database it belongs to"
            raise _refused(wal, "STORE_DAMAGED", message, REBUILD)
        if not path.exists():
            return None
    return _open_store(path, now_ms)


def _open_store(path: Path, now_ms: int) -> Store:
    try:
        return Store.open(path, now_ms=now_ms)
    except StoreDamaged as exc:
        raise _refused(path, "STORE_DAMAGED", str(exc), REBUILD) from None
    except StoreError as exc:
        remedy = "run the runtime version that wrote it, or " + REBUILD
        raise _refused(path, "STORE_UNSUPPORTED", str(exc), remedy) from None
    except (sqlite3.Error, OSError) as exc:
        message = f"`{path}` cannot be opened: {exc}"
        raise _refused(path, "STORE_UNUSABLE", message, _access_remedy(path)) from None


def _open_log(
    path: Path, facts: LogFacts, accept: Callable[[LogScan], None], trace_contexts: int
) -> DecisionLog:
    try:
        return DecisionLog.open(path, visit=facts, accept=accept, trace_contexts=trace_contexts)
    except ChainBroken as exc:
        broken = exc.broken
        message = f"`{path}`: the chain of record digests breaks at seq {broken.seq} (byte"
        message += f" {exc.offset}): {broken.problem}"
        raise _refused(path, "LOG_CHAIN_BROKEN", message, EVIDENCE) from None
    except DamagedRecord as exc:
        message = f"`{path}` is damaged at {exc}"
        raise _refused(path, "LOG_DAMAGED", message, _damage_remedy(exc)) from None
    except TailNotSaved as exc:
        remedy = (
            f"compare `{exc.side.name}` with the end of `{DECISION_LOG}`; move it aside (keep"
            " it), then start again"
        )
        message = f"the torn final record of `{path}` cannot be saved: {exc}"
        raise _refused(exc.side, "LOG_DAMAGED", message, remedy) from None
    except DecisionLogError as exc:  # the file changed while it was opened
        remedy = f"make sure no other process writes `{path}`, then start again"
        raise _refused(path, "LOG_DAMAGED", f"`{path}`: {exc}", remedy) from None
    except OSError as exc:
        message = f"`{path}` cannot be opened: {exc.strerror or exc}"
        raise _refused(path, "LOG_UNUSABLE", message, _access_remedy(path)) from None


def _damage_remedy(exc: DamagedRecord) -> str:
    if exc.intact_at is not None:  # a damaged length: the records after it are intact
        return (
            f"the records before byte {exc.offset} and from byte {exc.intact_at} on are intact;"
            f" do not cut the file (records after the damage would be lost): keep a copy, then"
            f" restore `{DECISION_LOG}` from a backup"
        )
    if exc.unsure:  # an incomplete record too long to be torn: records may follow it
        return (
            f"the records before byte {exc.offset} are intact, and those after it may be: keep"
            f" a copy, then restore `{DECISION_LOG}` from a backup; cut it at byte {exc.offset}"
            " only if the bytes from there on are known to be one torn record (save them first)"
        )
    return (
        f"the records before byte {exc.offset} are intact; keep a copy of the file, then"
        f" restore it from a backup, or cut it there (`truncate -s {exc.offset}"
        f" {DECISION_LOG}`), which is refused in turn (LOG_TRUNCATED) if it drops records"
        " the store has seen"
    )


def _access_remedy(path: Path) -> str:
    return f"make `{path}` a regular file readable and writable by this user (mode 0600)"


def _acceptor(
    data: DataDir,
    store: Store | None,
    mark: int,
    facts: LogFacts,
    keys: tuple[bytes | None, str | None],
) -> Callable[[LogScan], None]:
    """What the log's pass calls once it has seen every record, before anything is changed:
    :func:`_accept`, then :func:`_check_key` with the key in use and the check value recorded
    (``keys``). Without a store, or without a key yet, no fingerprint can be kept under
    another key: a log with records and no store is refused, and a key is created only while
    nothing holds a fingerprint (:func:`_new_runtime_key`)."""
    key, recorded = keys

    def accept(scan: LogScan) -> None:
        _accept(data, store, mark, scan)
        if store is not None and key is not None:
            _check_key(data, key, recorded, store, facts)

    return accept


def _accept(data: DataDir, store: Store | None, mark: int, scan: LogScan) -> None:
    """The log's pass is done and nothing is changed yet: refuse a log with history and no
    store, and a log that ends before the store's mark."""
    if store is None and scan.records:
        message = f"`{DISPATCH_DB}` is missing, but `{DECISION_LOG}` holds {scan.records} records"
        raise _refused(data.store_path, "STORE_MISSING", message, REBUILD + "; or " + AFRESH)
    lost = truncation(scan.last_seq, mark, scan.torn)
    if lost is not None:
        raise _refused(data.log_path, LOG_TRUNCATED, lost, RESTORE_LOG)


def truncation(last_seq: int, mark: int, torn: int = 0) -> str | None:
    """Why a log that ends at ``last_seq`` (``torn`` bytes of an incomplete record after it)
    lost records, when the store saw it reach ``mark`` (:attr:`Store.log_mark`); None when it
    did not. The runtime refuses such a log at start, ``seif trace verify --data`` fails it."""
    if last_seq >= mark:
        return None
    tail = f" (and {torn} bytes of an incomplete record)" if torn else ""
    return (
        f"`{DECISION_LOG}` ends at seq {last_seq}{tail}, but `{DISPATCH_DB}` saw it reach"
        f" seq {mark}: records were lost (a truncated, replaced or older log)"
    )


def recorded_mark(store_path: Path) -> int | None:
    """The store's mark of the log (:attr:`Store.log_mark`) read without changing anything
    and without the directory's lock, so while the runtime serves: no migration, no recovery,
    a read-only connection (one that opens no write-ahead log where none is: a store closed
    cleanly is read as it is on disk). None without a store file; 0 for an empty one or one
    of schema version 1 (no mark yet: the runtime then reads the whole log). A store that
    cannot be read is a :class:`StoreError`."""
    if not store_path.exists():
        return None
    wal = store_path.with_name(store_path.name + "-wal")
    quiet = "" if wal.exists() else "&immutable=1"
    uri = f"{store_path.absolute().as_uri()}?mode=ro{quiet}"
    try:
        db = sqlite3.connect(uri, uri=True, timeout=10)
        try:
            if db.execute("PRAGMA user_version").fetchone()[0] < 2:
                return 0
            row = db.execute("SELECT seq FROM log_mark WHERE id = 1").fetchone()
        finally:
            db.close()
    except sqlite3.Error as exc:
        raise StoreError(f"`{store_path}` cannot be read: {exc}") from None
    return int(row[0]) if row is not None else 0


def _fingerprinted(store: Store, facts: LogFacts) -> bool:
    """Whether the store or the log holds an argument fingerprint."""
    return facts.fingerprints or store.has_fingerprints()


def _check_key(
    data: DataDir, key: bytes, recorded: str | None, store: Store, facts: LogFacts
) -> None:
    """Refuse a key that is not the one ``key.check`` records while a fingerprint made with
    that one is kept (``servers.store.keycheck``)."""
    if recorded is None or keycheck.matches(recorded, key) or not _fingerprinted(store, facts):
        return
    message = (
        f"the fingerprint key in use (the bindings' `traceKeyRef` key, else `{RUNTIME_KEY}`) is"
        f" not the one `{KEY_CHECK}` records, and the store or the log holds fingerprints made"
        f" with that one: {keycheck.CONSEQUENCE}"
    )
    remedy = (
        "start with the key this data directory was written with (the `traceKeyRef` secret it"
        f" had, or no `traceKeyRef` for `{RUNTIME_KEY}`); to use the new key, " + AFRESH
    )
    raise _refused(data.key_check_path, keycheck.TRACE_KEY_CHANGED, message, remedy)


def _new_runtime_key(data: DataDir, store: Store, facts: LogFacts) -> bytes:
    """A key is created only while nothing holds a fingerprint made with a lost one."""
    if _fingerprinted(store, facts):
        message = (
            f"`{RUNTIME_KEY}` is missing, but the store or the log holds fingerprints made with it"
        )
        remedy = f"restore `{RUNTIME_KEY}` from a backup of this data directory; " + AFRESH
        raise _refused(data.key_path, "KEY_MISSING", message, remedy)
    return data.runtime_key()
