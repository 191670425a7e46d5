"""``seif starter``: a runnable executor project for one tool of a build (docs/authoring.md).

A starter is a folder an engineer copies into their own backend's repository: an HTTP server of
the executor protocol ``context-tool-executor.v1`` (``GET /describe`` and ``POST /execute`` at
the root of its URL), in Python (aiohttp) or in Node (its built-in ``http`` module only). The
server code is static (the files of ``starters/python`` or ``starters/node`` beside this
module); what is particular to the tool is the generated ``contract.json`` it reads at start:
the tool's id, name, version, exact contract digest, argument and result schemas, effect and
approval. Its business handler is a placeholder that answers ``ok: false`` with
``NOT_IMPLEMENTED`` until someone implements it.

:func:`write_starter` writes the whole folder or nothing: the files go into a temporary folder
beside ``out``, which is then renamed onto ``out`` (an absent path or an empty folder).
"""

from __future__ import annotations

import os
import shlex
import shutil
import tempfile
from collections.abc import Mapping
from dataclasses import dataclass
from importlib import resources
from importlib.resources.abc import Traversable
from pathlib import Path
from typing import Any

from compiler.authoring.bindings import (
    DEFAULT_MAX_BYTES,
    EXECUTOR_CONTRACT,
    executor_binding,
    secret_env,
)
from compiler.authoring.source import AuthoringError, refusal, tool_of
from policy.ir import Project, Tool
from policy.json.strict import dump_bytes
from policy.json.value import thaw

LANGS: tuple[str, ...] = ("python", "node")
DEFAULT_PORT = 8801
TOKEN_ENV = "SEIF_EXECUTOR_TOKEN"
CONTRACT_FILE = "contract.json"
README_FILE = "README.md"
EXECUTABLE = frozenset({"run"})
"""The files written with mode 0755; every other file is 0644."""


@dataclass(frozen=True)
class StarterResult:
    """What :func:`write_starter` wrote.

    ``files`` are the names inside ``out`` (sorted); ``run`` is the command line that starts the
    starter (the ``run`` script, shell-quoted, with ``--port``), to be run with
    ``SEIF_EXECUTOR_TOKEN`` set.
    """

    out: Path
    lang: str
    tool_id: str
    version: str
    contract_digest: str
    files: tuple[str, ...]
    run: str

    def to_json(self) -> dict[str, Any]:
        return {
            "out": str(self.out),
            "lang": self.lang,
            "toolId": self.tool_id,
            "version": self.version,
            "contractDigest": self.contract_digest,
            "files": list(self.files),
            "run": self.run,
        }


def contract_document(tool: Tool) -> dict[str, Any]:
    """The generated ``contract.json``: everything the static server reads at start."""
    return {
        "executorContract": EXECUTOR_CONTRACT,
        "id": tool.id,
        "name": tool.name,
        "version": tool.version,
        "contractDigest": tool.contract_digest,
        "description": tool.description,
        "effect": tool.effect,
        "approval": tool.approval,
        "timeoutMs": tool.timeout_ms,
        "parameters": thaw(tool.parameters),
        "result": None if tool.result is None else thaw(tool.result),
    }


def binding_entry(tool: Tool, port: int = DEFAULT_PORT) -> dict[str, Any]:
    """The bindings entry of a starter on this machine: its root URL, the secret's variable,
    the tool's declared timeout and the default byte limit (docs/runtime-config.md)."""
    return {**executor_binding(tool), "endpoint": f"http://127.0.0.1:{port}"}


def _placeholders(tool: Tool, lang: str) -> dict[str, str]:
    binding = {"environment": "production", "revision": 1, "tools": {tool.id: binding_entry(tool)}}
    return {
        "TOOL_ID": tool.id,
        "TOOL_NAME": tool.name,
        "TOOL_VERSION": tool.version,
        "CONTRACT_DIGEST": tool.contract_digest,
        "EFFECT": tool.effect,
        "APPROVAL": tool.approval,
        "TIMEOUT_MS": str(tool.timeout_ms),
        "MAX_BYTES": str(DEFAULT_MAX_BYTES),
        "SECRET_ENV": secret_env(tool.id),
        "TOKEN_ENV": TOKEN_ENV,
        "PORT": str(DEFAULT_PORT),
        "LANG": lang,
        "BINDINGS_JSON": dump_bytes(binding, indent=2).decode("utf-8"),
    }


