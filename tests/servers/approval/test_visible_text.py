"""What renders as nothing or as a blank (``servers.support.visible``), checked against
something independent: its table of default-ignorable code points against V8's
``\\p{Default_Ignorable_Code_Point}`` (headless Chromium), and the approvers' page's own
definition (``servers/approval/page/text.js``) against it, code point by code point, wherever
Python's and Chromium's Unicode versions agree a code point is assigned or not. Then what it is
for: ``argumentsText`` escapes each such character and stays JSON of the same arguments (a
hypothesis property), and a reason made only of them is no reason."""

from __future__ import annotations

import itertools
import json
import unicodedata
from collections.abc import Iterator
from importlib import resources

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from playwright.sync_api import Browser, Page, Route

from policy.json.strict import loads
from servers.approval.view import exact_text
from servers.support.visible import (
    DEFAULT_IGNORABLE,
    escape_invisible,
    has_visible,
    invisible,
)
from tests.support.browser_support import launched_browser

ORIGIN = "http://seif.test"
SHOWN_AS_NOTHING = {  # the characters the attack used, and their kin
    "variation selectors": "\ufe00\ufe0f\U000e0100\U000e01ef",
    "combining grapheme joiner": "\u034f",
    "Khmer inherent vowels": "\u17b4\u17b5",
    "Mongolian variation selectors": "\u180b\u180c\u180d\u180e\u180f",
    "Hangul fillers": "\u115f\u1160\u3164\uffa0",
    "braille blank": "\u2800",
    "spaces other than U+0020": "\u00a0\u2000\u200a\u202f\u205f\u3000",
    "zero width and bidi": "\u200b\u200c\u200d\u2060\ufeff\u202e\u2066",
    "tags": "\U000e0001\U000e0041",
    "combining marks": "\u0301\u20dd",
    "controls": "\x7f\x85\u2028",
}
CATEGORIES = (
    "Lu", "Ll", "Lt", "Lm", "Lo", "Mn", "Mc", "Me", "Nd", "Nl", "No", "Pc", "Pd", "Ps", "Pe",
    "Pi", "Pf", "Po", "Sm", "Sc", "Sk", "So", "Zs", "Zl", "Zp", "Cc", "Cf", "Cs", "Co", "Cn",
)  # fmt: skip
# every code point's flags by the page's module in Chromium, one character each: its general
# category (A for Lu, ...), then 0 + 1 if invisible + 2 if default-ignorable
FLAGS = r"""async (categories) => {
  const { invisible } = await import("/text.js");
  const category = new RegExp(`^(?:${categories.map((c) => `(\\p{gc=${c}})`).join("|")})$`, "u");
  const ignorable = /^\p{Default_Ignorable_Code_Point}$/u;
  const out = [];
  for (let code = 0; code <= 0x10ffff; code++) {
    const char = String.fromCodePoint(code);
    const index = category.exec(char).findIndex((group, at) => at > 0 && group !== undefined);
    out.push(String.fromCharCode(64 + index, 48 + invisible(char) + 2 * ignorable.test(char)));
  }
  return out.join("");
}"""


browser = pytest.fixture(scope="module")(launched_browser)


@pytest.fixture(scope="module")
def flags(browser: Browser) -> Iterator[str]:
    """The page's module loaded from its own file (no server: the page's origin is routed)."""
    context = browser.new_context()
    page = context.new_page()
    page.route(f"{ORIGIN}/**", _serve_page_file)
    page.goto(ORIGIN + "/")
    yield _flags(page)
    context.close()


def _flags(page: Page) -> str:
    found: str = page.evaluate(FLAGS, list(CATEGORIES))
    assert len(found) == 2 * 0x110000
    return found


def _serve_page_file(route: Route) -> None:
    name = route.request.url.removeprefix(ORIGIN + "/") or "blank"
    if name == "blank":
        route.fulfill(status=200, content_type="text/html", body="<!doctype html><title>t</title>")
        return
    body = resources.files("servers.approval").joinpath("page", name).read_text()
    route.fulfill(status=200, content_type="text/javascript", body=body)


IGNORABLE = {code for low, high in DEFAULT_IGNORABLE for code in range(low, high + 1)}


def _alike(flags: str) -> Iterator[tuple[int, int, int]]:
    """``(code point, Python's flags, V8's)`` of every code point whose general category both
    Unicode versions agree on (1 invisible, 2 default-ignorable)."""
    for code in range(0x110000):
        char = chr(code)
        if CATEGORIES.index(unicodedata.category(char)) != ord(flags[2 * code]) - 65:
            continue  # assigned, or categorised, in one version only
        ours = invisible(char) + 2 * (code in IGNORABLE)
        yield code, ours, ord(flags[2 * code + 1]) - 48


def test_the_default_ignorable_table_agrees_with_v8(flags: str) -> None:
    """Python's ``unicodedata`` has no ``Default_Ignorable_Code_Point``: the table is checked
    against V8's on every code point both versions categorise alike."""
    compared = list(_alike(flags))
    assert len(compared) > 1_000_000
    assert [f"U+{code:04X}" for code, ours, v8 in compared if ours & 2 != v8 & 2] == []
    assert sum(high - low + 1 for low, high in DEFAULT_IGNORABLE) == 4174  # Unicode 14.0's
    assert all(a[1] + 1 < b[0] for a, b in itertools.pairwise(DEFAULT_IGNORABLE))


def test_the_page_counts_as_invisible_what_the_servers_do(flags: str) -> None:
    """One definition: the page's ``invisible`` is the servers' on every code point both
    Unicode versions categorise alike (the others were assigned, or recategorised, since)."""
    compared = list(_alike(flags))
    assert [f"U+{code:04X}" for code, ours, v8 in compared if ours & 1 != v8 & 1] == []
    assert sum(ours & 1 for _, ours, _ in compared) > 900_000  # unassigned ones among them


@pytest.mark.parametrize("kind", sorted(SHOWN_AS_NOTHING))
def test_characters_shown_as_nothing_are_escaped_and_are_no_reason(kind: str) -> None:
    chars = SHOWN_AS_NOTHING[kind]
    value = {"summary": f"pay{chars}acc-9", chars: [chars]}
    text = exact_text(value)
    assert not any(c in text for c in chars) and loads(text) == value
    assert all(not invisible(c) for c in text if c not in " \n")
    assert not has_visible(chars) and not has_visible(" \n\t" + chars) and has_visible(chars + "x")


JSON_VALUES = st.recursive(
    st.none() | st.booleans() | st.integers(-(2**53), 2**53) | st.text(),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(), inner, max_size=4),
    max_leaves=12,
)


@settings(max_examples=300, deadline=None)
@given(value=JSON_VALUES)
def test_arguments_text_is_json_of_the_arguments_with_nothing_invisible(value: object) -> None:
    text = exact_text(value)
    assert loads(text) == value
    assert not any(invisible(c) for c in text if c not in " \n")
    assert text == escape_invisible(json.dumps(value, indent=2, ensure_ascii=False))
