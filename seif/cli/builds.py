"""What the commands that read a build share: the build loaded and verified, with a missing one
told apart (exit 2) from one that does not verify (exit 1), and a refusal rendered once, as
diagnostics on stderr or as one JSON document, with its exit code."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from compiler.builds.build import BUILD_FILE, MANIFEST_FILE, Build, load_build
from compiler.builds.registry import RegistryError
from compiler.diagnostics import CompileError
from policy.diagnostic import Diagnostic
from seif.cli.output import (
    EXIT_LOCKED,
    EXIT_NOT_ACCEPTABLE,
    EXIT_USAGE,
    emit_json,
    print_diagnostics,
)

USAGE_CODES = frozenset(
    {
        "DIGEST_INVALID",
        "BUILD_NOT_FOUND",
        "BUILD_NOT_REGISTERED",
        "REGISTRY_UNREADABLE",
        "REGISTRY_WRITE_FAILED",
        "BY_INVALID",
    }
)


def exit_code(diagnostics: list[Diagnostic]) -> int:
    """2 for a bad argument or a missing registry or build, 3 when locked, else 1."""
    codes = {d.code for d in diagnostics}
    if "REGISTRY_LOCKED" in codes:
        return EXIT_LOCKED
    if codes and codes <= USAGE_CODES:
        return EXIT_USAGE
    return EXIT_NOT_ACCEPTABLE


def refuse(
    exc: CompileError, file: str, *, as_json: bool, extra: dict[str, Any] | None = None
) -> int:
    """Render a refusal in one place: diagnostics on stderr, or one JSON document."""
    where = exc.file if isinstance(exc, RegistryError) else file
    if as_json:
        emit_json(
            {
                "ok": False,
                **(extra or {}),
                "diagnostics": [d.to_json(where) for d in exc.diagnostics],
            }
        )
    else:
        print_diagnostics(exc.diagnostics, where)
    return exit_code(exc.diagnostics)


def verified_build(build_dir: str) -> Build:
    """``load_build`` with a missing build told apart (``BUILD_NOT_FOUND``, exit 2) from a
    build that does not verify (its own codes, exit 1)."""
    directory = Path(build_dir)
    if not (directory / BUILD_FILE).is_file() or not (directory / MANIFEST_FILE).is_file():
        message = f"no `{BUILD_FILE}` and `{MANIFEST_FILE}` in this directory"
        missing = Diagnostic(code="BUILD_NOT_FOUND", message=message, pass_name="load")
        raise RegistryError(build_dir, [missing])
    return load_build(directory)
