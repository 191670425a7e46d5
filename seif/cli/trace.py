"""`seif trace export` and `seif trace verify`: the decision log, offline.

`seif trace export --data DIR | --store URL --out FILE` writes a consistent prefix of the log
without the data directory's lock. `seif trace verify --data DIR | --log FILE [--json]` walks
the chain of record digests.

The walk is ``servers.log.chain.Chain``, over a snapshot of the log (``seif.tracefile``): a CBOR
log's bytes as stored, or a JSON Lines export's records re-encoded in canonical CBOR. It takes
no lock (a data directory's log can be verified while the runtime serves). With ``--data`` the
log is also compared with the store's mark (the last seq ``dispatch.sqlite`` saw durable, read
before the log's snapshot is taken, so the snapshot holds every record the mark covers): a log
that ends before it lost records, ``LOG_TRUNCATED``, as the runtime refuses it at start
(``servers.store.sqlite.opening.truncation``, one check for both). Exit codes: 0 the chain holds
(the record count and the head printed) and, with ``--data``, the log reaches the store's mark; 1 it
breaks (the first record whose ``prev`` does not match the record before it named as ``seq N``), or
it ends before the mark (``LOG_TRUNCATED``); 2 an unreadable log or store. Records of version 1
before the chain begins are counted as unchained, not as a break."""

from __future__ import annotations

import argparse
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from seif.cli.output import (
    EXIT_NOT_ACCEPTABLE,
    EXIT_OK,
    EXIT_USAGE,
    emit_json,
    refused,
    say,
    warn,
)
from seif.cli.parsing import command, subcommands
from seif.tracefile import (
    FORMATS,
    TraceFileError,
    TraceLog,
    data_log,
    export,
    export_store,
    open_log,
)
from servers.log.chain import Verified
from servers.store.rows import StoreError
from servers.store.sqlite.datadir import DISPATCH_DB
from servers.store.sqlite.opening import LOG_TRUNCATED, recorded_mark, truncation

EXAMPLE = "seif trace export --data /var/lib/seif --out decisions.jsonl"


def add_parser(sub: Any) -> None:
    """``seif trace export`` and ``seif trace verify``."""
    trace = command(sub, "trace", "the decision log", EXAMPLE)
    actions = subcommands(trace, "trace_command")
    exporting = actions.add_parser("export", help="export the decision log (works while serving)")
    source = exporting.add_mutually_exclusive_group(required=True)
    source.add_argument("--data", metavar="DIR", help="the data directory (a SQLite store)")
    source.add_argument(
        "--store", metavar="URL", help="a postgresql:// store of runtime replicas (its log table)"
    )
    exporting.add_argument("--out", required=True, metavar="FILE", help="the file to write")
    exporting.add_argument(
        "--format",
        choices=FORMATS,
        help="cbor or jsonl (default: jsonl for a .jsonl or .json --out, else cbor)",
    )
    exporting.set_defaults(run=cmd_trace_export)
    verifying = actions.add_parser(
        "verify", help="check the chain of record digests of a decision log"
    )
    source = verifying.add_mutually_exclusive_group(required=True)
    source.add_argument(
        "--data", metavar="DIR", help="a data directory: its decisions.cbor (works while serving)"
    )
    source.add_argument("--log", metavar="FILE", help="a cbor or jsonl log (an export)")
    verifying.add_argument("--json", action="store_true", help="print one JSON document")
    verifying.set_defaults(run=cmd_trace_verify)


@dataclass(frozen=True, slots=True)
class Marked:
    """The store's mark of a data directory's log (None: no store) and, when the log ends
    before it, why (``lost``)."""

    mark: int | None
    lost: str | None = None


