"""``seif tool import``: an upstream MCP server's tools as contracts (docs/upstream-mcp.md).

The listing is read through the official ``mcp`` SDK's client (``servers.upstream.listing``);
the contracts are made and spliced by ``compiler.authoring.upstream`` and written only when the
project validates. Exit codes: 0 every selected tool imported, 1 some refused (the others are
written) or the result does not validate (nothing is), 2 a usage error or an upstream that
cannot be reached.
"""

from __future__ import annotations

import argparse
import asyncio
import os
from pathlib import Path
from typing import Any

from compiler.authoring.source import AuthoringError, load_source, save
from compiler.authoring.upstream import Import, Options, Server, import_tools
from policy.diagnostic import Diagnostic
from seif.cli.output import (
    EXIT_NOT_ACCEPTABLE,
    EXIT_OK,
    EXIT_USAGE,
    emit_json,
    print_diagnostics,
    say,
    warn,
)
from seif.cli.parsing import command

EXAMPLE = (
    "seif tool import --project p.json --server time -- mcp-server-time\n"
    "  seif tool import --project p.seif --server tickets --url https://tickets.example/mcp "
    "--secret-ref env:CONTEXT_TOOL_TICKETS_TOKEN --tool create --effect create=write"
)


def add_parser(inner: Any) -> None:
    """``seif tool import`` under ``seif tool``."""
    summary = "import an upstream MCP server's tools as contracts (included nowhere)"
    parser = command(inner, "import", summary, EXAMPLE, description=summary)
    parser.add_argument("--project", required=True, metavar="FILE", help="a .json or .seif project")
    parser.add_argument("--json", action="store_true", help="print one JSON document")
    parser.add_argument("--server", required=True, metavar="ID", help="the upstream's id")
    parser.add_argument("--url", help="a Streamable HTTP endpoint (else: -- COMMAND [ARG...])")
    parser.add_argument("--secret-ref", metavar="REF", help="--url: the bearer token's reference")
    parser.add_argument("--ca-file", metavar="PEM", help="--url: the CA certificates to trust")
    parser.add_argument(
        "--tool", action="append", default=[], metavar="NAME", help="an upstream tool (repeatable)"
    )
    parser.add_argument("--prefix", help="of the tools' ids and names (default: the server id)")
    parser.add_argument(
        "--effect",
        action="append",
        default=[],
        metavar="NAME=read|write",
        help="an upstream tool's effect after review (repeatable)",
    )
    parser.add_argument("--update", action="store_true", help="re-import tools already imported")
    parser.add_argument("command", nargs="*", metavar="COMMAND", help="after --: a stdio server")
    parser.set_defaults(run=cmd_import)


def cmd_import(args: argparse.Namespace) -> int:
    try:
        options = _options(args)
        source = load_source(args.project)
        target = _target(args)
    except AuthoringError as exc:
        return _usage(args, exc.diagnostics)
    from servers.upstream.listing import UpstreamUnreachable, list_tools  # noqa: PLC0415

    try:
        listing = asyncio.run(list_tools(target))
    except UpstreamUnreachable as exc:
        where = args.url or " ".join(args.command[:1])
        message = f"the upstream `{where}` cannot be reached: {exc}"
        return _usage(args, [Diagnostic(code="UPSTREAM_UNAVAILABLE", message=message)])
    server = Server(listing.name, listing.version, listing.protocol_version)
    try:
        result = import_tools(source, server, listing.tools, options)
    except AuthoringError as exc:
        return _usage(args, exc.diagnostics)
    return _finish(args, result)


def _options(args: argparse.Namespace) -> Options:
    effects: dict[str, str] = {}
    for given in args.effect:
        name, sep, effect = given.rpartition("=")
        if not sep or not name:
            raise _refusal("INVALID_VALUE", f"--effect `{given}`: write NAME=read or NAME=write")
        effects[name] = effect
    return Options(
        server=args.server,
        prefix=args.prefix,
        tools=tuple(args.tool),
        effects=effects,
        update=args.update,
    )


