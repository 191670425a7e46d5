"""What to write instead: the messages of `.seif` syntax errors (docs/language.md, Diagnostics).

lark says which token it met and which terminals it expected; this turns that into the mistake
an author most likely made: a misspelled keyword (the nearest allowed one is named), a keyword
in upper case, a JSON-style colon after a keyword, a block or a string left open, a trailing
comma in JSON, a value where a keyword belongs.
"""

from __future__ import annotations

from lark.exceptions import UnexpectedCharacters, UnexpectedInput, UnexpectedToken

from compiler.seif.grammar import alternatives, literals
from policy.diagnostic import nearest

_VALUES = {
    "ID": "a name", "KEY": "a field name", "STRING": 'a string `"..."`', "NUMBER": "a number",
    "VERSION": "a version such as `1.0.0`",
    "DIGEST": "a digest: `sha256:` and 64 lowercase hex digits",
    "$END": "the end of the file",
}  # fmt: skip
_STARTS = frozenset({"profile", "tool", "test", "objective", "fixtures", "project"})


def _words(expected: set[str]) -> list[str]:
    """The literal words (keywords and punctuation) lark would accept, in a stable order."""
    known, choices, out = literals(), alternatives(), list[str]()
    for name in sorted(expected):
        out.extend(choices.get(name, ()))
        if name in known:
            out.append(known[name])
    return list(dict.fromkeys(out))


def _shown(expected: set[str]) -> str:
    parts = [f"`{w}`" for w in _words(expected)]
    parts += [_VALUES[n] for n in sorted(expected) if n in _VALUES]
    return ", ".join(parts[:14]) or "something else"


def hint(exc: UnexpectedInput, text: str, _keywords: object = None) -> tuple[str, str]:
    """``(code, message)`` for a text lark refused."""
    if isinstance(exc, UnexpectedCharacters):
        return _character(exc, text)
    if isinstance(exc, UnexpectedToken):
        return _token(exc)
    return "SEIF_UNCLOSED_BLOCK", "the file ends inside a block: add the missing `}`"


def _character(exc: UnexpectedCharacters, text: str) -> tuple[str, str]:
    at = exc.pos_in_stream or 0
    char = text[at] if at < len(text) else ""
    if char == '"':
        return "SEIF_UNCLOSED_STRING", 'a string is not closed on its line: add the closing `"`'
    if char in ":=":
        return _colon(char)
    if char == "'":
        return "SEIF_SYNTAX", 'strings are written in double quotes: `"..."`'
    return "SEIF_SYNTAX", f"unexpected character `{char}`"


def _colon(char: str = ":") -> tuple[str, str]:
    return (
        "SEIF_COLON",
        f"no `{char}` after a keyword: write `max_calls 3` or `effect read` (a `:` only follows "
        "a property name in a schema, an option name, or a key inside JSON)",
    )


def _token(exc: UnexpectedToken) -> tuple[str, str]:
    token, expected = exc.token, {str(e) for e in (exc.expected or ())}
    word, words = str(token), _words(expected)
    if token.type == "$END":
        if "RBRACE" in expected:
            return "SEIF_UNCLOSED_BLOCK", "the file ends inside a block: add the missing `}`"
        return "SEIF_SYNTAX", f"the file ends too early: expected {_shown(expected)}"
    if token.type == "COLON":
        return _colon()
    if token.type in ("RBRACE", "RSQB") and expected <= {"STRING", "LBRACE", "LSQB", "NUMBER",
                                                        "TRUE", "FALSE", "NULL"}:  # fmt: skip
        return "SEIF_SYNTAX", "no `,` before a closing bracket in JSON: remove the trailing `,`"
    if word.lower() in words and word not in words:
        return "SEIF_UNKNOWN_KEYWORD", f"keywords are lower case: write `{word.lower()}`"
    if token.type == "ID" and "DIGEST" in expected:
        return "SEIF_SYNTAX", "a digest is `sha256:` and 64 lowercase hex digits"
    if word in literals().values() or word in _STARTS:
        return _misplaced(word, expected)
    near = nearest(word, [w for w in words if w.isidentifier()])
    if near is not None and token.type in ("ID", "KEY"):
        return "SEIF_UNKNOWN_KEYWORD", f"unknown keyword `{word[:40]}`: did you mean `{near}`?"
    return "SEIF_SYNTAX", f"unexpected `{word[:40]}`: expected {_shown(expected)}"


def _misplaced(word: str, expected: set[str]) -> tuple[str, str]:
    """A keyword where it cannot stand: most often the end of what came before is missing."""
    if "RBRACE" in expected and word in _STARTS:
        return "SEIF_UNCLOSED_BLOCK", f"a block is not closed: add `}}` before `{word}`"
    return "SEIF_SYNTAX", f"`{word}` cannot stand here: expected {_shown(expected)}"
