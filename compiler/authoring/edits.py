"""One change to a project's document, written into its text in the file's own style.

Each function computes the document the change means, splices it into the text
(``jsontext`` or ``seiftext``) and checks that the new text denotes exactly that document. A
splice that does not (a construct the splicer does not know, such as a ``profile json``
block) falls back to printing the element anew, and last to printing the whole file (`.seif`
comments put back as ``seif fmt`` does); the result is always the intended document.
"""

from __future__ import annotations

import copy
from collections import Counter
from collections.abc import Callable
from typing import Any

from compiler.authoring import jsontext, seiftext
from compiler.authoring.source import ProjectSource, document_of
from policy.json.strict import dumps

Splice = Callable[[], str]


def _settle(source: ProjectSource, intended: dict[str, Any], attempts: list[Splice]) -> str:
    """The first attempt whose text denotes ``intended``, else the whole file printed."""
    for attempt in attempts:
        try:
            text = attempt()
        except (KeyError, ValueError, StopIteration, IndexError):
            continue
        if _same(document_of(text, source.kind), intended) and _comments_kept(source, text):
            return text
    return _reprinted(source, intended)


def _comments_kept(source: ProjectSource, text: str) -> bool:
    """Every comment of a `.seif` source is still in ``text`` (a splice that reprints an
    element drops those inside it: the whole file is reprinted with its comments instead)."""
    if source.kind != "seif":
        return True
    from compiler.seif.parse import comments  # noqa: PLC0415  # lark on demand

    old = Counter(c[1].strip() for c in comments(source.text))
    new = Counter(c[1].strip() for c in comments(text))
    return not old - new


def _same(found: Any, intended: Any) -> bool:
    return found is not None and dumps(found, sort_keys=True) == dumps(intended, sort_keys=True)


def _reprinted(source: ProjectSource, intended: dict[str, Any]) -> str:
    if source.kind == "json":
        return dumps(intended, indent=len(jsontext.indent_unit(source.text)) or 2) + "\n"
    from compiler.seif.fmt import place_comments  # noqa: PLC0415  # lark on demand
    from compiler.seif.parse import parse_seif  # noqa: PLC0415
    from compiler.seif.printer import document_lines, render  # noqa: PLC0415

    parsed = parse_seif(source.text)
    lines = place_comments(
        document_lines(intended), list(parsed.comments), parsed.lines, source.text
    )
    return render(lines)


def add_element(source: ProjectSource, section: str, item: Any) -> str:
    """The text with ``item`` appended to the top-level list ``section`` (tools, tests...)."""
    intended = copy.deepcopy(source.document)
    present = section in intended
    intended.setdefault(section, []).append(copy.deepcopy(item))
    text = source.text
    if source.kind == "json":
        attempt: Splice = (
            (lambda: jsontext.append(text, f"/{section}", item))
            if present
            else (lambda: jsontext.add_member(text, "", section, [item]))
        )
        return _settle(source, intended, [attempt])
    anchor = _seif_anchor(source.document, section)
    attempts: list[Splice] = [lambda: seiftext.append_element(text, section, item)]
    if anchor is not None:
        attempts.insert(0, lambda: seiftext.insert_after(text, anchor, section, item))
    return _settle(source, intended, attempts)


def _seif_anchor(document: dict[str, Any], section: str) -> str | None:
    """The element a new one of ``section`` goes after: the last of its kind, else the last of
    the section printed before it."""
    order = ("objectives", "profiles", "tools", "tests")
    for kind in reversed(order[: order.index(section) + 1]):
        items = document.get(kind)
        if isinstance(items, list) and items:
            return f"/{kind}/{len(items) - 1}"
    return None


def replace_element(source: ProjectSource, section: str, index: int, item: Any) -> str:
    """The text with element ``index`` of ``section`` replaced by ``item``."""
    intended = copy.deepcopy(source.document)
    intended[section][index] = copy.deepcopy(item)
    pointer, text = f"/{section}/{index}", source.text
    if source.kind == "json":
        return _settle(source, intended, [lambda: jsontext.replace(text, pointer, item)])
    return _settle(
        source, intended, [lambda: seiftext.replace_element(text, pointer, section, item)]
    )


def set_rule(source: ProjectSource, profile: int, rule: Any) -> str:
    """The text with ``rule`` as profile ``profile``'s rule for its tool (replacing the rule
    the profile had for that tool, or added last)."""
    intended = copy.deepcopy(source.document)
    rules = intended["profiles"][profile].setdefault("toolRules", [])
    existing = next((i for i, r in enumerate(rules) if r.get("tool") == rule["tool"]), None)
    base, text = f"/profiles/{profile}", source.text
    if existing is not None:
        rules[existing] = copy.deepcopy(rule)
        attempts = [_replace_rule(source, profile, existing, rule)]
    else:
        rules.append(copy.deepcopy(rule))
        if source.kind == "seif":
            attempts = [lambda: seiftext.add_rule(text, base, rule)]
        elif "toolRules" in source.document["profiles"][profile]:
            attempts = [lambda: jsontext.append(text, f"{base}/toolRules", rule)]
        else:
            attempts = [lambda: jsontext.add_member(text, base, "toolRules", [rule])]
    if source.kind == "seif":
        item = intended["profiles"][profile]
        attempts.append(lambda: seiftext.replace_element(text, base, "profiles", item))
    return _settle(source, intended, attempts)


def _replace_rule(source: ProjectSource, profile: int, index: int, rule: Any) -> Splice:
    text, pointer = source.text, f"/profiles/{profile}/toolRules/{index}"
    if source.kind == "json":
        return lambda: jsontext.replace(text, pointer, rule)
    return lambda: seiftext.replace_line(text, pointer, rule)


def remove_element(source: ProjectSource, section: str, index: int) -> str:
    """The text without element ``index`` of ``section``."""
    intended = copy.deepcopy(source.document)
    del intended[section][index]
    pointer, text = f"/{section}/{index}", source.text
    if source.kind == "json":
        return _settle(source, intended, [lambda: jsontext.remove(text, pointer)])
    return _settle(source, intended, [lambda: seiftext.remove_element(text, pointer)])
