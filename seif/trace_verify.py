"""`seif trace verify --data DIR | --log FILE [--json]`: walk the chain of record digests.

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

from seif.output import EXIT_NOT_ACCEPTABLE, EXIT_OK, emit_json, refused, say
from seif.tracefile import TraceFileError, TraceLog, data_log, open_log
from servers.log.chain import Verified


def add_parser(actions: Any) -> None:
    """Register `verify` on the `seif trace` sub-command parsers."""
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
