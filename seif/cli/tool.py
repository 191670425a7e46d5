"""``seif tool new|include|protect|show|check-call|import`` (docs/authoring.md; ``import``:
:mod:`seif.cli.tool_import`, docs/upstream-mcp.md).

Each command calls one operation of ``compiler.authoring`` (the Design workstation calls the
same ones). A change is written to the project file only when it validates; otherwise its
diagnostics go to stderr and nothing is written. Exit codes: 0 done (check-call: allowed),
1 refused (check-call: denied), 2 a usage error or an unreadable input.
"""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from compiler.authoring.source import AuthoringError, Edit, ProjectSource, load_source, save
from policy.diagnostic import Diagnostic
from policy.ir import COORDINATE_FIELDS
from policy.json.strict import JsonError, loads
from seif.cli import tool_import
from seif.cli.output import (
    EXIT_NOT_ACCEPTABLE,
    EXIT_OK,
    EXIT_USAGE,
    emit_json,
    print_diagnostics,
    say,
    warn,
)
from seif.cli.parsing import command, subcommands

USAGE_CODES = frozenset({
    "FILE_UNREADABLE", "FILE_UNWRITABLE", "JSON_SYNTAX", "SEIF_SYNTAX", "ARGUMENTS_NOT_JSON",
    "INVALID_ID", "FIELD_INVALID", "FIELD_TYPE_UNKNOWN", "TEMPLATE_UNKNOWN", "ARGUMENTS_TWICE",
    "BINDINGS_INVALID", "CLAIMS_INVALID",
})  # fmt: skip
"""Codes of a malformed option or an unreadable input: exit 2 (the others refuse: exit 1)."""

EXAMPLES = {
    "new": "seif tool new --project p.json --template ticket-creation --id open-ticket",
    "include": "seif tool include --project p.json --tool open-ticket --profile authoring",
    "protect": "seif tool protect --project p.json --tool open-ticket",
    "show": "seif tool show --project p.json --tool open-ticket --bindings bindings.json",
    "check-call": "seif tool check-call --project p.json --objective authoring --tool "
    'open-ticket --arguments \'{"title": "Printer", "description": "Jammed", '
    '"priority": "low"}\' --approved --environment staging',
}


def add_parser(sub: Any) -> None:
    """``seif tool`` and its sub-commands."""
    tool = sub.add_parser("tool", help="add, include, protect, show and check one tool")
    inner = subcommands(tool, "tool_command")
    _new(_command(inner, "new", "add a tool contract from a template (included nowhere)"))
    include = _command(inner, "include", "include a tool in a profile (explicitly)")
    include.add_argument("--tool", required=True, metavar="ID", help="the tool to include")
    include.add_argument("--profile", required=True, metavar="ID", help="the profile")
    include.add_argument("--required", action="store_true", help="a required inclusion")
    include.set_defaults(run=cmd_include)
    protect = _command(inner, "protect", "add guard tests for every objective (idempotent)")
    protect.add_argument("--tool", required=True, metavar="ID", help="the tool to protect")
    protect.set_defaults(run=cmd_protect)
    show = _command(inner, "show", "the tool's audience, protection and connection")
    show.add_argument("--tool", required=True, metavar="ID", help="the tool to show")
    show.add_argument("--bindings", metavar="FILE", help="a bindings file: the connection")
    show.set_defaults(run=cmd_show)
    _check_call(_command(inner, "check-call", "check one call with the engine; dispatch nothing"))
    tool_import.add_parser(inner)


def _command(inner: Any, name: str, summary: str) -> argparse.ArgumentParser:
    parser = command(inner, name, summary, EXAMPLES[name], description=summary)
    parser.add_argument("--project", required=True, metavar="FILE", help="a .json or .seif project")
    parser.add_argument("--json", action="store_true", help="print one JSON document")
    return parser


