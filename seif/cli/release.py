"""`seif release`: validate, build, register and write the next revision of an environment's
bindings file (:mod:`compiler.authoring.release`); it says what to fill in, and that nothing was
promoted or deployed.

Exit codes: 0 prepared; 1 the project is invalid, its tests fail or the bindings file is not a
bindings file; 2 a bad argument or a file that cannot be read or written. The guided release
itself loads only when the command runs.
"""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING, Any

from seif.cli.builds import USAGE_CODES
from seif.cli.output import (
    EXIT_NOT_ACCEPTABLE,
    EXIT_OK,
    EXIT_USAGE,
    emit_json,
    print_diagnostics,
    print_report,
    problem,
    say,
    warn,
)
from seif.cli.parsing import command

if TYPE_CHECKING:  # the guided release (the registry, the builds) loads only when it runs
    from compiler.authoring.release import Release, ReleaseError, ToolSetup

EXAMPLE = (
    "seif release --project context-project.json --registry /srv/seif-registry "
    "--environment staging"
)


def add_parser(sub: Any) -> None:
    """``seif release`` (guided: docs/authoring.md)."""
    summary = "validate, build, register and write the environment's next bindings revision"
    description = (
        "Validate, test, build and register a project, then write the next revision of an "
        "environment's bindings file with what to fill in. Nothing is promoted or deployed."
    )
    parser = command(sub, "release", summary, EXAMPLE, description=description)
    parser.add_argument("--project", required=True, metavar="FILE", help="the project file")
    parser.add_argument("--registry", required=True, metavar="REG", help="the registry directory")
    parser.add_argument(
        "--environment", required=True, metavar="NAME", help="the environment to bind, an id"
    )
    parser.add_argument(
        "--bindings",
        metavar="FILE",
        help="the bindings file (default: bindings.NAME.json beside the project file)",
    )
    parser.add_argument("--json", action="store_true", help="print one JSON document")
    parser.set_defaults(run=cmd_release)


RELEASE_USAGE_CODES = USAGE_CODES | {
    "FILE_UNREADABLE",
    "ENVIRONMENT_INVALID",
    "BINDINGS_UNREADABLE",
    "BINDINGS_ENVIRONMENT_MISMATCH",
    "BINDINGS_PATH_REFUSED",
    "BINDINGS_WRITE_FAILED",
}


def exit_code(error: ReleaseError) -> int:
    codes = {d.code for d in error.diagnostics}
    return EXIT_USAGE if codes and codes <= RELEASE_USAGE_CODES else EXIT_NOT_ACCEPTABLE


def cmd_release(args: argparse.Namespace) -> int:
    from compiler.authoring.release import ReleaseError, prepare_release  # noqa: PLC0415

    try:
        release = prepare_release(args.project, args.registry, args.environment, args.bindings)
    except ReleaseError as exc:
        _refused(exc, args.project, as_json=args.json)
        return exit_code(exc)
    if args.json:
        emit_json(release.to_json())
    else:
        for line in text_lines(release):
            say(line)
    return EXIT_OK


def _refused(error: ReleaseError, project: str, *, as_json: bool) -> None:
    if as_json:
        document: dict[str, Any] = {
            "ok": False,
            "registered": error.registered,
            "promoted": False,
            "deployed": False,
            "diagnostics": [d.to_json(error.file) for d in error.diagnostics],
        }
        if error.report is not None:
            document["tests"] = error.report.to_json()
        emit_json(document)
        return
    if error.report is not None:
        print_report(error.file, error.report, to_stderr=True)
        why = "the project's tests fail; nothing was registered or written"
        problem(error.file, "TESTS_FAILED", why)
        return
    print_diagnostics(error.diagnostics, error.file, error.source)
    if error.registered is None:
        warn(f"{project}: not released: nothing was registered or written")
    else:
        warn(
            f"{project}: {error.registered} was registered, the bindings file was not written: "
            f"release again once it can be; nothing was promoted or deployed"
        )


def text_lines(release: Release) -> list[str]:
    """What ``seif release`` prints: the build, the file, what to fill in, what comes next."""
    from compiler.authoring import release as guided  # noqa: PLC0415  # loaded by cmd_release

    registered = "already registered in" if release.already_registered else "registered in"
    was = f" (was {release.previous_revision})" if release.previous_revision is not None else ""
    lines = [
        f"{release.digest} {registered} {release.registry}",
        f"wrote {release.bindings}: environment {release.environment}, "
        f"revision {release.revision}{was}",
        f"wrote {release.contracts}: what each executor's describe must answer",
    ]
    if release.tools:
        lines.append(f"fill in {release.bindings}, per tool:")
        for tool in release.tools:
            lines.extend(_tool_lines(tool))
    else:
        lines.append("the build declares no tool: there is nothing to bind")
    lines.extend(f"note: {n}" for n in release.notes[1:])  # the first says how it registered
    lines.append(guided.CONFIGURED_NOT_READY.replace("the bindings file", str(release.bindings)))
    lines.append(
        f"  to check: seif serve --build {release.entry} --bindings {release.bindings} "
        f"--credentials FILE --data DIR, then GET {guided.READY_ROUTE}"
    )
    lines.append(f"next: seif promote --registry {release.registry} --candidate {release.digest}")
    lines.append(guided.NOTHING_PROMOTED)
    return lines


def _tool_lines(tool: ToolSetup) -> list[str]:
    if tool.upstream is not None:
        where = f"upstreams.{tool.upstream}"
        state = (
            f"replace the placeholder command of {where} with the server's command (or a url)"
            if tool.placeholder
            else f"{where} (configured)"
        )
        return [f"  {tool.id} {tool.version}", f"    upstream: {tool.upstream}: {state}"]
    if tool.placeholder:
        endpoint = f"replace the placeholder {tool.endpoint} with its executor's URL"
    else:
        endpoint = f"{tool.endpoint} (configured, kept from the previous revision)"
    if tool.secret_env is not None:
        secret = f"set {tool.secret_env} where the runtime runs (its secretRef)"
    elif tool.secret_ref is not None:
        secret = f"store the keychain entry of {tool.secret_ref} (service `seif`)"
    else:
        secret = "none (no secretRef: only a loopback http:// endpoint goes without one)"
    return [
        f"  {tool.id} {tool.version}",
        f"    endpoint: {endpoint}",
        f"    secret: {secret}",
        f"    describe must answer: {tool.id} {tool.version} {tool.contract_digest}",
    ]