def render_readme(template: str, values: Mapping[str, str]) -> str:
    """``{{NAME}}`` replaced by ``values[NAME]``; a placeholder left over is a bug of the
    template (``ValueError``)."""
    text = template
    for name, value in values.items():
        text = text.replace("{{" + name + "}}", value)
    if "{{" in text:
        start = text.index("{{")
        raise ValueError(f"unknown placeholder in the starter's README: {text[start : start + 40]}")
    return text


def _static_files(lang: str) -> dict[str, bytes]:
    """The static files of ``lang``'s starter, by name (no folders, no caches)."""
    folder: Traversable = resources.files("compiler.authoring") / "starters" / lang
    files: dict[str, bytes] = {}
    for entry in folder.iterdir():
        name = entry.name
        if entry.is_file() and not name.startswith(".") and not name.endswith(".pyc"):
            files[name] = entry.read_bytes()
    return files


def starter_files(tool: Tool, lang: str) -> dict[str, bytes]:
    """Every file of the starter, by name: the static ones, the README with the tool's values
    filled in, and the generated ``contract.json``."""
    files = _static_files(lang)
    readme = files[README_FILE].decode("utf-8")
    files[README_FILE] = render_readme(readme, _placeholders(tool, lang)).encode("utf-8")
    files[CONTRACT_FILE] = dump_bytes(contract_document(tool), indent=2) + b"\n"
    return files


# --- checks ------------------------------------------------------------------------------------


def _check_lang(lang: str) -> None:
    if lang not in LANGS:
        known = " or ".join(LANGS)
        raise refusal("STARTER_LANG_UNKNOWN", f"no starter in `{lang}`; choose {known}")


def _check_out(out: Path) -> None:
    """``out`` must not exist yet, or be an empty folder."""
    if out.is_symlink() or (out.exists() and not out.is_dir()):
        raise refusal("OUT_REFUSED", f"`{out}` exists and is not a folder: nothing was written")
    try:
        not_empty = out.is_dir() and any(out.iterdir())
    except OSError as exc:
        raise refusal("OUT_REFUSED", f"`{out}` cannot be read: {exc.strerror or exc}") from None
    if not_empty:
        raise refusal(
            "OUT_REFUSED",
            f"`{out}` is not empty: nothing was written; name a new or empty folder",
        )


# --- writing -----------------------------------------------------------------------------------


def _write_all(folder: Path, files: Mapping[str, bytes]) -> None:
    for name, data in files.items():
        path = folder / name
        path.write_bytes(data)
        path.chmod(0o755 if name in EXECUTABLE else 0o644)
    folder.chmod(0o755)


def _place(files: Mapping[str, bytes], out: Path) -> None:
    """Write ``files`` into a temporary folder beside ``out`` and rename it onto ``out``;
    on any failure nothing is left behind."""
    parent = out.parent
    try:
        parent.mkdir(parents=True, exist_ok=True)
        staging = Path(tempfile.mkdtemp(prefix=f".{out.name}.", suffix=".tmp", dir=parent))
    except OSError as exc:
        reason = exc.strerror or str(exc)
        raise refusal("OUT_REFUSED", f"cannot write beside `{out}`: {reason}") from None
    try:
        _write_all(staging, files)
        os.replace(staging, out)  # onto an empty folder, or a new name
    except OSError as exc:
        shutil.rmtree(staging, ignore_errors=True)
        reason = exc.strerror or str(exc)
        raise refusal(
            "OUT_REFUSED", f"cannot write `{out}`: {reason}: nothing was written"
        ) from None


def write_starter(project: Project, tool_id: str, lang: str, out: Path) -> StarterResult:
    """Write the ``lang`` starter of ``tool_id`` into ``out`` (absent, or an empty folder).

    Raises :class:`~compiler.authoring.source.AuthoringError`: ``UNKNOWN_TOOL`` (its message
    names the tools there are), ``STARTER_LANG_UNKNOWN``, ``OUT_REFUSED`` (``out`` exists and is
    not an empty folder, or cannot be written; nothing was written)."""
    tool = tool_of(project, tool_id)
    _check_lang(lang)
    out = Path(out)
    _check_out(out)
    files = starter_files(tool, lang)
    _place(files, out)
    run = f"{shlex.quote(str(out / 'run'))} --port {DEFAULT_PORT}"
    return StarterResult(
        out=out,
        lang=lang,
        tool_id=tool.id,
        version=tool.version,
        contract_digest=tool.contract_digest,
        files=tuple(sorted(files)),
        run=run,
    )


__all__ = [
    "StarterResult",
    "write_starter",
    "starter_files",
    "contract_document",
    "binding_entry",
    "secret_env",
    "render_readme",
    "LANGS",
    "DEFAULT_PORT",
    "TOKEN_ENV",
    "AuthoringError",
]
