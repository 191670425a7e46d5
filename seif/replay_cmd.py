"""`seif trace export`, `seif trace verify` and `seif replay`: the decision log, offline.

None touches the runtime: export and verify read a consistent prefix of the log without the
data directory's lock, and replay needs only a build and a log file (no executor, no network,
no data directory). Replay walks the chain of record digests as it reads (the walk of
`seif trace verify`, ``seif.trace_verify``) and refuses a log whose chain breaks
(``LOG_CHAIN_BROKEN``) before it reports anything. Exit codes: 0 all reproduce, 1 a disclosure
does not reproduce (or none of the log's disclosures is of the build), 2 unreadable input or a
broken chain.
"""

from __future__ import annotations

import argparse
from typing import Any

from compiler.build import Build, load_build
from compiler.diagnostics import CompileError
from policy.diagnostic import headline
from policy.replay import ReplayReport, WhatIfReport, replay, what_if
from seif import replay_text, trace_verify
from seif.output import EXIT_NOT_ACCEPTABLE, EXIT_OK, EXIT_USAGE, emit_json, say, warn
from seif.tracefile import (
    FORMATS,
    ChainBrokenError,
    TraceFileError,
    TraceLog,
    export,
    export_store,
    open_log,
)
from servers.log.chain import Chain, Verified


def add_parsers(sub: Any) -> None:
    """Register `trace export`, `trace verify` and `replay` on the `seif` sub-command
    parsers."""
    trace = sub.add_parser("trace", help="the decision log")
    actions = trace.add_subparsers(dest="trace_command", required=True, parser_class=type(trace))
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
    trace_verify.add_parser(actions)

    replaying = sub.add_parser(
        "replay", help="re-evaluate the log's disclosures offline (and a candidate's what-if)"
    )
    replaying.add_argument(
        "--build", required=True, metavar="DIR", help="the build whose disclosures to replay"
    )
    replaying.add_argument("--log", required=True, metavar="FILE", help="a cbor or jsonl log")
    replaying.add_argument("--candidate", metavar="DIR", help="a candidate build: the what-if")
    replaying.add_argument("--json", action="store_true", help="print one JSON document")
    replaying.set_defaults(run=cmd_replay)


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


class _Refused(Exception):
    def __init__(self, code: str, message: str) -> None:
        super().__init__(message)
        self.code = code
        self.message = message


def _load(directory: str) -> Build:
    try:
        return load_build(directory)
    except CompileError as exc:
        problems = "; ".join(headline(d) for d in exc.diagnostics)
        raise _Refused("BUILD_UNREADABLE", f"{directory}: {problems}") from None


Ran = tuple[TraceLog, Verified, ReplayReport, WhatIfReport | None]


def _run(args: argparse.Namespace) -> Ran:
    build = _load(args.build)
    candidate = _load(args.candidate) if args.candidate else None
    chain = Chain()
    try:
        log = open_log(args.log)
        report = replay(build.project, log.records(chain), build_digest=build.digest)
        found = None
        if candidate is not None:  # a second pass over the same snapshot
            found = what_if(
                build.project,
                candidate.project,
                log.records(),
                build_digest=build.digest,
                candidate_digest=candidate.digest,
            )
    except ChainBrokenError as exc:
        message = f"{exc}; nothing was replayed (`seif trace verify --log {args.log}`)"
        raise _Refused("LOG_CHAIN_BROKEN", message) from None
    except TraceFileError as exc:
        raise _Refused("LOG_UNREADABLE", str(exc)) from None
    return log, chain.verified(), report, found


def cmd_replay(args: argparse.Namespace) -> int:
    try:
        log, chain, report, changes = _run(args)
    except _Refused as refused:
        warn(f"seif replay: {refused.message}")
        if args.json:
            emit_json({"ok": False, "error": {"code": refused.code, "message": refused.message}})
        return EXIT_USAGE
    if args.json:
        found = {"path": str(log.path), "format": log.format, "tornBytes": log.torn}
        document: dict[str, Any] = {
            "ok": report.ok,
            "log": {**found, "chain": chain.to_json()},
            "replay": report.to_json(),
        }
        if changes is not None:
            document["whatIf"] = changes.to_json()
        emit_json(document)
    else:
        for line in replay_text.render(log, report, changes, chain):
            say(line)
    return EXIT_OK if report.ok else EXIT_NOT_ACCEPTABLE
