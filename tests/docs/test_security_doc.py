"""docs/security.md names a test for every threat: each named test exists, so the page cannot
point at a test that was renamed or removed. The page names a test file by its name alone, found
in whichever folder of tests/ holds it (one file of that name in all)."""

from __future__ import annotations

import re

from tests.support.paths import ROOT

DOC = (ROOT / "docs" / "security.md").read_text(encoding="utf-8")


def test_every_test_the_security_page_names_exists() -> None:
    named: list[tuple[str, str]] = []
    for cell in re.findall(
        r"`(test_[a-z0-9_]+\.py)((?:::[a-z0-9_]+)?)`((?:, `::[a-z0-9_]+`)*)", DOC
    ):
        file, first, more = cell
        names = [first[2:]] if first else []
        names += re.findall(r"`::([a-z0-9_]+)`", more)
        named += [(file, name) for name in names] or [(file, "")]
    assert len(named) > 40
    for file, name in named:
        found = list((ROOT / "tests").rglob(file))
        assert len(found) == 1, f"{file}: {found or 'no such test file'}"
        source = found[0].read_text(encoding="utf-8")
        if name:
            assert re.search(rf"^(async )?def {name}\(", source, re.M), f"{file}::{name}"
