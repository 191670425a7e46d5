"""The build registry: verified builds stored write-once under their digest, and the promotions.

Layout of a registry directory ``REG`` (docs/release.md)::

    REG/builds/<hex>/build.cbor      the build's bytes; <hex> is the BLAKE3 of exactly these bytes
    REG/builds/<hex>/manifest.json   its manifest, as `seif build` writes it
    REG/builds/.tmp-*                a registration being written; renamed into place when complete
    REG/promotions.jsonl             the promotion history: one JSON record a line, append-only
    REG/.lock                        held (flock) while a promotion reads and appends the history

An entry is written into a temporary directory, fsynced, then renamed to its final name: a reader
sees a whole entry or none. An existing entry is never replaced; registering its digest again
re-verifies what is stored. Every read of an entry re-verifies it (:func:`load_build`) and checks
that it holds the build its name says. Each promotion record carries the BLAKE3 of the line before
it, so an edited, removed or reordered record is detected.
"""

from __future__ import annotations

import errno
import fcntl
import os
import re
import shutil
import tempfile
import time
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from compiler.builds.build import BUILD_FILE, MANIFEST_FILE, Build, load_build, write_build
from compiler.diagnostics import CompileError
from policy.diagnostic import Diagnostic, Location, headline
from policy.json.digest import build_digest
from policy.json.strict import JsonError, dump_bytes, loads

DIGEST_PREFIX = "blake3:"
BUILDS = "builds"
HISTORY = "promotions.jsonl"
LOCK = ".lock"
TEMP_PREFIX = ".tmp-"
LOCK_TIMEOUT_S = 10.0
MAX_BY_LENGTH = 128
_HEX = re.compile(r"[0-9a-f]{64}")
_RECORD_KEYS = frozenset({"seq", "at", "by", "candidate", "baseline", "project", "prev"})
_BY_FORBIDDEN = re.compile(r"[\x00-\x1f\x7f]")


class RegistryError(CompileError):
    """A registry refusal; ``file`` is what the diagnostics' locations are relative to."""

    def __init__(self, file: str, diagnostics: Sequence[Diagnostic]) -> None:
        super().__init__(diagnostics)
        self.file = file


def _diag(code: str, message: str, *, line: int | None = None) -> Diagnostic:
    if line is None:
        return Diagnostic(code=code, message=message, pass_name="registry")
    return Diagnostic(
        code=code,
        message=message,
        location=Location(line=line, column=1),
        pass_name="registry",
    )


def parse_digest(text: str) -> str:
    """The hex of ``blake3:<hex>`` (or of a bare ``<hex>``); raises ``DIGEST_INVALID``."""
    hex_ = text.removeprefix(DIGEST_PREFIX)
    if not _HEX.fullmatch(hex_):
        message = f"`{text[:80]}` is not a build digest; use `blake3:` and 64 lowercase hex digits"
        raise RegistryError(text[:80], [_diag("DIGEST_INVALID", message)])
    return hex_


def check_by(name: str) -> str:
    """The name recorded as the promoter: 1..128 characters, no control character."""
    if not name.strip() or len(name) > MAX_BY_LENGTH or _BY_FORBIDDEN.search(name):
        message = f"name who promotes in 1..{MAX_BY_LENGTH} characters without control characters"
        raise RegistryError("--by", [_diag("BY_INVALID", message)])
    return name


@dataclass(frozen=True, slots=True, kw_only=True)
class Registered:
    build: Build
    stored: bool  # False: the digest was registered already, and what is stored re-verified
    path: Path


@dataclass(frozen=True, slots=True, kw_only=True)
class Entry:
    """One entry of ``REG/builds``: its build when it verifies, else what is wrong with it."""

    name: str
    build: Build | None
    problems: tuple[Diagnostic, ...]


@dataclass(frozen=True, slots=True, kw_only=True)
class PromotionRecord:
    seq: int
    at: int  # UTC, milliseconds since the epoch
    by: str
    candidate: str
    baseline: str | None
    project: Mapping[str, str]
    prev: str | None  # the BLAKE3 of the previous line, None for the first record
    line_digest: str  # the BLAKE3 of this record's line (the next record's ``prev``)

    def to_json(self) -> dict[str, Any]:
        return {
            "seq": self.seq,
            "at": self.at,
            "by": self.by,
            "candidate": self.candidate,
            "baseline": self.baseline,
            "project": dict(self.project),
            "prev": self.prev,
        }


def _line(record: Mapping[str, Any]) -> bytes:
    return dump_bytes(record, sort_keys=True)


