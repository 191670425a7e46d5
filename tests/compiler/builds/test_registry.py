"""The registry: `seif register` verifies, tests and stores write-once; lists and history.

Tampering with any part of a build (each manifest field, any byte of ``build.cbor``) is refused
at registration with exit 1 and leaves the registry unchanged; a registry entry that no longer
holds what its name says is detected by every reader; the promotion history is append-only and
tamper-evident.
"""

from __future__ import annotations

import fcntl
import json
import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

import cbor2
import pytest

from compiler.builds.build import BUILD_FILE, MANIFEST_FILE, Build, load_build
from compiler.builds.registry import HISTORY, Registry, RegistryError, parse_digest
from policy.json.digest import build_digest
from policy.json.strict import loads
from tests.support.release_support import (
    build_dir,
    find_test,
    reference_doc,
    run,
    run_json,
    variant,
)

Cap = pytest.CaptureFixture[str]


@pytest.fixture(scope="module")
def reference_build(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Build]:
    path = tmp_path_factory.mktemp("reference") / "build"
    return path, build_dir(reference_doc(), path)


def snapshot(root: Path) -> dict[str, bytes]:
    """Every file under ``root`` with its bytes ({} when ``root`` does not exist)."""
    if not root.exists():
        return {}
    return {
        str(p.relative_to(root)): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()
    }


def copy_build(source: Path, target: Path) -> Path:
    target.mkdir(parents=True)
    for name in (BUILD_FILE, MANIFEST_FILE):
        (target / name).write_bytes((source / name).read_bytes())
    return target


def writable(path: Path) -> Path:
    path.chmod(0o644)
    return path


# Registration.
def test_register_stores_once_under_the_digest(
    reference_build: tuple[Path, Build], tmp_path: Path, capsys: Cap
) -> None:
    path, build = reference_build
    reg = tmp_path / "reg"
    code, out, err = run(capsys, "register", "--build", str(path), "--registry", str(reg))
    assert (code, err) == (0, "")
    assert out == f"registered {build.digest}\n"
    entry = reg / "builds" / parse_digest(build.digest)
    assert (entry / BUILD_FILE).read_bytes() == build.data
    assert (entry / MANIFEST_FILE).read_bytes() == (path / MANIFEST_FILE).read_bytes()
    assert (entry / BUILD_FILE).stat().st_mode & 0o777 == 0o444
    assert sorted(p.name for p in (reg / "builds").iterdir()) == [entry.name]  # no temp left
    before = snapshot(reg)
    code, doc = run_json(capsys, "register", "--build", str(path), "--registry", str(reg))
    assert code == 0 and doc["ok"] is True and doc["stored"] is False
    assert doc["digest"] == build.digest and doc["tests"]["failures"] == []
    assert snapshot(reg) == before


