"""JSON pointers (RFC 6901): the one place a pointer is escaped, joined and split, and document
order."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any


def escape_pointer_token(token: object) -> str:
    """One RFC 6901 reference token: the text of ``token`` with ``~`` and ``/`` escaped."""
    return str(token).replace("~", "~0").replace("/", "~1")


def join(pointer: str, *tokens: object) -> str:
    """``pointer`` extended by each token, escaped."""
    if len(tokens) == 1:
        return f"{pointer}/{escape_pointer_token(tokens[0])}"
    return pointer + "".join("/" + escape_pointer_token(t) for t in tokens)


def split(pointer: str) -> list[str]:
    """The unescaped reference tokens of ``pointer`` (``""``, the root, has none)."""
    if not pointer:
        return []
    return [t.replace("~1", "/").replace("~0", "~") for t in pointer[1:].split("/")]


def document_order(root: Any, pointer: str) -> tuple[int, ...]:
    """A sort key placing ``pointer`` where it stands in the source document.

    Objects keep their source key order (``json`` preserves it), so the position of each token
    among its siblings is its place in the text. A token that does not exist (a missing key)
    sorts after every existing sibling.
    """
    key: list[int] = []
    node = root
    for token in split(pointer):
        if isinstance(node, Mapping):
            keys = list(node.keys())
            if token in node:
                key.append(keys.index(token))
                node = node[token]
                continue
            key.append(len(keys))
            break
        if isinstance(node, (list, tuple)) and token.isdigit() and int(token) < len(node):
            key.append(int(token))
            node = node[int(token)]
            continue
        key.append(1 << 30)
        break
    return tuple(key)