def cmd_trace_export(args: argparse.Namespace) -> int:
    fmt = args.format or ("jsonl" if str(args.out).endswith((".jsonl", ".json")) else "cbor")
    try:
        if getattr(args, "store", None) is not None:
            done = export_store(args.store, args.out, fmt)
        else:
            done = export(args.data, args.out, fmt)
    except TraceFileError as exc:
        warn(f"seif trace export: {exc}")
        return EXIT_USAGE
    seqs = f" (seq {done.first_seq}..{done.last_seq})" if done.records else ""
    say(f"exported {done.records} records{seqs} to {done.out} as {done.format}")
    if done.head.seq is not None:
        say(f"head: seq {done.head.seq} {done.head.digest}")
    if done.torn:
        say(f"left out a final record still being written ({done.torn} bytes)")
    return EXIT_OK


def cmd_trace_verify(args: argparse.Namespace) -> int:
    command = "seif trace verify"
    try:
        mark = _mark(args.data) if args.data is not None else None  # before the snapshot
        log = data_log(args.data) if args.data is not None else open_log(args.log)
        verified = log.verify()
    except TraceFileError as exc:
        return refused(command, "LOG_UNREADABLE", str(exc), as_json=args.json)
    except StoreError as exc:
        return refused(command, "STORE_UNUSABLE", str(exc), as_json=args.json)
    marked = _compared(log, verified, mark) if args.data is not None else None
    if args.json:
        emit_json(_document(verified, marked))
    else:
        for line in render(log, verified, marked):
            say(line)
    holds = verified.ok and (marked is None or marked.lost is None)
    return EXIT_OK if holds else EXIT_NOT_ACCEPTABLE


def _mark(data: str) -> int | None:
    return recorded_mark(Path(data) / DISPATCH_DB)


def _compared(log: TraceLog, verified: Verified, mark: int | None) -> Marked:
    """The mark, and whether the log (walked whole: the chain holds) ends before it."""
    if mark is None or not verified.ok:
        return Marked(mark)
    return Marked(mark, truncation(verified.head.seq or 0, mark, log.torn))


def _document(verified: Verified, marked: Marked | None) -> dict[str, Any]:
    document = verified.to_json()
    if marked is not None and marked.mark is not None:
        document["storeMark"] = marked.mark
    if marked is not None and marked.lost is not None:
        document["ok"] = False
        document["error"] = {"code": LOG_TRUNCATED, "message": marked.lost}
    return document


def render(log: TraceLog, verified: Verified, marked: Marked | None = None) -> list[str]:
    """The text report: the walk, then OK or FAIL naming the seq where the chain breaks, or
    ``LOG_TRUNCATED`` when the log ends before the store's mark."""
    lines = [f"chain of {log.path} ({log.format}):", *describe(verified)]
    if log.torn:
        lines.append(f"  left out a final record still being written ({log.torn} bytes)")
    if marked is not None:
        lines.append(_store_line(marked.mark))
    if verified.broken is not None:
        lines.append(f"FAIL: the chain breaks at {verified.broken}")
    elif marked is not None and marked.lost is not None:
        lines.append(f"FAIL: {LOG_TRUNCATED}: {marked.lost}")
    else:
        lines.append(f"OK: {_records(verified.records)}, the chain holds")
    return lines


def _store_line(mark: int | None) -> str:
    if mark is None:
        return f"  no store (`{DISPATCH_DB}`): no mark to compare the log with"
    return f"  the store (`{DISPATCH_DB}`) saw the log reach seq {mark}"


def describe(verified: Verified) -> list[str]:
    """What the walk found, indented: records, chained and unchained, the head."""
    head = verified.head
    upto = " before the break" if verified.broken is not None else ""
    lines = [f"  {_records(verified.records)}{upto}, {verified.chained} chained (version 2)"]
    if verified.unchained and verified.chained:
        lines.append(
            f"  {_records(verified.unchained)} of version 1 before the chain begins: unchained"
            " (an earlier runtime wrote them): the chain covers only the last of them"
        )
    elif verified.unchained:
        lines.append(
            f"  all {_records(verified.unchained)} of version 1, unchained (an earlier"
            " runtime's log, or a PostgreSQL store's table): the chain covers none of them"
        )
    if head.seq is not None:
        lines.append(f"  head: seq {head.seq} {head.digest}")
    return lines


def _records(n: int) -> str:
    return f"{n} record" if n == 1 else f"{n} records"