def _fsync_dir(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


class Registry:
    """A registry directory; see the module docstring for its layout."""

    def __init__(self, root: str | os.PathLike[str]) -> None:
        self.root = Path(root)
        self._locked = False

    @property
    def history_path(self) -> Path:
        return self.root / HISTORY

    def entry_path(self, digest: str) -> Path:
        return self.root / BUILDS / parse_digest(digest)

    def _fail(self, code: str, message: str, file: Path | None = None) -> RegistryError:
        return RegistryError(str(file or self.root), [_diag(code, message)])

    def require(self) -> None:
        """Raise ``REGISTRY_UNREADABLE`` unless the registry directory exists."""
        if not self.root.is_dir():
            raise self._fail("REGISTRY_UNREADABLE", "no registry directory here")

    # Builds.
    def register(self, build: Build) -> Registered:
        """Store ``build`` (already verified by :func:`load_build`) under its digest, once.

        ``REGISTRY_WRITE_FAILED`` when the registry cannot be written; nothing is left behind.
        """
        target = self.entry_path(build.digest)
        if target.exists():
            return Registered(build=self.load(build.digest), stored=False, path=target)
        try:
            target.parent.mkdir(parents=True, exist_ok=True)
            staging = Path(tempfile.mkdtemp(prefix=TEMP_PREFIX, dir=target.parent))
        except OSError as exc:
            raise self._write_failed(exc) from None
        try:
            self._stage(build, staging)
            os.rename(staging, target)  # fails on an existing, non-empty entry: never replaces
            _fsync_dir(target.parent)
        except OSError as exc:
            shutil.rmtree(staging, ignore_errors=True)
            if exc.errno not in (errno.EEXIST, errno.ENOTEMPTY):
                raise self._write_failed(exc) from None
            return Registered(build=self.load(build.digest), stored=False, path=target)
        except BaseException:
            shutil.rmtree(staging, ignore_errors=True)
            raise
        return Registered(build=self.load(build.digest), stored=True, path=target)

    def _write_failed(self, exc: OSError) -> RegistryError:
        return self._fail("REGISTRY_WRITE_FAILED", f"cannot write: {exc.strerror or exc}")

    def _stage(self, build: Build, staging: Path) -> None:
        """The entry's files in ``staging``, read-only and fsynced."""
        if write_build(build.project, staging).data != build.data:
            raise self._fail("REGISTRY_WRITE_MISMATCH", "the bytes written are not the build's")
        for name in (BUILD_FILE, MANIFEST_FILE):
            (staging / name).chmod(0o444)
        staging.chmod(0o755)
        _fsync_dir(staging)

    def load(self, digest: str) -> Build:
        """The registered build ``digest``, re-verified; ``BUILD_NOT_REGISTERED`` when absent."""
        directory = self.entry_path(digest)
        if not directory.exists():
            self.require()
            message = f"build `{DIGEST_PREFIX}{directory.name}` is not registered here"
            raise self._fail("BUILD_NOT_REGISTERED", message)
        return self._verify(directory)

    def _verify(self, directory: Path) -> Build:
        stored = f"{DIGEST_PREFIX}{directory.name}"
        try:
            build = load_build(directory)
        except CompileError as exc:
            problems = [
                _diag(
                    "REGISTRY_ENTRY_CORRUPT",
                    f"the stored build `{stored}` does not verify: {headline(d)}",
                )
                for d in exc.diagnostics
            ]
            raise RegistryError(str(directory), problems) from None
        if build.digest != stored:
            message = f"the entry holds the build `{build.digest}`, not `{stored}`"
            raise self._fail("REGISTRY_ENTRY_MISMATCH", message, directory)
        return build

    def entries(self) -> list[Entry]:
        """Every entry of ``REG/builds`` in name order, each verified (registrations in progress
        are skipped)."""
        self.require()
        directory = self.root / BUILDS
        if not directory.is_dir():
            return []
        out: list[Entry] = []
        for child in sorted(directory.iterdir()):
            if child.name.startswith(TEMP_PREFIX):
                continue
            if not _HEX.fullmatch(child.name) or not child.is_dir():
                message = "not a registry entry: entries are directories named by a build digest"
                out.append(
                    Entry(name=child.name, build=None, problems=(_diag("ENTRY_UNKNOWN", message),))
                )
                continue
            try:
                out.append(Entry(name=child.name, build=self._verify(child), problems=()))
            except RegistryError as exc:
                out.append(Entry(name=child.name, build=None, problems=tuple(exc.diagnostics)))
        return out

    # The promotion history.
    def history(self) -> list[PromotionRecord]:
        """Every promotion record, oldest first; ``HISTORY_CORRUPT`` when one was tampered with."""
        self.require()
        try:
            data = self.history_path.read_bytes()
        except FileNotFoundError:
            return []
        except OSError as exc:
            raise self._fail(
                "REGISTRY_UNREADABLE", f"cannot read: {exc.strerror}", self.history_path
            ) from None
        return _parse_history(data, str(self.history_path))

    def current(self) -> str | None:
        """The currently promoted build: the candidate of the last record."""
        records = self.history()
        return records[-1].candidate if records else None

    @contextmanager
    def locked(self, timeout_s: float = LOCK_TIMEOUT_S) -> Iterator[None]:
        """Hold ``REG/.lock``; ``REGISTRY_LOCKED`` when another process keeps it ``timeout_s``."""
        self.require()
        try:
            fd = os.open(self.root / LOCK, os.O_RDWR | os.O_CREAT, 0o644)
        except OSError as exc:
            raise self._write_failed(exc) from None
        try:
            deadline = time.monotonic() + timeout_s
            while True:
                try:
                    fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                    break
                except BlockingIOError:
                    if time.monotonic() >= deadline:
                        message = "another process is promoting in this registry; try again"
                        raise self._fail("REGISTRY_LOCKED", message) from None
                    time.sleep(0.05)
            self._locked = True
            yield
        finally:
            self._locked = False
            os.close(fd)

    def append(
        self, *, candidate: Build, baseline: str | None, by: str, at: int
    ) -> PromotionRecord:
        """Append one record, fsynced; the caller holds :meth:`locked` since it read the current
        promotion."""
        if not self._locked:
            raise RuntimeError("append a promotion only while holding Registry.locked()")
        records = self.history()
        record: dict[str, Any] = {
            "seq": len(records) + 1,
            "at": at,
            "by": check_by(by),
            "candidate": candidate.digest,
            "baseline": baseline,
            "project": {"id": candidate.project.id, "version": candidate.project.version},
            "prev": records[-1].line_digest if records else None,
        }
        line = _line(record)
        try:
            self._append_line(line)
        except OSError as exc:
            raise self._write_failed(exc) from None
        return _record(line, len(records) + 1, record["prev"], str(self.history_path))

    def _append_line(self, line: bytes) -> None:
        """One ``O_APPEND`` write of ``line`` and its newline, fsynced (and the new file's
        directory entry with it)."""
        created = not self.history_path.exists()
        fd = os.open(self.history_path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
        try:
            view = memoryview(line + b"\n")
            while view:
                view = view[os.write(fd, view) :]
            os.fsync(fd)
        finally:
            os.close(fd)
        if created:
            _fsync_dir(self.root)


def _parse_history(data: bytes, file: str) -> list[PromotionRecord]:
    if not data:
        return []
    lines = data.split(b"\n")
    if lines[-1] != b"":
        message = "the last record is incomplete (no final newline)"
        raise RegistryError(file, [_diag("HISTORY_CORRUPT", message, line=len(lines))])
    records: list[PromotionRecord] = []
    prev: str | None = None
    for number, raw in enumerate(lines[:-1], 1):
        record = _record(raw, number, prev, file)
        records.append(record)
        prev = record.line_digest
    return records


def _record(raw: bytes, number: int, prev: str | None, file: str) -> PromotionRecord:
    def corrupt(message: str) -> RegistryError:
        return RegistryError(file, [_diag("HISTORY_CORRUPT", message, line=number)])

    try:
        doc = loads(raw)
    except JsonError as exc:
        raise corrupt(f"the record is not strict JSON ({exc})") from None
    if not isinstance(doc, dict) or set(doc) != _RECORD_KEYS:
        raise corrupt(f"a record has exactly the keys {', '.join(sorted(_RECORD_KEYS))}")
    if _line(doc) != raw:
        raise corrupt("the record is not in its written form (it was edited)")
    if doc["seq"] != number or doc["prev"] != prev:
        raise corrupt("the chain of records is broken (a record was removed, moved or edited)")
    problem = _record_problem(doc)
    if problem:
        raise corrupt(problem)
    return PromotionRecord(
        seq=number,
        at=doc["at"],
        by=doc["by"],
        candidate=doc["candidate"],
        baseline=doc["baseline"],
        project=doc["project"],
        prev=prev,
        line_digest=build_digest(raw),
    )


def _record_problem(doc: Mapping[str, Any]) -> str | None:
    if type(doc["at"]) is not int or doc["at"] < 0:
        return "`at` is not a time in milliseconds"
    if not isinstance(doc["by"], str) or not doc["by"]:
        return "`by` does not name who promoted"
    for key in ("candidate", "baseline"):
        value = doc[key]
        if (value is not None or key == "candidate") and not (
            isinstance(value, str)
            and value.startswith(DIGEST_PREFIX)
            and _HEX.fullmatch(value.removeprefix(DIGEST_PREFIX))
        ):
            return f"`{key}` is not a build digest"
    project = doc["project"]
    if not isinstance(project, dict) or set(project) != {"id", "version"}:
        return "`project` is not `{id, version}`"
    if not all(isinstance(v, str) for v in project.values()):
        return "`project` is not `{id, version}`"
    return None