def _new(new: argparse.ArgumentParser) -> None:
    from compiler.authoring.templates import FIELD_TYPES, TEMPLATES  # noqa: PLC0415

    new.add_argument(
        "--template", required=True, choices=tuple(TEMPLATES), help="the starting point"
    )
    new.add_argument("--id", required=True, metavar="ID", help="the new tool's id")
    new.add_argument(
        "--field",
        action="append",
        default=[],
        metavar="NAME:TYPE[:required]",
        help=f"an argument (repeatable; types {', '.join(FIELD_TYPES)}, or TYPE[] for a list)",
    )
    new.add_argument("--schema", metavar="FILE", help="the arguments as a JSON Schema file")
    new.add_argument("--name", help="the function name models see (default: the id with _)")
    new.add_argument("--description", help="what the tool does, for the model")
    new.add_argument("--version", help="the contract version (default 1.0.0)")
    new.add_argument("--effect", choices=("read", "write"), help="custom tools: read (default)")
    new.set_defaults(run=cmd_new)


def _check_call(check: argparse.ArgumentParser) -> None:
    check.add_argument("--objective", required=True, metavar="ID", help="the objective")
    check.add_argument("--tool", required=True, metavar="ID", help="a tool id or function name")
    check.add_argument("--arguments", required=True, metavar="JSON", help="the call's arguments")
    check.add_argument("--approved", action="store_true", help="simulate an exact approval")
    add_context_options(check)
    check.set_defaults(run=cmd_check_call)


def add_context_options(parser: argparse.ArgumentParser) -> None:
    """``--consumer``, ``--environment``, ``--deployment``, ``--claims``, ``--subject`` and
    ``--fixtures``: the simulated context's coordinates, who resolves it and calls (its
    principal) and its tools' availability (check-call and eval)."""
    for name in COORDINATE_FIELDS:
        parser.add_argument(
            f"--{name}", metavar=name[0].upper(), help=f"the context's {name} (context.{name})"
        )
    parser.add_argument(
        "--claims",
        metavar="JSON",
        help="the caller's claims, a JSON object (principal.claims): each a string, a number, "
        "a boolean or a list of strings",
    )
    parser.add_argument("--subject", metavar="S", help="the caller's subject (principal.subject)")
    parser.add_argument(
        "--fixtures",
        choices=("current", "project"),
        default="current",
        help="availability: every tool READY as declared (default), or the project's toolFixtures",
    )


def context_principal(args: argparse.Namespace) -> dict[str, Any] | None:
    """The principal ``--subject`` and ``--claims`` give (None: neither, as a test without
    ``principal``); ``AuthoringError`` ``CLAIMS_INVALID`` for claims that are not a JSON object
    of claims."""
    from compiler.authoring.simulate import principal_given  # noqa: PLC0415

    return principal_given(args.subject, args.claims)


def context_coordinates(args: argparse.Namespace) -> dict[str, str]:
    """The coordinates the options give (an empty one is absent)."""
    from compiler.authoring.simulate import coordinates_given  # noqa: PLC0415

    return coordinates_given(args.consumer, args.environment, args.deployment)


# --- running -------------------------------------------------------------------------------------


def _refuse(args: argparse.Namespace, diagnostics: list[Diagnostic], text: str | None) -> int:
    code = EXIT_USAGE if any(d.code in USAGE_CODES for d in diagnostics) else EXIT_NOT_ACCEPTABLE
    if args.json:
        emit_json({"ok": False, "diagnostics": [d.to_json() for d in diagnostics]})
        return code
    print_diagnostics(diagnostics, args.project, text)
    return code


def _source(args: argparse.Namespace) -> ProjectSource:
    return load_source(args.project)


