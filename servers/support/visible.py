"""What shows on a screen: the one definition of the characters that render as nothing or as a
blank, for the runtime, the approval server and the approvers' page (whose
``servers/approval/page/text.js`` a test keeps equal to this, code point by code point).

A character is *invisible* when it is

- a control, a format character, a line or paragraph separator, private use, a surrogate or
  unassigned (categories ``Cc Cf Zl Zp Co Cs Cn``);
- a space, any of them (``Zs``: U+0020 too, U+00A0, U+3000, ...);
- a default-ignorable code point (Unicode's ``Default_Ignorable_Code_Point``, which Python's
  ``unicodedata`` does not offer: :data:`DEFAULT_IGNORABLE`), variation selectors, the
  combining grapheme joiner, the Khmer inherent vowels, the Mongolian variation selectors and
  the Hangul fillers among them;
- a nonspacing or enclosing combining mark (``Mn Me``): no glyph of its own, drawn on its
  neighbour or on nothing;
- one of :data:`BLANKS`, blank glyphs that are symbols by category.

A text *has a visible character* when one of its characters is not invisible: a reason made only
of invisible characters is no reason. :func:`escape_invisible` writes every invisible character
but U+0020 and the line feed as a visible ``\\uXXXX`` escape (a character beyond U+FFFF as its
UTF-16 surrogate pair, as JSON writes it), so JSON text stays JSON and denotes the same value.
"""

from __future__ import annotations

import re
import unicodedata

CATEGORIES = frozenset({"Cc", "Cf", "Zl", "Zp", "Co", "Cs", "Cn", "Zs", "Mn", "Me"})
"""General categories whose characters show nothing of their own."""

DEFAULT_IGNORABLE = (
    (0x00AD, 0x00AD), (0x034F, 0x034F), (0x061C, 0x061C), (0x115F, 0x1160),
    (0x17B4, 0x17B5), (0x180B, 0x180F), (0x200B, 0x200F), (0x202A, 0x202E),
    (0x2060, 0x206F), (0x3164, 0x3164), (0xFE00, 0xFE0F), (0xFEFF, 0xFEFF),
    (0xFFA0, 0xFFA0), (0xFFF0, 0xFFF8), (0x1BCA0, 0x1BCA3), (0x1D173, 0x1D17A),
    (0xE0000, 0xE0FFF),
)  # fmt: skip
"""``Default_Ignorable_Code_Point`` of ``DerivedCoreProperties.txt`` for Unicode 14.0 (the
version of Python 3.11's ``unicodedata``), adjacent ranges joined; a test checks it against
V8's ``\\p{Default_Ignorable_Code_Point}`` on every code point both versions agree is assigned
or not."""

BLANKS = frozenset({"\u2800", "\U0001d159"})
"""Blank glyphs of no invisible category: the braille pattern blank and the musical symbol null
notehead."""

_IGNORABLE = frozenset(chr(c) for low, high in DEFAULT_IGNORABLE for c in range(low, high + 1))
_KEPT = frozenset(" \n")
"""Invisible, and written as they are: JSON text's own space and line feed."""


def invisible(char: str) -> bool:
    """Whether the character ``char`` renders as nothing or as a blank."""
    return char in _IGNORABLE or char in BLANKS or unicodedata.category(char) in CATEGORIES


def has_visible(text: str) -> bool:
    """Whether any character of ``text`` shows."""
    return not all(map(invisible, text))


def escape_invisible(text: str) -> str:
    """``text`` with every invisible character but U+0020 and U+000A as ``\\uXXXX``.

    The characters are judged once each (a set of the text's distinct characters), then the
    invisible ones replaced in one pass: fast on large texts of many repeated characters."""
    found = sorted(c for c in set(text) if c not in _KEPT and invisible(c))
    if not found:
        return text
    return re.compile("[" + "".join(map(re.escape, found)) + "]").sub(_escape, text)


def _escape(found: re.Match[str]) -> str:
    code = ord(found.group())
    if code > 0xFFFF:  # as a JSON surrogate pair
        code -= 0x10000
        return f"\\u{0xD800 + (code >> 10):04x}\\u{0xDC00 + (code & 0x3FF):04x}"
    return f"\\u{code:04x}"
