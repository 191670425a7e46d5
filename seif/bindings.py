"""`seif bindings template`: the bindings file of a build with placeholders to fill in.

The template and its ``contracts.json`` are made by :mod:`compiler.authoring.bindings` (shared
with ``seif release`` and the Design workstation), re-exported here for the commands that write
them; this module is the command's rendering only.
"""

from __future__ import annotations

import argparse
from pathlib import Path

from compiler.authoring.bindings import (
    CONTRACTS_FILE,
    DEFAULT_MAX_BYTES,
    EXECUTOR_CONTRACT,
    PLACEHOLDER_ENVIRONMENT,
    bindings_template,
    contracts_document,
    json_bytes,
    placeholder_endpoint,
    secret_env,
    write_public,
    write_template,
)
from compiler.diagnostics import CompileError
from seif.output import EXIT_OK, emit_json, say, warn
from seif.release import refuse, verified_build

__all__ = [
    "CONTRACTS_FILE",
    "DEFAULT_MAX_BYTES",
    "EXECUTOR_CONTRACT",
    "PLACEHOLDER_ENVIRONMENT",
    "bindings_template",
    "cmd_bindings_template",
    "contracts_document",
    "json_bytes",
    "placeholder_endpoint",
    "secret_env",
    "write_public",
    "write_template",
]


def cmd_bindings_template(args: argparse.Namespace) -> int:
    try:
        build = verified_build(args.build)
    except CompileError as exc:
        return refuse(exc, args.build, as_json=False)
    if args.out is None:
        emit_json(bindings_template(build.project))
        for tool in build.project.tools:
            warn(f"describe of {tool.id} must answer {tool.version} {tool.contract_digest}")
        return EXIT_OK
    contracts = write_template(build, Path(args.out))
    say(f"wrote {args.out} (fill in each endpoint and set each secretRef's variable)")
    say(f"wrote {contracts} (what each executor's describe must answer):")
    for tool in build.project.tools:
        say(f"  {tool.id} {tool.version} {tool.contract_digest}")
    return EXIT_OK
