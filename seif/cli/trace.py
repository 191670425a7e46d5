"""`seif trace export` and `seif trace verify`: the decision log, offline.

`seif trace export --data DIR | --store URL --out FILE` writes a consistent prefix of the log
without the data directory's lock. `seif trace verify --data DIR | --log FILE [--json]` walks
the chain of record digests.

The walk is ``servers.log.chain.Chain``, over a snapshot of the log (``seif.tracefile``): a CBOR
log's bytes as stored, or a JSON Lines export's records re-encoded in canonical CBOR. It takes
no lock (a data directory's log can be verified while the runtime serves). Exit codes: 0 the
chain holds (the record count and the head printed), 1 it breaks (the first record whose
``prev`` does not match the record before it named as ``seq N``), 2 an unreadable log.
Records of version 1 before the chain begins are counted as unchained, not as a break.
"""

from __future__ import annotations

import argparse
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
    try:
        log = data_log(args.data) if args.data is not None else open_log(args.log)
        verified = log.verify()
    except TraceFileError as exc:
        return refused("seif trace verify", "LOG_UNREADABLE", str(exc), as_json=args.json)
    if args.json:
        emit_json(verified.to_json())
    else:
        for line in render(log, verified):
            say(line)
    return EXIT_OK if verified.ok else EXIT_NOT_ACCEPTABLE


def render(log: TraceLog, verified: Verified) -> list[str]:
    """The text report: the walk, then OK or FAIL naming the seq where the chain breaks."""
    lines = [f"chain of {log.path} ({log.format}):", *describe(verified)]
    if log.torn:
        lines.append(f"  left out a final record still being written ({log.torn} bytes)")
    if verified.broken is not None:
        lines.append(f"FAIL: the chain breaks at {verified.broken}")
    else:
        lines.append(f"OK: {_records(verified.records)}, the chain holds")
    return lines


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
