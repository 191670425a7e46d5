"""Build artifacts: ``build.cbor`` (canonical CBOR of the build) and ``manifest.json``.

``build.cbor`` holds ``{"format", "requiresRuntime", "ir"}`` where ``ir`` is the normalized
declaration of the project (:func:`policy.codec.to_declaration`). The build digest is
``blake3:<hex>`` of those bytes. A tool-free project gives ``seif.build.v1`` requiring
``seif.context-runtime.v1`` and its bytes carry no tool field at all; a project with tools gives
``seif.build.v2`` requiring ``seif.context-runtime.v2``. ``manifest.json`` repeats what a reader
needs without decoding CBOR, plus the digest; :func:`load_build` re-verifies every byte of it.
"""

from __future__ import annotations

import os
import tempfile
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any, BinaryIO

from compiler.diagnostics import Collector, CompileError
from compiler.driver import compile_document
from compiler.passes.parse import parse_json_text
from policy.codec import to_declaration
from policy.diagnostic import Diagnostic, Location, headline
from policy.ir import PROJECT_FORMAT, Project
from policy.json.canonical import EncodingError, canonical_cbor, decode_canonical_cbor
from policy.json.digest import build_digest
from policy.json.strict import dump_bytes
from policy.json.value import thaw

BUILD_FILE = "build.cbor"
MANIFEST_FILE = "manifest.json"
RUNTIME_FOR_FORMAT = {
    "seif.build.v1": "seif.context-runtime.v1",
    "seif.build.v2": "seif.context-runtime.v2",
}
SUPPORTED_RUNTIMES = frozenset(RUNTIME_FOR_FORMAT.values())


@dataclass(frozen=True, slots=True)
class Build:
    """A verified build: its digest, formats, bytes and the IR it carries."""

    digest: str
    format: str
    requires_runtime: str
    project: Project
    data: bytes

    @property
    def manifest(self) -> dict[str, Any]:
        return manifest_for(self.project, self.digest)


def build_format(project: Project) -> tuple[str, str]:
    fmt = "seif.build.v2" if project.has_tools else "seif.build.v1"
    return fmt, RUNTIME_FOR_FORMAT[fmt]


def build_bytes(project: Project) -> bytes:
    fmt, runtime = build_format(project)
    return canonical_cbor(
        {"format": fmt, "requiresRuntime": runtime, "ir": to_declaration(project)}
    )


def manifest_for(project: Project, digest: str) -> dict[str, Any]:
    fmt, runtime = build_format(project)
    manifest: dict[str, Any] = {
        "format": fmt,
        "requiresRuntime": runtime,
        "digest": digest,
        "project": {"id": project.id, "version": project.version},
    }
    if project.has_tools:
        manifest["tools"] = [
            {"id": t.id, "version": t.version, "contractDigest": t.contract_digest}
            for t in project.tools
        ]
    return manifest


def make_build(project: Project) -> Build:
    data = build_bytes(project)
    fmt, runtime = build_format(project)
    return Build(build_digest(data), fmt, runtime, project, data)


@contextmanager
def atomic_file(path: Path, *, mode: int | None = None) -> Iterator[BinaryIO]:
    """A file that replaces ``path`` whole or not at all: a temporary file in the same
    directory (0600 unless ``mode``), fsynced, then renamed over ``path`` on success."""
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.")
    try:
        with os.fdopen(fd, "wb") as fh:
            yield fh
            fh.flush()
            os.fsync(fh.fileno())
        if mode is not None:
            os.chmod(tmp, mode)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def write_atomic(path: Path, data: bytes, *, mode: int | None = None) -> None:
    """Write ``data`` to ``path`` so that a reader sees the old file or the whole new one."""
    with atomic_file(path, mode=mode) as fh:
        fh.write(data)


def write_build(project: Project, out_dir: str | os.PathLike[str]) -> Build:
    """Write ``build.cbor`` and ``manifest.json`` into ``out_dir`` (created if needed)."""
    build = make_build(project)
    directory = Path(out_dir)
    directory.mkdir(parents=True, exist_ok=True)
    write_atomic(directory / BUILD_FILE, build.data)
    text = dump_bytes(build.manifest, indent=2, sort_keys=True) + b"\n"
    write_atomic(directory / MANIFEST_FILE, text)
    return build


