"""The approvers' page in headless Chromium against real servers on loopback, for what an
approver must see besides the call: who they are signed in as, what the tool does, which
application asked, a multi-line string on several lines (every other invisible character still
an escape), a long argument shown whole with no box of its own that scrolls, and a call whose
requester is gone, marked, with Approve disabled and Reject still possible."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from playwright.sync_api import Locator, expect

from servers.mcp.app import McpOptions
from tests.servers.approval.test_approval_page import (
    SLOW,
    Pages,
    ask,
    decide,
    decided_item,
    item,
    opened_pages,
    shown_arguments,
    sign_in,
)
from tests.support.abandoned import abandoned
from tests.support.approval_harness import ThreadedApproval, approval_in_thread
from tests.support.browser_support import launched_browser
from tests.support.runtime_harness import PROPOSAL, reference_project

browser = pytest.fixture(scope="module")(launched_browser)
pages = pytest.fixture(opened_pages)
LINES = [
    "Replace the second paragraph with:",
    "  The median is the middle value;",
    "",
    "end\u200b.",
]
LONG = " ".join(f"word{n:04d}" for n in range(400))  # 3,599 characters, room to wrap
ARGUMENTS = {**PROPOSAL, "summary": "\n".join(LINES), "details": LONG}
SCROLLS = """(root) => [root, ...root.querySelectorAll("*")].filter((el) => {
  const style = getComputedStyle(el);
  const scrolls = ["auto", "scroll"].some((v) => style.overflowX === v || style.overflowY === v);
  return scrolls || el.scrollHeight > el.clientHeight + 1 || el.scrollWidth > el.clientWidth + 1;
}).map((el) => el.className || el.tagName)"""


@pytest.fixture
def t(tmp_path: Path) -> Iterator[ThreadedApproval]:
    with approval_in_thread(tmp_path, mcp=McpOptions(approval_wait_s=20.0)) as threaded:
        yield threaded


def _leaf(entry: Locator, starting: str) -> Locator:
    return entry.locator(".av-string").filter(has_text=starting)


def test_who_what_and_which_application_and_the_whole_arguments(
    t: ThreadedApproval, pages: Pages
) -> None:
    _, pending_id = ask(t, arguments=ARGUMENTS)
    page = pages.open(width=900, query=SLOW)
    sign_in(page)
    expect(page.locator("header")).to_contain_text("Signed in as ops-ana")
    entry = item(page, pending_id)
    description = reference_project().tool_by_id["propose-change"].description
    expect(entry.locator(".tool-description")).to_have_text(description)
    expect(entry.locator(".fact").filter(has_text="Application")).to_contain_text("tutor-app")
    expect(entry.locator(".gone-mark")).to_be_hidden()

    # the multi-line string: one line of the page per line of the value, in order
    details = _leaf(entry, "Replace the second")
    lines = details.locator(".av-line")
    expect(lines).to_have_count(len(LINES))
    tops = [box["y"] for box in (lines.nth(i).bounding_box() for i in range(4)) if box]
    assert len(tops) == 4 and tops == sorted(set(tops)), tops
    texts = lines.all_text_contents()
    assert texts == ['"Replace the second paragraph with:', "  The median is the middle value;",
                     "", 'end\\u200b."']  # fmt: skip  # the zero-width space still an escape
    expect(details.locator(".av-break")).to_have_count(3)  # each line break marked

    # the long value is all there, wrapped over many lines, in no box that scrolls
    note = _leaf(entry, "word0000")
    expect(note).to_have_text(f'"{LONG}"')
    box = note.bounding_box()
    assert box is not None and box["height"] > 10 * 16  # wrapped, not cut
    args = entry.locator(".args")
    assert args.evaluate(SCROLLS) == []  # neither the arguments nor anything in them scrolls
    assert entry.evaluate("(el) => el.scrollHeight <= el.clientHeight") is True
    assert args.evaluate("(el) => el.scrollHeight <= el.clientHeight") is True
    assert args.evaluate("(el) => getComputedStyle(el).maxHeight") == "none"
    whole = page.evaluate("document.documentElement.scrollHeight")
    assert whole > 1000  # the page grows instead: the page itself scrolls
    assert json.loads(shown_arguments(entry)) == ARGUMENTS


def test_a_call_whose_requester_is_gone_is_marked_and_cannot_be_approved(
    t: ThreadedApproval, pages: Pages
) -> None:
    gone: dict[str, Any] = t.run(abandoned(t.stack.runtime, PROPOSAL))
    [listed] = [p for p in t.run(t.stack.pending()) if p["callId"] == gone["callId"]]
    page = pages.open(query=SLOW)
    sign_in(page)
    entry = item(page, listed["pendingId"])
    expect(entry.locator(".gone-mark")).to_be_visible()
    expect(entry.locator(".gone-mark")).to_contain_text("Requester gone")
    expect(entry.get_by_role("button", name="Approve")).to_be_disabled()
    expect(entry.get_by_role("button", name="Reject")).to_be_enabled()
    decide(entry, "Reject", "nobody waits for this call")
    expect(entry.get_by_role("status")).to_contain_text("Rejected by ops-ana")
    page.get_by_role("button", name="Refresh").click()
    expect(decided_item(page, listed["pendingId"])).to_contain_text("Rejected by ops-ana")
    assert pages.csp_errors() == []
