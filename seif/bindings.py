"""`seif bindings template`: the bindings file of a build with placeholders to fill in.

The template is a bindings file exactly (servers/config.py, a closed format), so that it loads
once its placeholders are replaced: one entry per tool with a placeholder ``https://`` endpoint,
a ``secretRef`` naming the environment variable that will hold that executor's credential, the
tool's declared ``timeoutMs`` and the default ``maxBytes``. What each executor must describe
(``GET {endpoint}/describe``: the executor contract, the tool id, version and contract digest) is
not a bindings field, so it goes into ``contracts.json`` next to the template.
"""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from compiler.build import Build, write_atomic
from compiler.diagnostics import CompileError
from policy.ir import Project
from policy.strictjson import dump_bytes
from seif.output import EXIT_OK, emit_json, say, warn
from seif.release import refuse, verified_build

EXECUTOR_CONTRACT = "context-tool-executor.v1"  # servers.executor.client.CONTRACT, without aiohttp
PLACEHOLDER_ENVIRONMENT = "production"
DEFAULT_MAX_BYTES = 65536  # servers.config.files.DEFAULT_MAX_BYTES
CONTRACTS_FILE = "contracts.json"


def placeholder_endpoint(tool_id: str) -> str:
    return f"https://executor.example/{tool_id}"


def secret_env(tool_id: str) -> str:
    """``CONTEXT_TOOL_<TOOL_ID_UPPER_UNDERSCORED>_TOKEN``: inside the tool secret allowlist."""
    return f"CONTEXT_TOOL_{tool_id.upper().replace('-', '_')}_TOKEN"


def bindings_template(project: Project) -> dict[str, Any]:
    return {
        "environment": PLACEHOLDER_ENVIRONMENT,
        "revision": 1,
        "tools": {
            tool.id: {
                "endpoint": placeholder_endpoint(tool.id),
                "secretRef": f"env:{secret_env(tool.id)}",
                "timeoutMs": tool.timeout_ms,
                "maxBytes": DEFAULT_MAX_BYTES,
            }
            for tool in project.tools
        },
    }


def contracts_document(build: Build) -> dict[str, Any]:
    """What every bound executor must answer on ``GET {endpoint}/describe``, per tool."""
    return {
        "build": build.digest,
        "format": build.format,
        "requiresRuntime": build.requires_runtime,
        "project": {"id": build.project.id, "version": build.project.version},
        "executorContract": EXECUTOR_CONTRACT,
        "tools": [
            {
                "id": tool.id,
                "name": tool.name,
                "version": tool.version,
                "contractDigest": tool.contract_digest,
                "effect": tool.effect,
                "approval": tool.approval,
                "secretEnv": secret_env(tool.id),
                "describe": {
                    "contract": EXECUTOR_CONTRACT,
                    "tool": {
                        "id": tool.id,
                        "version": tool.version,
                        "contractDigest": tool.contract_digest,
                    },
                },
            }
            for tool in build.project.tools
        ],
    }


def json_bytes(document: Any) -> bytes:
    return dump_bytes(document, indent=2) + b"\n"


def write_public(path: Path, data: bytes) -> None:
    """A template and its contracts are meant to be shared: world-readable, written atomically."""
    write_atomic(path, data, mode=0o644)


def write_template(build: Build, out: Path) -> Path:
    """Write the template to ``out`` and ``contracts.json`` beside it; returns the latter."""
    out.parent.mkdir(parents=True, exist_ok=True)
    write_public(out, json_bytes(bindings_template(build.project)))
    contracts = out.parent / CONTRACTS_FILE
    write_public(contracts, json_bytes(contracts_document(build)))
    return contracts


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
