"""The checks every configuration file shares: the problems of one file, each located by a JSON
pointer (and the line and column it resolves to) and raised together in one `ConfigError`;
closed objects, ids and numbers; and secret references, each read as one environment key or one
keychain entry, never echoed (docs/runtime-config.md).
"""

from __future__ import annotations

import hmac
import re
from collections.abc import Callable, Collection, Mapping, Sequence
from pathlib import Path
from typing import Any, NoReturn

from compiler.diagnostics import Collector
from compiler.passes.parse import parse_json_text, read_text
from compiler.passes.structure import json_type
from policy.diagnostic import Diagnostic, DiagnosticError, Location, did_you_mean
from policy.json.pointer import join
from policy.json.positions import with_positions

KEYRING_SERVICE = "seif"

KeyringGet = Callable[[str, str], str | None]

ID = re.compile(r"[a-z][a-z0-9-]{0,63}")
_TOKEN_REFS = {
    "env": re.compile(r"[A-Z_][A-Z0-9_]*"),
    "keychain": re.compile(r"[A-Za-z0-9_.-]{1,128}"),
}
_TOOL_REFS = {
    "env": re.compile(r"CONTEXT_TOOL_[A-Z0-9_]+"),
    "keychain": re.compile(r"context-tool-[a-z0-9-]+"),
}
# A reference is quoted in a message only when it has this shape, so that a secret pasted into a
# `tokenRef` or `secretRef` by mistake is never repeated back.
_SHOWABLE_REF = re.compile(r"env:[A-Z_][A-Z0-9_]{0,127}|keychain:[A-Za-z0-9._-]{1,128}")
_ALLOWLIST = "use `env:CONTEXT_TOOL_*` or `keychain:context-tool-*`"
_ANY = "use `env:NAME` or `keychain:NAME`"


class ConfigError(DiagnosticError):
    """Raised by the loaders; ``diagnostics`` lists every problem found in one file, each
    naming its file."""

    empty = "invalid configuration"


def refusal(file: str, *problems: tuple[str, str]) -> ConfigError:
    """A refusal of a whole file, or of an option or a variable named as one: each problem a
    ``(code, message)``."""
    where = Location(file=file, pointer="")
    return ConfigError([Diagnostic(code=c, message=m, location=where) for c, m in problems])


def utf8(text: str) -> bytes:
    return text.encode("utf-8", "surrogatepass")


def same(a: str, b: str) -> bool:
    return hmac.compare_digest(utf8(a), utf8(b))


def ids(names: list[str], none: str = "no tool") -> str:
    return ", ".join(f"`{i}`" for i in names[:8]) or none


def show(text: str) -> str:
    return f"`{text[:64]}…`" if len(text) > 64 else f"`{text}`"


