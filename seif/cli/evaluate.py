"""``seif eval``: what a context of one objective discloses and how one call would be decided,
with the explanation, by the engine alone (``compiler.authoring.evaluate``; docs/engine.md).

Exit codes: 0 nothing was asked or the call would be allowed, 1 the call would be denied or the
project does not validate, 2 a usage error (an option without the one it needs, arguments that
are not JSON, an objective the project does not have) or an unreadable project.
"""

from __future__ import annotations

import argparse
from typing import Any

from compiler.authoring.source import AuthoringError
from policy.diagnostic import Diagnostic
from policy.json.strict import JsonError, loads
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
from seif.cli.tool import add_context_options, context_coordinates, context_principal

EXAMPLE = (
    "seif eval --project p.json --objective authoring --environment production "
    '--claims \'{"groups": ["authors"]}\' '
    '--call propose-change --arguments \'{"summary": "x"}\' --approved'
)


def add_parser(sub: Any) -> None:
    """``seif eval``."""
    summary = "what a context discloses and how a call is decided, by the engine alone"
    parser = command(sub, "eval", summary, EXAMPLE, description=summary)
    parser.add_argument("--project", required=True, metavar="FILE", help="a .json or .seif project")
    parser.add_argument("--objective", required=True, metavar="ID", help="the objective")
    add_context_options(parser)
    parser.add_argument("--call", metavar="TOOL", help="a call to decide: a tool id or name")
    parser.add_argument("--arguments", metavar="JSON", help="the call's arguments (with --call)")
    parser.add_argument(
        "--approved", action="store_true", help="simulate an exact approval of the call"
    )
    parser.add_argument("--json", action="store_true", help="print one JSON document")
    parser.set_defaults(run=cmd_eval)


def _usage(message: str) -> int:
    warn(f"seif eval: error: {message}")
    return EXIT_USAGE


def cmd_eval(args: argparse.Namespace) -> int:
    from compiler.authoring.evaluate import (  # noqa: PLC0415
        Call,
        denied,
        document,
        evaluate,
        text_lines,
    )
    from compiler.authoring.source import load_source  # noqa: PLC0415

    if args.call is None and (args.arguments is not None or args.approved):
        return _usage("--arguments and --approved go with --call TOOL")
    call = None
    if args.call is not None:
        if args.arguments is None:
            return _usage("--call needs --arguments JSON (`{}` for none)")
        try:
            call = Call(args.call, loads(args.arguments), args.approved)
        except JsonError as exc:
            message = f"--arguments is not JSON: {exc}"
            return _refuse(
                args, [Diagnostic(code="ARGUMENTS_NOT_JSON", message=message)], EXIT_USAGE
            )
    try:
        source = load_source(args.project)
    except AuthoringError as exc:  # unreadable, or not JSON / `.seif`
        return _refuse(args, exc.diagnostics, EXIT_USAGE)
    if source.project is None:  # it does not validate: not acceptable
        return _refuse(args, list(source.result.diagnostics), EXIT_NOT_ACCEPTABLE, source.text)
    try:
        report = evaluate(
            source,
            objective=args.objective,
            coordinates=context_coordinates(args),
            principal=context_principal(args),
            fixtures=args.fixtures,
            call=call,
        )
    except AuthoringError as exc:  # an objective it does not have, bad claims: a usage error
        return _refuse(args, exc.diagnostics, EXIT_USAGE)
    if args.json:
        emit_json(document(report))
    else:
        for line in text_lines(report, args.project):
            say(line)
    return EXIT_NOT_ACCEPTABLE if denied(report) else EXIT_OK


def _refuse(
    args: argparse.Namespace, diagnostics: list[Diagnostic], code: int, text: str | None = None
) -> int:
    if args.json:
        emit_json({"ok": False, "diagnostics": [d.to_json() for d in diagnostics]})
    else:
        print_diagnostics(diagnostics, args.project, text)
    return code
