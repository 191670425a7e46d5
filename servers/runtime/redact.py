"""What a decision-log record may say about text a client chose: bounded, and never an
argument key.

The engine's :class:`~policy.engine.decision.Decision` keeps every error pointer whole (the receipt
shows it to the caller); the runtime bounds them where it records them:

- An error pointer keeps the tokens the tool's parameter schema declares (property names of
  the build, array indices under ``items``). From the first token the schema does not declare
  (an argument key the client made up, and everything under it) the rest of the pointer is one
  token, ``…key:`` and 16 hex digits of a keyed BLAKE3 fingerprint of that rest (the runtime's
  fingerprint key): equal rests give equal tokens within one data directory, and the text of
  the key is never written. At most :data:`MAX_LISTED` errors are recorded, with
  ``errorsOmitted`` counting the others.
- A reported name (``POST /v1/context/disclosures``) is kept up to :data:`MAX_TOKEN`
  characters, a longer one cut there and marked ``…(+N)`` with N the characters dropped. A
  list of names is recorded without repeats, at most :data:`MAX_LISTED` of them, with
  ``<field>Omitted`` counting the others.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

import blake3

from policy.json.pointer import escape_pointer_token
from policy.schema.parsed import SchemaError

MAX_TOKEN = 64
MAX_LISTED = 64
KEY_MARK = "…key:"
_DOMAIN = b"seif/unknown-argument-key\x00"


def shortened(text: str, limit: int = MAX_TOKEN) -> str:
    """``text``, or its first ``limit`` characters marked ``…(+N)``."""
    if len(text) <= limit:
        return text
    return f"{text[:limit]}…(+{len(text) - limit})"


def key_token(rest: str, secret: bytes) -> str:
    """The token standing for an undeclared part of a pointer (its escaped text ``rest``)."""
    data = _DOMAIN + rest.encode("utf-8", "surrogatepass")
    return KEY_MARK + blake3.blake3(data, key=secret).hexdigest()[:16]


def _child(node: Any, token: str) -> Any:
    """The schema of ``token`` under ``node``, or None when ``node`` does not declare it."""
    if not isinstance(node, Mapping):
        return None
    properties = node.get("properties")
    name = token.replace("~1", "/").replace("~0", "~")
    if isinstance(properties, Mapping) and name in properties:
        return properties[name]
    items = node.get("items")
    if isinstance(items, Mapping) and token.isdigit() and len(token) <= 10:
        return items
    return None


def error_pointer(pointer: str, parameters: Mapping[str, Any] | None, secret: bytes) -> str:
    """``pointer`` with its undeclared rest replaced by a fingerprint token."""
    if not pointer:
        return pointer
    if not pointer.startswith("/"):  # not a pointer (the engine makes none): all of it hidden
        return "/" + escape_pointer_token(key_token(pointer, secret))
    tokens = pointer[1:].split("/")
    node: Any = parameters
    for i, token in enumerate(tokens):
        node = _child(node, token)
        if node is None:
            rest = "/".join(tokens[i:])
            return "/" + "/".join([*tokens[:i], escape_pointer_token(key_token(rest, secret))])
    return pointer


def errors_field(
    errors: Sequence[SchemaError], parameters: Mapping[str, Any] | None, secret: bytes
) -> dict[str, Any]:
    """The ``errors`` of a decision record (and ``errorsOmitted`` when cut)."""
    out: dict[str, Any] = {
        "errors": [
            {"pointer": error_pointer(e.pointer, parameters, secret), "keyword": e.keyword}
            for e in errors[:MAX_LISTED]
        ]
    }
    if len(errors) > MAX_LISTED:
        out["errorsOmitted"] = len(errors) - MAX_LISTED
    return out


def names_field(field: str, names: Iterable[str]) -> dict[str, Any]:
    """``{field: names}`` without repeats, each shortened, at most :data:`MAX_LISTED`, and
    ``{field}Omitted`` counting the distinct names left out."""
    seen: dict[str, None] = {}
    for name in names:
        seen[shortened(name)] = None
    listed = list(seen)
    out: dict[str, Any] = {field: listed[:MAX_LISTED]}
    if len(listed) > MAX_LISTED:
        out[field + "Omitted"] = len(listed) - MAX_LISTED
    return out