class Check:
    """The problems of one file, the checks that report them, and the secrets it may read."""

    __slots__ = ("_cache", "_env", "_keyring_get", "file", "problems", "text")

    def __init__(self, file: str, env: Mapping[str, str], keyring_get: KeyringGet) -> None:
        self.file = file
        self.problems: list[Diagnostic] = []
        self.text: str | None = None
        self._env = env
        self._keyring_get = keyring_get
        self._cache: dict[tuple[str, str], str] = {}

    def error(self, code: str, pointer: str, message: str) -> None:
        where = Location(file=self.file, pointer=pointer)
        self.problems.append(Diagnostic(code=code, message=message, location=where))

    def done(self) -> None:
        if self.problems:
            self.fail()

    def fail(self) -> NoReturn:
        """Raise every problem found, each at the line and column of its pointer."""
        raise ConfigError(with_positions(self.problems, self.text))

    def document(self, path: str | Path) -> Any:
        """The JSON tree of ``path``; raises at once when it cannot be read or parsed."""
        found = Collector("config")
        self.text = read_text(Path(path), found)
        tree = parse_json_text(self.text, found) if self.text is not None else None
        self.problems.extend(d.moved(file=self.file, pointer=d.pointer or "") for d in found.items)
        if self.text is None or any(d.line is not None for d in found.items):
            self.done()
        return tree

    def object(
        self, value: Any, pointer: str, required: Sequence[str], optional: Sequence[str] | None = ()
    ) -> Mapping[str, Any] | None:
        """``value`` if it is an object; reports its missing and (unless open) unknown keys."""
        if not isinstance(value, dict):
            self.error("WRONG_TYPE", pointer, f"expected an object, found {json_type(value)}")
            return None
        known = (*required, *(optional or ()))
        for k in value:
            if optional is not None and k not in known:
                use = ", ".join(f"`{n}`" for n in known)
                self.error("UNKNOWN_KEY", join(pointer, k), f"unknown key {show(k)}; use {use}")
        for k in required:
            if k not in value:
                self.error("MISSING_KEY", pointer, f"missing key `{k}`")
        return value

    def array(self, value: Any, pointer: str, empty_code: str, empty: str) -> list[Any]:
        if not isinstance(value, list):
            self.error("WRONG_TYPE", pointer, f"expected an array, found {json_type(value)}")
            return []
        if not value:
            self.error(empty_code, pointer, empty)
        return value

    def string(self, value: Any, pointer: str) -> str | None:
        if isinstance(value, str):
            return value
        self.error("WRONG_TYPE", pointer, f"expected a string, found {json_type(value)}")
        return None

    def integer(self, value: Any, pointer: str, low: int, high: int) -> int | None:
        if isinstance(value, bool) or not isinstance(value, int):
            found = "a fractional number" if isinstance(value, float) else json_type(value)
            self.error("WRONG_TYPE", pointer, f"expected an integer, found {found}")
            return None
        if not low <= value <= high:
            self.error("OUT_OF_RANGE", pointer, f"`{value}` is out of range; use {low}..{high}")
            return None
        return value

    def identifier(self, value: Any, pointer: str, code: str) -> str | None:
        text = self.string(value, pointer)
        if text is not None and not ID.fullmatch(text):
            self.error(code, pointer, f"{show(text)} does not match `^[a-z][a-z0-9-]{{0,63}}$`")
            return None
        return text

    def id_list(
        self,
        value: Any,
        pointer: str,
        what: str,
        objectives: Collection[str] | None = None,
    ) -> tuple[str, ...] | None:
        """A list narrowing what a credential or an approver may do (``objectives``,
        ``applications``): ids, none twice, at least one (``NARROWING_EMPTY``: an empty list
        would allow nothing; no list allows all); with ``objectives`` (the build's), each one
        of them (``UNKNOWN_OBJECTIVE``). None when a problem was found."""
        before = len(self.problems)
        found: list[str] = []
        entries = self.array(value, pointer, "NARROWING_EMPTY", f"name {what}, or remove the list")
        for i, entry in enumerate(entries):
            at = join(pointer, i)
            ident = self.identifier(entry, at, "INVALID_ID")
            if ident is None:
                continue
            if ident in found:
                self.error("DUPLICATE_ID", at, f"`{ident}` is listed twice")
            elif objectives is not None and ident not in objectives:
                known = sorted(objectives)
                hint = did_you_mean(ident, known) or f"; the build declares {ids(known, 'none')}"
                self.error("UNKNOWN_OBJECTIVE", at, f"objective `{ident}` is not declared{hint}")
            else:
                found.append(ident)
        return tuple(found) if len(self.problems) == before else None

    def secret(self, value: Any, pointer: str, *, tool: bool) -> str | None:
        """The secret a ``tokenRef`` (any name) or a tool's ``secretRef``/``traceKeyRef`` names."""
        found = self.reference(value, pointer, tool=tool)
        return None if found is None else self.read(*found, pointer)

    def reference(self, value: Any, pointer: str, *, tool: bool) -> tuple[str, str] | None:
        """The ``(kind, name)`` of an allowed reference (nothing is read), else a problem."""
        text = self.string(value, pointer)
        if text is None:
            return None
        kind, _, name = text.partition(":")
        shown = f"`{text}`" if _SHOWABLE_REF.fullmatch(text) else "this value"
        if tool and kind == "env" and name.startswith("SEIF_"):
            registry = name.startswith("SEIF_REGISTRY")
            code = "SECRET_REF_REGISTRY_REFUSED" if registry else "SECRET_REF_SEIF_REFUSED"
            what = "a registry credential" if registry else "a seif credential, not a tool's"
            self.error(code, pointer, f"{shown} is {what}; {_ALLOWLIST}")
            return None
        patterns = _TOOL_REFS if tool else _TOKEN_REFS
        if kind not in patterns or not patterns[kind].fullmatch(name):
            code, use = ("SECRET_REF_REFUSED", _ALLOWLIST) if tool else ("TOKEN_REF_INVALID", _ANY)
            self.error(code, pointer, f"{shown} is not an allowed reference; {use}")
            return None
        return kind, name

    def variable(self, name: str) -> str | None:
        """One environment variable that is not a secret (``PATH``), looked up by its name
        alone, as secrets are."""
        return self._env.get(name)

    def read(self, kind: str, name: str, pointer: str) -> str | None:
        """Exactly one environment key or keychain entry; nothing else is ever looked at."""
        if (kind, name) in self._cache:
            return self._cache[kind, name]
        if kind == "env":
            value: object = self._env.get(name)
        else:
            try:
                value = self._keyring_get(KEYRING_SERVICE, name)
            except Exception as exc:  # any backend failure becomes a problem, without its text
                message = f"keychain entry `{name}` cannot be read ({type(exc).__name__})"
                self.error("KEYCHAIN_UNAVAILABLE", pointer, message)
                return None
        if not isinstance(value, str) or not value:
            self.error("SECRET_MISSING", pointer, f"`{kind}:{name}` is not set or is empty")
            return None
        self._cache[kind, name] = value
        return value