def _finish(args: argparse.Namespace, edit: Edit) -> int:
    """Write ``edit`` when it validates; print what it did, or why nothing was written."""
    if not edit.ok:
        code = _refuse(args, list(edit.diagnostics), edit.source.text)
        if not args.json:
            warn(f"{args.project}: nothing was written")
        return code
    try:
        written = save(edit)
    except AuthoringError as exc:
        return _refuse(args, exc.diagnostics, None)
    if args.json:
        emit_json({**edit.to_json(), "written": written})
        return EXIT_OK
    for note in edit.notes:
        say(note)
    say(f"wrote {args.project}" if written else f"{args.project} unchanged")
    return EXIT_OK


def cmd_new(args: argparse.Namespace) -> int:
    from compiler.authoring.tools import new_tool  # noqa: PLC0415

    try:
        source = _source(args)
        schema = _json_file("--schema", args.schema) if args.schema else None
    except AuthoringError as exc:
        return _refuse(args, exc.diagnostics, None)
    edit = new_tool(
        source,
        template=args.template,
        tool_id=args.id,
        fields=args.field,
        schema=schema,
        name=args.name,
        description=args.description,
        version=args.version,
        effect=args.effect,
    )
    return _finish(args, edit)


def _json_file(flag: str, path: str) -> Any:
    """The JSON document of the file an option names; a usage error when it cannot be."""
    try:
        return loads(Path(path).read_bytes())
    except OSError as exc:
        raise _usage("FILE_UNREADABLE", f"{flag} `{path}` cannot be read: {exc.strerror}") from None
    except JsonError as exc:
        raise _usage("JSON_SYNTAX", f"{flag} `{path}` is not JSON: {exc}") from None


def _usage(code: str, message: str) -> AuthoringError:
    return AuthoringError([Diagnostic(code=code, message=message)])


def cmd_include(args: argparse.Namespace) -> int:
    from compiler.authoring.tools import include_tool  # noqa: PLC0415

    try:
        source = _source(args)
    except AuthoringError as exc:
        return _refuse(args, exc.diagnostics, None)
    edit = include_tool(source, tool_id=args.tool, profile_id=args.profile, required=args.required)
    return _finish(args, edit)


def cmd_protect(args: argparse.Namespace) -> int:
    from compiler.authoring.protect import protect_tool  # noqa: PLC0415

    try:
        source = _source(args)
    except AuthoringError as exc:
        return _refuse(args, exc.diagnostics, None)
    return _finish(args, protect_tool(source, tool_id=args.tool))


def cmd_show(args: argparse.Namespace) -> int:
    from compiler.authoring.show import show_tool, text_lines  # noqa: PLC0415

    try:
        source = _source(args)
        bindings = _bindings(args.bindings) if args.bindings else None
        report = show_tool(source, tool_id=args.tool, bindings=bindings)
    except AuthoringError as exc:
        return _refuse(args, exc.diagnostics, None)
    if args.json:
        emit_json(report)
    else:
        for line in text_lines(report):
            say(line)
    return EXIT_OK


def _bindings(path: str) -> Any:
    from compiler.authoring.release import bindings_problems  # noqa: PLC0415

    document = _json_file("--bindings", path)
    problems = bindings_problems(document)
    if problems:
        raise AuthoringError(problems)
    return document


def cmd_check_call(args: argparse.Namespace) -> int:
    from compiler.authoring.checkcall import check_call, text_lines  # noqa: PLC0415

    try:
        arguments = loads(args.arguments)
    except JsonError as exc:
        return _refuse(
            args,
            [Diagnostic(code="ARGUMENTS_NOT_JSON", message=f"--arguments is not JSON: {exc}")],
            None,
        )
    try:
        report = check_call(
            _source(args),
            objective=args.objective,
            tool=args.tool,
            arguments=arguments,
            approved=args.approved,
            fixtures=args.fixtures,
            coordinates=context_coordinates(args),
            principal=context_principal(args),
        )
    except AuthoringError as exc:
        return _refuse(args, exc.diagnostics, None)
    if args.json:
        emit_json(report)
    else:
        for line in text_lines(report, args.project):
            say(line)
    return EXIT_OK if report["allowed"] else EXIT_NOT_ACCEPTABLE