def test_a_concurrent_registration_of_the_same_digest_is_a_no_op(
    reference_build: tuple[Path, Build], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The entry appears between the check and the rename: the rename fails, nothing is replaced."""
    build = reference_build[1]
    registry, other = Registry(tmp_path / "reg"), Registry(tmp_path / "reg")
    real_rename = os.rename

    def racing(src: Any, dst: Any) -> None:
        monkeypatch.setattr("compiler.builds.registry.os.rename", real_rename)
        assert other.register(build).stored is True  # the other process wins
        real_rename(src, dst)

    monkeypatch.setattr("compiler.builds.registry.os.rename", racing)
    outcome = registry.register(build)
    assert outcome.stored is False and outcome.build.digest == build.digest
    assert [p.name for p in (tmp_path / "reg" / "builds").iterdir()] == [parse_digest(build.digest)]


def _manifest_lies() -> list[tuple[str, Callable[[dict[str, Any]], None]]]:
    def tool(key: str, value: str) -> Callable[[dict[str, Any]], None]:
        return lambda m: m["tools"][1].__setitem__(key, value)

    return [
        ("format", lambda m: m.__setitem__("format", "seif.build.v1")),
        ("requiresRuntime", lambda m: m.__setitem__("requiresRuntime", "seif.context-runtime.v1")),
        ("digest", lambda m: m.__setitem__("digest", "blake3:" + "0" * 64)),
        ("digest-dropped", lambda m: m.pop("digest")),
        ("project.id", lambda m: m["project"].__setitem__("id", "another-project")),
        ("project.version", lambda m: m["project"].__setitem__("version", "1.0.1")),
        ("tools.id", tool("id", "other-tool")),
        ("tools.version", tool("version", "2.0.0")),
        ("tools.contractDigest", tool("contractDigest", "sha256:" + "0" * 64)),
        ("tools.dropped", lambda m: m["tools"].pop()),
        ("tools.reordered", lambda m: m["tools"].reverse()),
        ("extra-key", lambda m: m.__setitem__("signedBy", "nobody")),
        ("project-dropped", lambda m: m.pop("project")),
    ]


@pytest.mark.parametrize(("field", "lie"), _manifest_lies(), ids=[n for n, _ in _manifest_lies()])
def test_a_lying_manifest_is_refused(
    field: str,
    lie: Callable[[dict[str, Any]], None],
    reference_build: tuple[Path, Build],
    tmp_path: Path,
    capsys: Cap,
) -> None:
    build = copy_build(reference_build[0], tmp_path / "build")
    manifest = loads((build / MANIFEST_FILE).read_text())
    lie(manifest)
    (build / MANIFEST_FILE).write_text(json.dumps(manifest))
    reg = tmp_path / "reg"
    code, out, err = run(capsys, "register", "--build", str(build), "--registry", str(reg))
    assert code == 1 and out == ""
    expected = "BUILD_DIGEST_MISMATCH" if field.startswith("digest") else "BUILD_MANIFEST_MISMATCH"
    assert f": {expected}: " in err
    assert snapshot(reg) == {}


@pytest.mark.parametrize("where", [0, 1, 100, 4000, -2, -1])
def test_any_changed_byte_of_the_build_is_refused(
    where: int, reference_build: tuple[Path, Build], tmp_path: Path, capsys: Cap
) -> None:
    build = copy_build(reference_build[0], tmp_path / "build")
    data = bytearray((build / BUILD_FILE).read_bytes())
    data[where] ^= 0x01
    (build / BUILD_FILE).write_bytes(bytes(data))
    reg = tmp_path / "reg"
    code, _, err = run(capsys, "register", "--build", str(build), "--registry", str(reg))
    assert code == 1 and "BUILD_DIGEST_MISMATCH" in err
    assert snapshot(reg) == {}


def _resign(build: Path, data: bytes) -> None:
    """Write ``data`` as the build's bytes with a manifest whose digest matches them."""
    (build / BUILD_FILE).write_bytes(data)
    manifest = loads((build / MANIFEST_FILE).read_text())
    manifest["digest"] = build_digest(data)
    (build / MANIFEST_FILE).write_text(json.dumps(manifest))


def test_a_consistently_resigned_change_is_caught_by_the_tests(
    reference_build: tuple[Path, Build], tmp_path: Path, capsys: Cap
) -> None:
    """Tampered bytes with a matching digest decode to a valid project: its tests catch it."""
    build = copy_build(reference_build[0], tmp_path / "build")
    body = cbor2.loads((build / BUILD_FILE).read_bytes())
    body["ir"]["profiles"][0]["toolRules"][2]["participation"] = "include"
    _resign(build, cbor2.dumps(body))
    code, _, err = run(capsys, "register", "--build", str(build), "--registry", str(tmp_path / "r"))
    assert code == 1 and "TESTS_FAILED" in err
    assert "FAIL learner-never-sees-proposals: exclude tool propose-change" in err
    assert not (tmp_path / "r").exists()


def test_a_non_canonical_encoding_is_refused(
    reference_build: tuple[Path, Build], tmp_path: Path, capsys: Cap
) -> None:
    build = copy_build(reference_build[0], tmp_path / "build")
    body = cbor2.loads((build / BUILD_FILE).read_bytes())
    _resign(build, cbor2.dumps(dict(reversed(list(body.items())))))
    code, _, err = run(capsys, "register", "--build", str(build), "--registry", str(tmp_path / "r"))
    assert code == 1 and "BUILD_INVALID" in err
    assert not (tmp_path / "r").exists()


@pytest.mark.parametrize("junk", [b"", b"not json", b"[]", b'{"digest": 1'])
def test_an_unreadable_manifest_is_refused(
    junk: bytes, reference_build: tuple[Path, Build], tmp_path: Path, capsys: Cap
) -> None:
    build = copy_build(reference_build[0], tmp_path / "build")
    (build / MANIFEST_FILE).write_bytes(junk)
    code, _, err = run(capsys, "register", "--build", str(build), "--registry", str(tmp_path / "r"))
    assert code == 1 and "BUILD_UNREADABLE" in err
    assert not (tmp_path / "r").exists()


def test_a_missing_build_is_a_usage_error(tmp_path: Path, capsys: Cap) -> None:
    code, _, err = run(capsys, "register", "--build", str(tmp_path), "--registry", str(tmp_path))
    assert code == 2 and "BUILD_NOT_FOUND" in err


def test_a_build_whose_tests_fail_is_refused(tmp_path: Path, capsys: Cap) -> None:
    def fail(doc: dict[str, Any]) -> None:
        find_test(doc, "learner-never-sees-proposals")["expect"]["tools"]["exclude"] = [
            "inspect-context"
        ]

    build_dir(variant(fail), tmp_path / "build")  # written without running its tests
    reg = tmp_path / "reg"
    code, out, err = run(
        capsys, "register", "--build", str(tmp_path / "build"), "--registry", str(reg)
    )
    assert code == 1 and out == ""
    assert "FAIL learner-never-sees-proposals: exclude tool inspect-context" in err
    assert "TESTS_FAILED" in err
    assert snapshot(reg) == {}
    code, doc = run_json(
        capsys, "register", "--build", str(tmp_path / "build"), "--registry", str(reg)
    )
    assert code == 1 and doc["ok"] is False
    assert [f["subject"] for f in doc["tests"]["failures"]] == ["exclude tool inspect-context"]


# Write-once: an entry that no longer holds what its name says.
def test_junk_in_an_entry_is_detected_and_never_repaired(
    reference_build: tuple[Path, Build], tmp_path: Path, capsys: Cap
) -> None:
    path, build = reference_build
    reg = tmp_path / "reg"
    assert run(capsys, "register", "--build", str(path), "--registry", str(reg))[0] == 0
    stored = writable(reg / "builds" / parse_digest(build.digest) / BUILD_FILE)
    stored.write_bytes(b"junk")
    before = snapshot(reg)
    code, _, err = run(capsys, "register", "--build", str(path), "--registry", str(reg))
    assert code == 1 and "REGISTRY_ENTRY_CORRUPT" in err and "BUILD_DIGEST_MISMATCH" in err
    assert snapshot(reg) == before  # the junk is still there: register never overwrites
    code, _, err = run(capsys, "promote", "--registry", str(reg), "--candidate", build.digest)
    assert code == 1 and "REGISTRY_ENTRY_CORRUPT" in err
    assert not (reg / HISTORY).exists()
    code, doc = run_json(capsys, "registry", "list", "--registry", str(reg))
    assert code == 1 and doc["ok"] is False
    assert doc["builds"][0]["diagnostics"][0]["code"] == "REGISTRY_ENTRY_CORRUPT"


def test_another_build_in_an_entry_is_detected(
    reference_build: tuple[Path, Build], tmp_path: Path, capsys: Cap
) -> None:
    """A whole, valid build under another build's name: it verifies, but is not that build."""
    path, build = reference_build
    reg = tmp_path / "reg"
    assert run(capsys, "register", "--build", str(path), "--registry", str(reg))[0] == 0
    other = build_dir(variant(lambda d: d.__setitem__("version", "1.0.1")), tmp_path / "other")
    entry = reg / "builds" / parse_digest(build.digest)
    for name in (BUILD_FILE, MANIFEST_FILE):
        writable(entry / name).write_bytes((tmp_path / "other" / name).read_bytes())
    assert load_build(entry).digest == other.digest
    for argv in (
        ("register", "--build", str(path), "--registry", str(reg)),
        ("promote", "--registry", str(reg), "--candidate", build.digest),
        ("registry", "list", "--registry", str(reg)),
    ):
        code, _, err = run(capsys, *argv)
        assert code == 1 and "REGISTRY_ENTRY_MISMATCH" in err, argv


def test_a_different_build_goes_to_its_own_entry(
    reference_build: tuple[Path, Build], tmp_path: Path, capsys: Cap
) -> None:
    path, build = reference_build
    reg = tmp_path / "reg"
    assert run(capsys, "register", "--build", str(path), "--registry", str(reg))[0] == 0
    first = snapshot(reg)
    other = build_dir(variant(lambda d: d.__setitem__("version", "1.0.1")), tmp_path / "other")
    code, out, _ = run(
        capsys, "register", "--build", str(tmp_path / "other"), "--registry", str(reg)
    )
    assert code == 0 and out == f"registered {other.digest}\n"
    after = snapshot(reg)
    assert {k: after[k] for k in first} == first  # the first entry is untouched
    code, doc = run_json(capsys, "registry", "list", "--registry", str(reg))
    assert code == 0 and doc["ok"] is True and doc["current"] is None
    assert sorted(b["digest"] for b in doc["builds"]) == sorted([build.digest, other.digest])
    assert {b["project"]["version"] for b in doc["builds"]} == {"1.0.0", "1.0.1"}


def test_an_unknown_name_in_builds_is_reported(tmp_path: Path, capsys: Cap) -> None:
    (tmp_path / "reg" / "builds" / "not-a-digest").mkdir(parents=True)
    (tmp_path / "reg" / "builds" / ".tmp-abandoned").mkdir()
    code, doc = run_json(capsys, "registry", "list", "--registry", str(tmp_path / "reg"))
    assert code == 1 and [b["entry"] for b in doc["builds"]] == ["not-a-digest"]


# Arguments.
@pytest.mark.parametrize(
    ("argv", "code", "message"),
    [
        (("promote", "--candidate", "blake3:abc"), 2, "DIGEST_INVALID"),
        (("promote", "--candidate", "sha256:" + "0" * 64), 2, "DIGEST_INVALID"),
        (("promote", "--candidate", "blake3:" + "0" * 64), 2, "BUILD_NOT_REGISTERED"),
        (("promote", "--candidate", "0" * 64, "--by", ""), 2, "BY_INVALID"),
        (("registry", "history"), 2, "REGISTRY_UNREADABLE"),
        (("registry", "list"), 2, "REGISTRY_UNREADABLE"),
    ],
)
def test_bad_arguments_are_usage_errors(
    argv: tuple[str, ...], code: int, message: str, tmp_path: Path, capsys: Cap
) -> None:
    reg = tmp_path / "reg"
    if argv[0] == "promote":
        reg.mkdir()
    got, _, err = run(capsys, *argv, "--registry", str(reg))
    assert got == code and message in err


def test_the_lock_is_exclusive(tmp_path: Path) -> None:
    (tmp_path / "reg").mkdir()
    fd = os.open(tmp_path / "reg" / ".lock", os.O_RDWR | os.O_CREAT)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        with pytest.raises(RegistryError) as caught, Registry(tmp_path / "reg").locked(0.1):
            pass
        assert caught.value.diagnostics[0].code == "REGISTRY_LOCKED"
    finally:
        os.close(fd)
    with Registry(tmp_path / "reg").locked(0.1):
        pass


def test_an_unwritable_registry_is_refused(
    reference_build: tuple[Path, Build], tmp_path: Path, capsys: Cap
) -> None:
    (tmp_path / "reg").write_text("a file, not a directory")
    code, _, err = run(
        capsys, "register", "--build", str(reference_build[0]), "--registry", str(tmp_path / "reg")
    )
    assert code == 2 and "REGISTRY_WRITE_FAILED: cannot write" in err
    assert (tmp_path / "reg").read_text() == "a file, not a directory"
