"""Golden builds: exact digests of known projects, determinism, and what ``load_build`` refuses.

``corpus/builds/golden.json`` lists ``{"project", "format", "requiresRuntime", "digest",
"contracts"}`` per build. A digest changes whenever the project, the IR encoding or the canonical
CBOR changes: update it only for an intended change, and say so in the CHANGELOG.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path
from typing import Any

import cbor2
import pytest

from compiler.builds.build import (
    BUILD_FILE,
    MANIFEST_FILE,
    Build,
    load_build,
    make_build,
    write_build,
)
from compiler.codes import CODES
from compiler.diagnostics import CompileError
from compiler.driver import compile_file
from policy.ir import Project
from policy.json.canonical import canonical_cbor
from policy.json.digest import build_digest
from policy.json.strict import loads
from policy.json.value import thaw
from tests.support.paths import ROOT as REPO

GOLDEN_FILE = REPO / "corpus" / "builds" / "golden.json"
ENTRY_KEYS = frozenset({"project", "format", "requiresRuntime", "digest", "contracts"})


def _golden() -> list[dict[str, Any]]:
    data = loads(GOLDEN_FILE.read_text(encoding="utf-8"))
    assert set(data) == {"builds"}, 'golden.json is {"builds": [...]}'
    for entry in data["builds"]:
        assert set(entry) == ENTRY_KEYS, f"golden entry keys: {sorted(entry)}"
    return list(data["builds"])


GOLDEN = _golden()
IDS = [Path(entry["project"]).parent.name for entry in GOLDEN]


def compile_entry(entry: Mapping[str, Any]) -> Project:
    result = compile_file(REPO / entry["project"])
    assert result.diagnostics == (), [d.to_json() for d in result.diagnostics]
    assert result.project is not None
    return result.project


@pytest.fixture(scope="module", params=GOLDEN, ids=IDS)
def golden(request: pytest.FixtureRequest) -> tuple[Mapping[str, Any], Project]:
    return request.param, compile_entry(request.param)


def test_golden_build(golden: tuple[Mapping[str, Any], Project], tmp_path: Path) -> None:
    entry, project = golden
    build = write_build(project, tmp_path / "build")
    assert build.digest == entry["digest"]
    assert build.format == entry["format"]
    assert build.requires_runtime == entry["requiresRuntime"]
    assert {t.id: t.contract_digest for t in project.tools} == entry["contracts"]
    assert (tmp_path / "build" / BUILD_FILE).read_bytes() == build.data
    assert build_digest(build.data) == entry["digest"]
    manifest = loads((tmp_path / "build" / MANIFEST_FILE).read_text(encoding="utf-8"))
    assert manifest == build.manifest
    assert manifest["digest"] == entry["digest"]
    assert manifest["format"] == entry["format"]
    assert manifest["requiresRuntime"] == entry["requiresRuntime"]
    assert manifest["project"] == {"id": project.id, "version": project.version}
    body = cbor2.loads(build.data)
    assert body["format"] == entry["format"]
    assert body["requiresRuntime"] == entry["requiresRuntime"]


def _keys(value: Any) -> Iterator[Any]:
    stack = [value]
    while stack:
        item = stack.pop()
        if isinstance(item, Mapping):
            yield from item.keys()
            stack.extend(item.values())
        elif isinstance(item, (list, tuple)):
            stack.extend(item)


TOOL_FREE = [entry for entry in GOLDEN if not entry["contracts"]]


@pytest.mark.parametrize("entry", TOOL_FREE, ids=lambda e: Path(e["project"]).parent.name)
def test_tool_free_build_carries_no_tool_field(entry: Mapping[str, Any]) -> None:
    project = compile_entry(entry)
    assert not project.has_tools
    build = make_build(project)
    assert (build.format, build.requires_runtime) == ("seif.build.v1", "seif.context-runtime.v1")
    keys = list(_keys(cbor2.loads(build.data)))
    assert keys, "the build has keys at all"
    assert all(isinstance(k, str) for k in keys)
    assert [k for k in keys if "tool" in k.lower()] == []
    assert b"tool" not in build.data.lower()
    assert "tools" not in build.manifest


def test_golden_list_has_both_formats() -> None:
    assert TOOL_FREE, "golden.json lists a tool-free build"
    assert {entry["format"] for entry in GOLDEN} == {"seif.build.v1", "seif.build.v2"}


def test_build_is_deterministic(golden: tuple[Mapping[str, Any], Project], tmp_path: Path) -> None:
    entry, project = golden
    first = write_build(project, tmp_path / "first")
    second = write_build(compile_entry(entry), tmp_path / "second")
    assert first.data == second.data
    for name in (BUILD_FILE, MANIFEST_FILE):
        assert (tmp_path / "first" / name).read_bytes() == (tmp_path / "second" / name).read_bytes()


def test_load_build_round_trip(golden: tuple[Mapping[str, Any], Project], tmp_path: Path) -> None:
    entry, project = golden
    write_build(project, tmp_path)
    loaded = load_build(tmp_path)
    assert isinstance(loaded, Build)
    assert loaded.digest == entry["digest"]
    assert loaded.format == entry["format"]
    assert loaded.requires_runtime == entry["requiresRuntime"]
    assert loaded.project == project
    assert {t.id: t.contract_digest for t in loaded.project.tools} == entry["contracts"]
    assert make_build(loaded.project).data == loaded.data


# ---------------------------------------------------------------- what load_build refuses


def _manifest(directory: Path) -> dict[str, Any]:
    data: dict[str, Any] = loads((directory / MANIFEST_FILE).read_text(encoding="utf-8"))
    return data


def _write_manifest(directory: Path, manifest: Mapping[str, Any]) -> None:
    text = json.dumps(manifest, indent=2, sort_keys=True, ensure_ascii=False) + "\n"
    (directory / MANIFEST_FILE).write_text(text, encoding="utf-8")


def _replace_build(directory: Path, data: bytes) -> None:
    """Write new ``build.cbor`` bytes and a manifest digest that matches them."""
    (directory / BUILD_FILE).write_bytes(data)
    manifest = _manifest(directory)
    manifest["digest"] = build_digest(data)
    _write_manifest(directory, manifest)


def _reencode(directory: Path, change: Callable[[dict[str, Any]], None]) -> None:
    body = thaw(cbor2.loads((directory / BUILD_FILE).read_bytes()))
    change(body)
    _replace_build(directory, canonical_cbor(body))


def flip_byte(directory: Path) -> None:
    data = bytearray((directory / BUILD_FILE).read_bytes())
    data[len(data) // 2] ^= 0x01
    (directory / BUILD_FILE).write_bytes(bytes(data))


def trailing_byte_with_matching_digest(directory: Path) -> None:
    _replace_build(directory, (directory / BUILD_FILE).read_bytes() + b"\x00")


def non_canonical_with_matching_digest(directory: Path) -> None:
    body = cbor2.loads((directory / BUILD_FILE).read_bytes())
    ordered = {key: body[key] for key in sorted(body, reverse=True)}  # not length-first order
    _replace_build(directory, cbor2.dumps(ordered))


def other_version_with_matching_digest(directory: Path) -> None:
    _reencode(directory, lambda body: body["ir"].update(version="9.9.9"))


def invalid_ir_with_matching_digest(directory: Path) -> None:
    _reencode(directory, lambda body: body["ir"]["profiles"][0].update(tokenCeiling=0))


def unknown_format_with_matching_digest(directory: Path) -> None:
    _reencode(directory, lambda body: body.update(format="seif.build.v9"))


def unsupported_runtime_with_matching_digest(directory: Path) -> None:
    _reencode(directory, lambda body: body.update(requiresRuntime="seif.context-runtime.v99"))


def manifest_lies_about_project_id(directory: Path) -> None:
    manifest = _manifest(directory)
    manifest["project"]["id"] = "someone-else"
    _write_manifest(directory, manifest)


def manifest_lies_about_tools(directory: Path) -> None:
    manifest = _manifest(directory)
    if "tools" in manifest:
        manifest["tools"][0]["contractDigest"] = "sha256:" + "0" * 64
    else:
        manifest["tools"] = [{"id": "ghost", "version": "1.0.0", "contractDigest": "sha256:00"}]
    _write_manifest(directory, manifest)


def missing_build_file(directory: Path) -> None:
    (directory / BUILD_FILE).unlink()


def missing_manifest(directory: Path) -> None:
    (directory / MANIFEST_FILE).unlink()


def manifest_not_json(directory: Path) -> None:
    (directory / MANIFEST_FILE).write_text("{not json", encoding="utf-8")


REFUSALS: list[tuple[Callable[[Path], None], str, str]] = [
    (flip_byte, "BUILD_DIGEST_MISMATCH", "/digest"),
    (trailing_byte_with_matching_digest, "BUILD_INVALID", ""),
    (non_canonical_with_matching_digest, "BUILD_INVALID", ""),
    (invalid_ir_with_matching_digest, "BUILD_INVALID", "/ir/profiles/0/tokenCeiling"),
    (unknown_format_with_matching_digest, "BUILD_INVALID", "/format"),
    (unsupported_runtime_with_matching_digest, "RUNTIME_UNSUPPORTED", "/requiresRuntime"),
    (other_version_with_matching_digest, "BUILD_MANIFEST_MISMATCH", "/project"),
    (manifest_lies_about_project_id, "BUILD_MANIFEST_MISMATCH", "/project"),
    (manifest_lies_about_tools, "BUILD_MANIFEST_MISMATCH", "/tools"),
    (missing_build_file, "BUILD_UNREADABLE", ""),
    (missing_manifest, "BUILD_UNREADABLE", ""),
    (manifest_not_json, "BUILD_UNREADABLE", ""),
]


@pytest.mark.parametrize(
    ("tamper", "code", "pointer"), REFUSALS, ids=[t.__name__ for t, _, _ in REFUSALS]
)
def test_load_build_refuses(
    golden: tuple[Mapping[str, Any], Project],
    tmp_path: Path,
    tamper: Callable[[Path], None],
    code: str,
    pointer: str,
) -> None:
    _, project = golden
    write_build(project, tmp_path)
    load_build(tmp_path)  # untouched, it loads
    tamper(tmp_path)
    with pytest.raises(CompileError) as caught:
        load_build(tmp_path)
    diagnostics = caught.value.diagnostics
    assert diagnostics, "a refusal carries its diagnostics"
    assert (diagnostics[0].code, diagnostics[0].pointer) == (code, pointer)
    for diagnostic in diagnostics:
        assert diagnostic.code in CODES
        assert diagnostic.message.strip()
