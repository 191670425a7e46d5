"""The approvers' page in headless Chromium, signed in with an access token of an approvers'
issuer (its keys in a ``jwksFile``): the bar names the approver by its name claim, not by its
id (a subject fingerprint), and so does the result of its decision; a token without the
required claim is not signed in, and the page says why."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from playwright.sync_api import expect

from tests.servers.approval.test_approval_issuers import (
    KEY,
    NAME,
    approver_token,
    approvers_issuer,
)
from tests.servers.approval.test_approval_page import (
    SLOW,
    Pages,
    ask,
    decide,
    item,
    opened_pages,
    sign_in,
)
from tests.support.approval_harness import ThreadedApproval, approval_in_thread
from tests.support.browser_support import launched_browser
from tests.support.identity import jwks

browser = pytest.fixture(scope="module")(launched_browser)
pages = pytest.fixture(opened_pages)


@pytest.fixture
def t(tmp_path: Path) -> Iterator[ThreadedApproval]:
    (tmp_path / "idp.json").write_text(json.dumps(jwks(KEY)))
    document: dict[str, Any] = {
        "approvers": [{"id": "ops-ana", "tokenRef": "env:SEIF_APPROVER_ANA"}],
        "issuers": [approvers_issuer({"jwksFile": "idp.json"})],
    }
    with approval_in_thread(tmp_path, approvers=document) as threaded:
        yield threaded


def test_the_page_names_an_issuer_s_approver_by_its_name_claim(
    t: ThreadedApproval, pages: Pages
) -> None:
    _, pending_id = ask(t)
    page = pages.open(query=SLOW)
    sign_in(page, approver_token(exp=int(time.time()) + 600))
    expect(page.locator("header")).to_contain_text(f"Signed in as {NAME}")
    expect(page.locator("header")).not_to_contain_text("hmac-sha256")
    entry = item(page, pending_id)
    decide(entry, "Approve", "checked against the lesson")
    expect(entry.get_by_role("status")).to_contain_text(f"Approved by {NAME}, valid until")
    assert pages.errors == []


def test_a_token_without_the_claim_is_not_signed_in(t: ThreadedApproval, pages: Pages) -> None:
    page = pages.open(query=SLOW)
    field = page.get_by_label("Approver token")
    field.fill(approver_token(groups=["support"]))
    field.press("Enter")
    expect(page.locator("#sign-in-message")).to_contain_text("not an approver")
    expect(page.get_by_role("button", name="Sign out")).to_be_hidden()