def _fail(code: str, pointer: str, message: str) -> CompileError:
    return CompileError(
        [
            Diagnostic(
                code=code, message=message, location=Location(pointer=pointer), pass_name="load"
            )
        ]
    )


def _read(directory: Path) -> tuple[bytes, Mapping[str, Any]]:
    try:
        data = (directory / BUILD_FILE).read_bytes()
        manifest_text = (directory / MANIFEST_FILE).read_bytes().decode("utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise _fail(
            "BUILD_UNREADABLE",
            "",
            f"cannot read the build in `{directory}`: {getattr(exc, 'strerror', None) or exc}",
        ) from None
    out = Collector("load")
    manifest = parse_json_text(manifest_text, out)
    if out or not isinstance(manifest, Mapping):
        raise _fail("BUILD_UNREADABLE", "", f"`{MANIFEST_FILE}` is not a JSON object")
    return data, manifest


def load_build(build_dir: str | os.PathLike[str]) -> Build:
    """Load and re-verify a build directory; raises :class:`CompileError` on any mismatch."""
    data, manifest = _read(Path(build_dir))
    digest = build_digest(data)
    if manifest.get("digest") != digest:
        raise _fail(
            "BUILD_DIGEST_MISMATCH",
            "/digest",
            f"`{BUILD_FILE}` hashes to `{digest}`, the manifest says `{manifest.get('digest')}`",
        )
    body = _decode_body(data)
    project = _compile_ir(body["ir"])
    if build_bytes(project) != data:
        raise _fail(
            "BUILD_INVALID",
            "",
            f"`{BUILD_FILE}` is not the normalized encoding of the project it carries",
        )
    build = Build(digest, body["format"], body["requiresRuntime"], project, data)
    expected = build.manifest
    for key in sorted(set(expected) | set(manifest)):
        if manifest.get(key) != expected.get(key):
            raise _fail(
                "BUILD_MANIFEST_MISMATCH",
                f"/{key}",
                f"the manifest's `{key}` does not match `{BUILD_FILE}`",
            )
    return build


def _decode_body(data: bytes) -> Mapping[str, Any]:
    try:
        body = decode_canonical_cbor(data)
    except EncodingError as exc:
        raise _fail("BUILD_INVALID", "", exc.message) from None
    if not isinstance(body, Mapping) or set(body) != {"format", "requiresRuntime", "ir"}:
        raise _fail("BUILD_INVALID", "", "the build is not `{format, requiresRuntime, ir}`")
    fmt, runtime = body["format"], body["requiresRuntime"]
    if fmt not in RUNTIME_FOR_FORMAT:
        raise _fail("BUILD_INVALID", "/format", f"build format `{fmt}` is not known")
    if runtime not in SUPPORTED_RUNTIMES or RUNTIME_FOR_FORMAT[fmt] != runtime:
        raise _fail(
            "RUNTIME_UNSUPPORTED",
            "/requiresRuntime",
            f"`{runtime}` is not supported by this runtime (supported: "
            f"{', '.join(sorted(SUPPORTED_RUNTIMES))})",
        )
    return body


LATER_CHECKS = frozenset({"CEL_UNKNOWN_FIELD"})
"""Errors a project is refused for that a build written before they were checked may hold: it
still loads (a condition reading an unknown field fails closed at run time, as it did)."""


def _compile_ir(ir: Any) -> Project:
    if not isinstance(ir, Mapping):
        raise _fail("BUILD_INVALID", "/ir", "the build's `ir` is not a map")
    result = compile_document({"format": PROJECT_FORMAT, **thaw(ir)}, tolerated=LATER_CHECKS)
    if result.project is None:
        raise CompileError(
            [
                Diagnostic(
                    code="BUILD_INVALID",
                    message=headline(d),
                    location=Location(pointer="/ir" + (d.pointer or "")),
                    pass_name="load",
                )
                for d in result.diagnostics
            ]
        )
    return result.project