def _target(args: argparse.Namespace) -> Any:
    from servers.upstream.listing import Http, Stdio  # noqa: PLC0415

    if (args.url is None) == (not args.command):
        raise _refusal(
            "UPSTREAM_TARGET_INVALID", "give the upstream as --url URL or as -- COMMAND [ARG...]"
        )
    if args.url is None:
        if args.secret_ref or args.ca_file:
            raise _refusal("UPSTREAM_TARGET_INVALID", "--secret-ref and --ca-file go with --url")
        return Stdio(tuple(args.command))
    from servers.config.endpoints import endpoint_problems  # noqa: PLC0415

    problems = endpoint_problems(args.url, needs_secret=False)  # the bindings' rules for a url
    if problems:  # plain http to another host would send the bearer token in clear
        raise _refusal("UPSTREAM_TARGET_INVALID", f"--url: {problems[0][1]}")
    return Http(args.url, _bearer(args.secret_ref), _tls(args.ca_file))


def _bearer(reference: str | None) -> str | None:
    if reference is None:
        return None
    from servers.config.files import ConfigError, tool_secret  # noqa: PLC0415

    try:
        return tool_secret(reference, os.environ, "--secret-ref")
    except ConfigError as exc:
        raise AuthoringError(exc.diagnostics) from None


def _tls(ca_file: str | None) -> Any:
    if ca_file is None:
        return None
    from servers.config.tls import CaFileProblem, TrustStores  # noqa: PLC0415

    try:
        return TrustStores(Path.cwd()).ca_file(ca_file)[1]
    except CaFileProblem as exc:
        raise AuthoringError(exc.diagnostics) from None


def _refusal(code: str, message: str) -> AuthoringError:
    return AuthoringError([Diagnostic(code=code, message=message)])


def _usage(args: argparse.Namespace, diagnostics: Any) -> int:
    """A command line that must change, a file that cannot be read, an upstream that cannot be
    reached: exit 2, nothing written."""
    return _refused(args, list(diagnostics), EXIT_USAGE)


def _refused(args: argparse.Namespace, diagnostics: list[Diagnostic], code: int) -> int:
    if args.json:
        emit_json({"ok": False, "diagnostics": [d.to_json() for d in diagnostics]})
    else:
        print_diagnostics(diagnostics, args.project)
        warn(f"{args.project}: nothing was written")
    return code


def _finish(args: argparse.Namespace, result: Import) -> int:
    edit = result.edit
    if not edit.ok:  # the project would not validate: nothing is written
        return _refused(args, list(edit.diagnostics), EXIT_NOT_ACCEPTABLE)
    try:
        written = save(edit)
    except AuthoringError as exc:
        return _usage(args, exc.diagnostics)
    if args.json:
        emit_json(result.to_json())
    else:
        _print(args, result, written)
    return EXIT_NOT_ACCEPTABLE if result.refused else EXIT_OK


def _print(args: argparse.Namespace, result: Import, written: bool) -> None:
    server = result.server
    say(f"upstream {server.name} {server.version} (protocol {server.protocol_version})")
    for item in result.imported:
        d = item.declaration
        pin = d["upstream"]["descriptorDigest"]
        say(f"{d['id']} {d['version']} ({d['name']}) {d['effect']} {pin}")
        for pointer in item.dropped:
            say(f"  dropped {pointer}")
        for pointer in item.narrowed:
            say(f"  narrowed {pointer}")
        if item.diff:
            for line in item.diff.splitlines():
                say(f"  {line}")
    for r in result.refused:
        say(f"refused {r.tool}: {r.code} at {r.pointer}: {r.message}")
    for note in result.edit.notes:
        say(note)
    say(f"wrote {args.project}" if written else f"{args.project} unchanged")
