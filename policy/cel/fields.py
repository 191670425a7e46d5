"""The fields a condition reads, checked against what its stage binds.

A path ``args.a.b`` is checked against the tool's parameter schema, ``context.x`` against the
coordinates the engine binds (``objective``, ``consumer``, ``environment``, ``deployment``),
``call.x`` against ``tool``, ``callId`` and ``count``, and ``principal.x`` against ``issuer``,
``subject``, ``clientId`` and ``claims`` (an open map: any claim name): a field that is not there
is ``CEL_UNKNOWN_FIELD`` (an error: every evaluation that reads it fails, and a failing condition
denies the call), with the nearest declared name. Nested objects are followed through their
``properties``, an index (``args.tags[0]``) through ``items``, a string key (``args["a"]``) as a
field, and the variable of a macro over a list (``args.tags.all(t, ...)``) as an item; an object
that admits other keys (``additionalProperties: true``), a computed key or anything else not
known statically is not checked further, so nothing valid is refused.

A read of an optional property (one its object does not list in ``required``), or of a claim
(``principal.claims.groups``: a token may not carry it), that no ``has()`` guards is
``CEL_OPTIONAL_WITHOUT_HAS``, a warning: a call without it makes the condition fail, and the
call is denied ``CONDITION_ERROR`` (a tool whose ``when`` fails is omitted). A read is guarded
where ``has()`` of it (or of a longer path through it) must be true: the other operands of
``has(args.x) && ...``, those of ``!has(args.x) || ...`` and the first branch of ``has(args.x) ?
... : ...`` (the second of ``!has(args.x) ? ... : ...``); ``&&`` and ``||`` absorb the error of
a side the other side decides, so the order of the operands does not matter. Pure: no I/O.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from lark import Token, Tree

from policy.cel.expression import ident_of, unwrap
from policy.cel.program import (
    MACROS,
    CelCompileError,
    decode_string,
    parse_quoted,
    unquote_fields,
)
from policy.diagnostic import Diagnostic, Location, Severity, nearest

__all__ = [
    "CALL_SCHEMA",
    "CONTEXT_SCHEMA",
    "OPTIONAL_WITHOUT_HAS",
    "PRINCIPAL_SCHEMA",
    "UNKNOWN_FIELD",
    "check_fields",
]

Path = tuple[str, ...]
"""A path as its guards name it: the root variable, then ``.name`` and ``[key]`` steps."""


def _closed(fields: Mapping[str, str]) -> dict[str, Any]:
    return {
        "type": "object",
        "properties": {name: {"type": kind} for name, kind in fields.items()},
        "required": list(fields),
    }


CONTEXT_SCHEMA = _closed(
    {"objective": "string", "consumer": "string", "environment": "string", "deployment": "string"}
)
"""What ``context`` holds at both stages (``policy.engine.disclosure.disclosure_context``):
every field is always there, an absent coordinate being ``""``."""
CALL_SCHEMA = _closed({"tool": "string", "callId": "string", "count": "integer"})
"""What ``call`` holds at the call stage (``policy.engine.decision``)."""
PRINCIPAL_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "issuer": {"type": "string"},
        "subject": {"type": "string"},
        "clientId": {"type": "string"},
        "claims": {"type": "object", "properties": {}, "additionalProperties": {}},
    },
    "required": ["issuer", "subject", "clientId", "claims"],
}
"""What ``principal`` holds at both stages (``policy.engine.principal``): its fields are always
there (``null`` for a static credential's issuer and subject); ``claims`` is an open map whose
every key may be absent (a schema as ``additionalProperties``: any name, each optional)."""

UNKNOWN_FIELD = "CEL_UNKNOWN_FIELD"
OPTIONAL_WITHOUT_HAS = "CEL_OPTIONAL_WITHOUT_HAS"
_LISTED = 8
"""At most this many field names are listed when none is near the one written."""


@dataclass(frozen=True, slots=True)
class _Var:
    """A variable of the expression and what is known of its value: a schema (None: nothing)."""

    shown: str
    schema: Mapping[str, Any] | None
    root: bool  # `args`, `context` or `call` (their missing fields are named as such)


@dataclass(slots=True)
class _Checker:
    tool: str | None
    quoted: Mapping[str, str]
    found: list[Diagnostic] = field(default_factory=list)
    seen: set[tuple[str, str]] = field(default_factory=set)

    # --- the walk ---------------------------------------------------------------------------

    def visit(self, node: Any, env: Mapping[str, _Var], guards: frozenset[Path]) -> None:
        if not isinstance(node, Tree):
            return
        kind = str(node.data)
        parts = [c for c in node.children if c is not None]
        if kind == "expr" and len(parts) == 3:
            test, then, other = parts
            self.visit(test, env, guards)
            self.visit(then, env, guards | facts(test, True, self.quoted))
            self.visit(other, env, guards | facts(test, False, self.quoted))
            return
        if kind in ("conditionaland", "conditionalor") and len(parts) == 2:
            operands = _operands(node)
            known = [facts(o, kind == "conditionaland", self.quoted) for o in operands]
            for i, operand in enumerate(operands):
                others = frozenset().union(*(k for j, k in enumerate(known) if j != i))
                self.visit(operand, env, guards | others)
            return
        if kind in ("member_dot", "member_index") and self.path(node, env, guards, tested=False):
            return
        if kind == "ident_arg" and parts and str(parts[0]) == "has":
            self.has(parts, env, guards)
            return
        if kind == "member_dot_arg" and len(parts) > 1 and str(parts[1]) in MACROS:
            self.macro(parts, env, guards)
            return
        for child in parts:
            self.visit(child, env, guards)

    def has(self, parts: list[Any], env: Mapping[str, _Var], guards: frozenset[Path]) -> None:
        args = _arguments(parts[1]) if len(parts) > 1 else []
        inner = unwrap(args[0]) if len(args) == 1 else None
        if inner is None or inner.data != "member_dot" or not self.path(inner, env, guards, True):
            for child in parts[1:]:
                self.visit(child, env, guards)

    def macro(self, parts: list[Any], env: Mapping[str, _Var], guards: frozenset[Path]) -> None:
        target, _name, *rest = parts
        self.visit(target, env, guards)
        args = _arguments(rest[0]) if rest else []
        binder = ident_of(args[0]) if args else None
        if binder is None:
            for arg in args:
                self.visit(arg, env, guards)
            return
        over = self.schema_of(target, env)
        element: Mapping[str, Any] | None = None
        if over is not None and over.get("type") == "array":
            items = over.get("items")
            element = items if isinstance(items, Mapping) else None
        elif over is not None and over.get("type") == "object":
            element = {"type": "string"}  # a macro over a map ranges over its keys
        inner = {**env, binder: _Var(binder, element, root=False)}
        kept = frozenset(g for g in guards if g[0] != binder)
        for arg in args[1:]:
            self.visit(arg, inner, kept)

    # --- paths ------------------------------------------------------------------------------

    def path(
        self, node: Tree[Any], env: Mapping[str, _Var], guards: frozenset[Path], tested: bool
    ) -> bool:
        """Check the path ``node`` selects (its last field only tested by ``has()`` when
        ``tested``); False when it is not a path from a known variable."""
        chain = _chain(node, self.quoted)
        if chain is None or chain[0] not in env:
            return False
        root, steps = chain
        var = env[root]
        schema = var.schema
        path: Path = (root,)
        for i, (step, token, key_tree) in enumerate(steps):
            if key_tree is not None:
                self.visit(key_tree, env, guards)
            last = i == len(steps) - 1
            schema, path = self.step(var, schema, path, step, token, guards, tested and last)
        return True

    def step(
        self,
        var: _Var,
        schema: Mapping[str, Any] | None,
        path: Path,
        step: str | None,
        token: Any,
        guards: frozenset[Path],
        tested: bool,
    ) -> tuple[Mapping[str, Any] | None, Path]:
        """One step from ``schema`` (``step``: ``.name``, ``[key]`` or ``[]`` for a key not
        known statically): the schema reached and the path so far."""
        next_path = (*path, step if step is not None else "[]")
        if schema is None:
            return None, next_path
        kind = schema.get("type")
        name = _field_name(step)
        if kind == "array" and (step is None or step.startswith("[")):
            items = schema.get("items")
            return (items if isinstance(items, Mapping) else None), next_path
        if name is None:
            return None, next_path
        if kind != "object":
            self.not_an_object(schema, path, name, token)
            return None, next_path
        properties = schema.get("properties")
        properties = properties if isinstance(properties, Mapping) else {}
        if name not in properties:
            extra = schema.get("additionalProperties")
            if isinstance(extra, Mapping):  # an open map: any key, each of them optional
                if not tested and next_path not in guards:
                    self.optional(next_path, token)
                return (extra if "type" in extra else None), next_path
            if extra is not True:
                self.unknown(var, path, name, properties, token)
            return None, next_path
        required = schema.get("required", ())
        optional = isinstance(required, (list, tuple)) and name not in required
        if optional and not tested and next_path not in guards:
            self.optional(next_path, token)
        found = properties[name]
        return (found if isinstance(found, Mapping) else None), next_path

    def schema_of(self, node: Any, env: Mapping[str, _Var]) -> Mapping[str, Any] | None:
        """What is known of the value ``node`` selects, without reporting anything."""
        chain = _chain(node, self.quoted)
        if chain is None or chain[0] not in env:
            return None
        schema = env[chain[0]].schema
        for step, _token, _key in chain[1]:
            if schema is None:
                return None
            name = _field_name(step)
            if schema.get("type") == "array" and (step is None or step.startswith("[")):
                items = schema.get("items")
                schema = items if isinstance(items, Mapping) else None
            elif schema.get("type") == "object" and name is not None:
                props = schema.get("properties")
                found = props.get(name) if isinstance(props, Mapping) else None
                schema = found if isinstance(found, Mapping) else None
            else:
                return None
        return schema

    # --- what is reported -------------------------------------------------------------------

    def unknown(
        self, var: _Var, path: Path, name: str, properties: Mapping[str, Any], token: Any
    ) -> None:
        written = _shown((*path, f".{name}"))
        if var.root and len(path) == 1 and var.shown == "args":
            owner = f"the tool `{self.tool}` has no parameter" if self.tool else "no parameter"
        else:
            owner = f"`{_shown(path)}` has no field"
        near = nearest(name, properties)
        if near is not None:
            rest = f"; did you mean `{near}`?"
        elif properties:
            names = sorted(properties)
            listed = ", ".join(f"`{n}`" for n in names[:_LISTED])
            rest = f" (it has {listed}{', ...' if len(names) > _LISTED else ''})"
        else:
            rest = " (it has none)"
        self.report(UNKNOWN_FIELD, f"`{written}`: {owner} `{name}`{rest}", token, "error")

    def not_an_object(self, schema: Mapping[str, Any], path: Path, name: str, token: Any) -> None:
        shown, kind = _shown(path), schema.get("type")
        a_kind = {"array": "a list", "integer": "an integer"}.get(str(kind), f"a {kind}")
        message = f"`{shown}.{name}`: `{shown}` is {a_kind} and has no field `{name}`"
        items = schema.get("items")
        props = items.get("properties") if isinstance(items, Mapping) else None
        if kind == "array" and isinstance(props, Mapping) and name in props:
            message += f"; its items do: `{shown}[0].{name}`, `{shown}.all(x, x.{name} ...)`"
        self.report(UNKNOWN_FIELD, message, token, "error")

    def optional(self, path: Path, token: Any) -> None:
        shown = _shown(path)
        if path[0] == "principal":
            said = f"`{shown}` is absent when the token has no such claim (and always for a "
            said += "static credential): the condition fails then (CONDITION_ERROR)"
        else:
            said = f"`{shown}` is optional: a call without it is denied CONDITION_ERROR here"
        message = f"{said}; write `has({shown}) && ...` (or `!has({shown}) || ...`)"
        self.report(OPTIONAL_WITHOUT_HAS, message, token, "warning")

    def report(self, code: str, message: str, token: Any, severity: Severity) -> None:
        """One problem at the token's line and column, once per expression."""
        if (code, message) in self.seen:
            return
        self.seen.add((code, message))
        line = getattr(token, "line", 1) or 1
        column = getattr(token, "column", 1) or 1
        location = Location(line=line, column=column)
        self.found.append(
            Diagnostic(code=code, message=message, location=location, severity=severity)
        )


def check_fields(
    text: str,
    stage: str,
    parameters: Mapping[str, Any] | None = None,
    tool: str | None = None,
) -> list[Diagnostic]:
    """The field problems of ``text`` as a condition of ``stage`` (``disclosure`` or ``call``)
    of the tool ``tool`` whose parameter schema is ``parameters`` (None: ``args`` is not
    checked). Each is at a 1-based line and column of the expression; errors are
    ``CEL_UNKNOWN_FIELD``, warnings ``CEL_OPTIONAL_WITHOUT_HAS``. An expression that does not
    parse has none (its syntax error is reported by ``check_expression``)."""
    try:
        tree, quoted = parse_quoted(text)
    except CelCompileError:
        return []
    env = {
        "context": _Var("context", CONTEXT_SCHEMA, root=True),
        "principal": _Var("principal", PRINCIPAL_SCHEMA, root=True),
    }
    if stage == "call":
        env["call"] = _Var("call", CALL_SCHEMA, root=True)
        known = isinstance(parameters, Mapping) and parameters.get("type") == "object"
        args = parameters if known else None  # another root is refused where it is declared
        env["args"] = _Var("args", args, root=True)
    checker = _Checker(tool, quoted)
    checker.visit(tree, env, frozenset())
    if not quoted:
        return checker.found
    return [_written_at(d, unquote_fields(text)[0], quoted) for d in checker.found]


def _written_at(found: Diagnostic, plain: str, quoted: Mapping[str, str]) -> Diagnostic:
    """``found`` at the column where it is written: the parser saw each backquoted name as a
    longer stand-in (``policy.cel.program.unquote_fields``)."""
    line, column = found.line or 1, found.column or 1
    text = plain.splitlines()[line - 1] if line <= len(plain.splitlines()) else ""
    shift = 0
    for stand_in, name in quoted.items():
        at = text.find(stand_in)
        while 0 <= at < column - 1:
            shift += len(stand_in) - len(name) - 2
            at = text.find(stand_in, at + 1)
    return found.moved(column=column - shift)


# --- what ``has()`` makes known -----------------------------------------------------------------


def facts(node: Any, truth: bool, quoted: Mapping[str, str]) -> frozenset[Path]:
    """The paths that are certainly present when ``node`` is ``truth`` (``has(a.b.c)``: true
    says ``a.b`` and ``a.b.c`` are there)."""
    node = unwrap(node)
    if not isinstance(node, Tree):
        return frozenset()
    parts = [c for c in node.children if c is not None]
    kind = str(node.data)
    if kind == "unary" and len(parts) == 2 and isinstance(parts[0], Tree):
        if parts[0].data == "unary_not":
            return facts(parts[1], not truth, quoted)
        return frozenset()
    if kind in ("conditionaland", "conditionalor") and len(parts) == 2:
        each = [facts(o, truth, quoted) for o in _operands(node)]
        if (kind == "conditionaland") == truth:  # all of them hold
            return frozenset().union(*each)
        return frozenset.intersection(*each)  # one of them holds: only what they share
    if kind == "ident_arg" and parts and str(parts[0]) == "has" and truth:
        args = _arguments(parts[1]) if len(parts) > 1 else []
        inner = unwrap(args[0]) if len(args) == 1 else None
        chain = _chain(inner, quoted) if isinstance(inner, Tree) else None
        if chain is None:
            return frozenset()
        root, steps = chain
        path: Path = (root,)
        out = set()
        for step, _token, _key in steps:
            path = (*path, step if step is not None else "[]")
            out.add(path)
        return frozenset(out)
    return frozenset()


# --- the tree -----------------------------------------------------------------------------------

Step = tuple[str | None, Any, Any]
"""``(".name" | "[key]" | None, the token to locate it by, the key's tree to visit)``."""


def _chain(node: Any, quoted: Mapping[str, str]) -> tuple[str, list[Step]] | None:
    """``args.a[0].b`` as ``("args", [".a", "[0]", ".b"])``, or None when it does not start at
    a variable."""
    steps: list[Step] = []
    while True:
        node = unwrap(node)
        if not isinstance(node, Tree):
            return None
        parts = [c for c in node.children if c is not None]
        if node.data == "ident" and parts:
            steps.reverse()
            return str(parts[0]), steps
        if node.data == "member_dot" and len(parts) == 2:
            name = str(parts[1])
            steps.append((f".{quoted.get(name, name)}", parts[1], None))
        elif node.data == "member_index" and len(parts) == 2:
            key = _literal_key(parts[1])
            steps.append((key, _first_token(parts[1]), None if key is not None else parts[1]))
        else:
            return None
        node = parts[0]


def _literal_key(tree: Any) -> str | None:
    """``[0]`` for a literal index, ``.a`` for a literal key (``args["a"]`` is ``args.a``),
    None for a computed one."""
    inner = unwrap(tree)
    if not isinstance(inner, Tree) or inner.data != "literal":
        return None
    token = inner.children[0]
    if isinstance(token, Token) and token.type in ("INT_LIT", "UINT_LIT"):
        return f"[{token}]"
    if isinstance(token, Token) and token.type == "STRING_LIT":
        try:
            return "." + decode_string(str(token))
        except CelCompileError:
            return None
    return None


def _field_name(step: str | None) -> str | None:
    """The field a step selects (``.name``); None for an index."""
    return step[1:] if step is not None and step.startswith(".") else None


_IDENTIFIER = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


def _shown(path: Iterable[str]) -> str:
    """A path as it is written: ``args.a[0]``, ``args.`content-type```, ``args.a[...]``."""
    root, *steps = path
    return root + "".join(_shown_step(s) for s in steps)


def _shown_step(step: str) -> str:
    if step == "[]":
        return "[...]"
    if step.startswith(".") and not _IDENTIFIER.fullmatch(step[1:]):
        return f".`{step[1:]}`"
    return step


def _operands(node: Tree[Any]) -> list[Any]:
    """The operands of a chain of one operator: ``a && b && c`` as ``[a, b, c]``."""
    kind, out = node.data, []
    while isinstance(node, Tree) and node.data == kind:
        parts = [c for c in node.children if c is not None]
        if len(parts) != 2:
            break
        out.append(parts[1])
        node = parts[0]
    out.append(node)
    out.reverse()
    return out


def _arguments(tree: Any) -> list[Any]:
    return [c for c in tree.children if c is not None] if isinstance(tree, Tree) else []


def _first_token(node: Any) -> Any:
    for child in node.children if isinstance(node, Tree) else ():
        if isinstance(child, Token):
            return child
        found = _first_token(child)
        if found is not None:
            return found
    return None
