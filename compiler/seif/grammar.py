"""The `.seif` grammar (``grammar/seif.lark``) as the front end reads it, in one place.

:func:`parser` is its LALR parser, built once per process. The rest is read from the grammar's
own definitions, never copied by hand: :data:`KEYWORDS`, every word the grammar writes in
quotes (the printer writes a name equal to one otherwise, the hints name the nearest one),
:func:`literals`, the text each literal terminal stands for, and :func:`alternatives`, the words
of a terminal that is a choice of words (``REQUIREDNESS``: ``required`` or ``optional``).
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from functools import cache
from importlib import resources

from lark import Lark, Token, Tree
from lark.load_grammar import GrammarBuilder

_WORD = re.compile(r'"([a-z_]+)"')


def grammar_text() -> str:
    return resources.files("grammar").joinpath("seif.lark").read_text(encoding="utf-8")


@cache
def parser() -> Lark:
    return Lark(grammar_text(), parser="lalr", maybe_placeholders=True)


def _quoted(definition: object) -> Iterator[str]:
    """The quoted words of one rule or terminal definition, in the order written."""
    if not isinstance(definition, Tree):
        return
    for token in definition.scan_values(lambda v: isinstance(v, Token) and v.type == "STRING"):
        found = _WORD.fullmatch(str(token))
        if found is not None:
            yield found.group(1)


def _definitions() -> tuple[list[tuple[str, list[str]]], list[str]]:
    """``(terminals, words)``: each named terminal with its quoted words, and the quoted words
    of the rules, as lark's grammar loader reads ``seif.lark`` (no parser is built)."""
    builder = GrammarBuilder()
    builder.load_grammar(grammar_text(), "seif.lark")
    grammar = builder.build()
    terminals = [(str(name), list(_quoted(tree))) for name, (tree, _) in grammar.term_defs]
    words = [word for rule in grammar.rule_defs for word in _quoted(rule[2])]
    return terminals, words


_TERMINALS, _RULE_WORDS = _definitions()

KEYWORDS = frozenset(_RULE_WORDS) | frozenset(w for _, words in _TERMINALS for w in words)
"""Every keyword of the grammar. Where the parser may expect a keyword as well as an ID (a
property name, a fixture id, a call's reason), an ID equal to one is written otherwise."""


def alternatives() -> dict[str, tuple[str, ...]]:
    """The terminals that are a choice of words: ``{"REQUIREDNESS": ("required", "optional"),
    ...}``, each choice in the order the grammar writes it."""
    return {name: tuple(words) for name, words in _TERMINALS if len(words) > 1}


@cache
def literals() -> dict[str, str]:
    """Terminal name -> the literal text it stands for (``INCLUDE`` -> ``include``, ``LBRACE``
    -> ``{``, ``__ANON_0`` -> ``id``), as the parser names its terminals."""
    return {
        t.name: t.pattern.value
        for t in parser().terminals
        if type(t.pattern).__name__ == "PatternStr"
    }
