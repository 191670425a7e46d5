"""The approvers' page in headless Chromium against real servers on loopback (a runtime, the
synthetic executor and the approval server of ``approval_in_thread``): sign-in, the exact
arguments shown as text (the server's ``argumentsText``, or a warning from an older server that
sends only the decoded arguments), approve (then execute with the approval), reject, a reason
required, a call decided elsewhere, a phone's width, the token kept in ``sessionStorage`` only,
and the refresh interval taken from the page's URL (``/?refresh=MS``)."""

from __future__ import annotations

import asyncio
import json
import re
import shutil
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from playwright.sync_api import Browser, BrowserContext, Locator, Page, expect

from policy.engine.state import APPROVAL_TTL_MS
from tests.support.approval_harness import ANA_TOKEN, BEN, ThreadedApproval, approval_in_thread
from tests.support.browser_support import launched_browser
from tests.support.runtime_harness import PROPOSAL, ROOT, FakeClock

SCREENSHOT = ROOT / "out" / "screenshots" / "approvers-page.png"
REASON = "checked against lesson 3, wording only 9d4e1b"  # must never reach the runtime's disk
XSS = '<img src=x onerror="window.__pwned=1"><script>window.__pwned=2</script>'
FAST = "?refresh=500"  # for tests that wait for an automatic refresh
SLOW = "?refresh=60000"  # for tests where no automatic refresh may land between two actions
WAIT_MS = 10_000  # for an automatic refresh of a FAST page: generous
BIG = 9007199254740993  # 2**53 + 1: a double rounds it to ...992
INEXACT = "These arguments contain numbers this browser cannot show exactly"


browser = pytest.fixture(scope="module")(launched_browser)


class Pages:
    """Pages of the approval server, each in a context of its own, and their console errors."""

    def __init__(self, browser: Browser, url: str) -> None:
        self.browser = browser
        self.url = url
        self.contexts: list[BrowserContext] = []
        self.errors: list[str] = []

    def open(self, width: int = 1100, height: int = 800, query: str = "") -> Page:
        context = self.browser.new_context(viewport={"width": width, "height": height})
        self.contexts.append(context)
        page = context.new_page()
        page.on("console", lambda m: self.errors.append(m.text) if m.type == "error" else None)
        page.goto(self.url + "/" + query)
        return page

    def csp_errors(self) -> list[str]:
        return [e for e in self.errors if "Content Security Policy" in e]

    def close(self) -> None:
        for context in self.contexts:
            context.close()


@pytest.fixture
def t(tmp_path: Path) -> Iterator[ThreadedApproval]:
    with approval_in_thread(tmp_path) as threaded:
        yield threaded


def opened_pages(browser: Browser, t: ThreadedApproval) -> Iterator[Pages]:
    """Pages of the approval server of ``t`` (use as ``pytest.fixture``)."""
    opened = Pages(browser, t.stack.url)
    yield opened
    opened.close()


pages = pytest.fixture(opened_pages)


def ask(t: ThreadedApproval, call_id: str = "w1", arguments: Any = PROPOSAL) -> tuple[str, str]:
    """A new context asks for a propose-change call, held for approval: (contextRef, pendingId)."""
    ctx: str = t.run(t.stack.runtime.resolve())["contextRef"]
    receipt = t.run(t.stack.runtime.execute(ctx, "propose-change", call_id, arguments))
    assert (receipt["status"], receipt["reason"]) == ("DENIED", "APPROVAL_REQUIRED")
    found = [p["pendingId"] for p in t.run(t.stack.pending()) if p["contextRef"] == ctx]
    assert len(found) == 1, found
    return ctx, found[0]


def listed(t: ThreadedApproval, pending_id: str) -> dict[str, Any]:
    """The approval server's entry of ``pending_id`` in ``GET /v1/pending``."""
    found = [p for p in t.run(t.stack.pending()) if p["pendingId"] == pending_id]
    assert len(found) == 1, found
    return found[0]


def sign_in(page: Page, token: str = ANA_TOKEN) -> None:
    field = page.get_by_label("Approver token")
    field.fill(token)
    field.press("Enter")
    expect(page.get_by_role("button", name="Sign out")).to_be_visible()


def item(page: Page, pending_id: str, under: str = "main") -> Locator:
    return page.locator(under).locator(f'[data-pending-id="{pending_id}"]')


def decided_item(page: Page, pending_id: str) -> Locator:
    """The item of a call no longer pending, kept in the "Decided" section."""
    return item(page, pending_id, under="#decided-section")


def decide(entry: Locator, button: str, reason: str) -> None:
    entry.get_by_label("Reason").fill(reason)
    entry.get_by_role("button", name=button).click()


READ_ARGUMENTS = """(item) => {
  const read = (node) => {
    if (node.classList.contains("av-object")) {
      return "{" + [...node.children].map((row) => row.querySelector(":scope > dt").textContent
        + ":" + read(row.querySelector(":scope > dd").firstElementChild)).join(",") + "}";
    }
    if (node.classList.contains("av-array")) {
      return "[" + [...node.children].map((li) => read(li.firstElementChild)).join(",") + "]";
    }
    return node.textContent.replaceAll("\\n", "\\\\n");  // a string's real line breaks
  };
  const args = item.querySelector(".args");
  return args.tagName === "PRE" ? args.textContent : read(args.firstElementChild);
}"""


def shown_arguments(entry: Locator) -> str:
    """The arguments as the page shows them, as JSON text: the server's view read row by row
    (each leaf's text, its real line breaks as ``\\n``), or an older server's text as it is."""
    text: str = entry.evaluate(READ_ARGUMENTS)
    return text


def approval_status(t: ThreadedApproval, ctx: str, call_id: str = "w1") -> dict[str, Any]:
    reply = t.run(t.stack.runtime.call("GET", f"/v1/context/tools/approvals/{ctx}/{call_id}"))
    assert reply.status == 200, reply
    body: dict[str, Any] = reply.body
    return body


def files_containing(root: Path, text: str) -> list[Path]:
    needle = text.encode()
    return [f for f in root.rglob("*") if f.is_file() and needle in f.read_bytes()]


def test_sign_in_approve_then_execute(t: ThreadedApproval, pages: Pages, tmp_path: Path) -> None:
    """A wrong token is refused and the form stays; the right one (Enter) lists the call with its
    tool and exact arguments; a call asked later appears on the next automatic refresh without
    wiping a reason being typed; Approve posts only the reason and shows who approved; the
    application then executes with that approval, once; the reason is not on the disk."""
    ctx, pending_id = ask(t)
    page = pages.open(query=FAST)
    field = page.get_by_label("Approver token")
    field.fill("not-a-real-token")
    page.get_by_role("button", name="Sign in").click()
    expect(page.get_by_text("That token was not accepted")).to_be_visible()
    expect(field).to_be_visible()
    expect(page.get_by_role("button", name="Sign out")).to_be_hidden()
    sign_in(page)

    entry = item(page, pending_id)
    expect(entry).to_contain_text("propose-change")
    expect(entry).to_contain_text(ctx)
    expect(entry).to_contain_text("course-authoring")  # its coordinates
    expect(entry).to_contain_text("APPROVAL_REQUIRED")
    expect(entry).to_contain_text(re.compile(r"[45]:\d\d left"))
    assert json.loads(shown_arguments(entry)) == PROPOSAL

    entry.get_by_label("Reason").fill(REASON)
    _, later_id = ask(t, "w2")
    expect(item(page, later_id)).to_be_visible(timeout=WAIT_MS)
    expect(entry.get_by_label("Reason")).to_have_value(REASON)  # kept across the refresh

    with page.expect_request(lambda r: r.method == "POST") as sent:
        entry.get_by_role("button", name="Approve").click()
    assert sent.value.url == f"{t.stack.url}/v1/pending/{pending_id}/approve"
    assert json.loads(sent.value.post_data or "") == {"reason": REASON}
    expect(entry.get_by_role("status")).to_contain_text("Approved by ops-ana, valid until")
    expect(entry.get_by_role("button", name="Approve")).to_have_count(0)
    # on a later refresh it is no longer listed, and stays visible under "Decided"
    decided = decided_item(page, pending_id)
    expect(decided).to_contain_text("Approved by ops-ana", timeout=WAIT_MS)
    expect(item(page, later_id).get_by_role("button", name="Approve")).to_be_enabled()
    page.screenshot(path=tmp_path / "approved.png", full_page=True)
    SCREENSHOT.parent.mkdir(parents=True, exist_ok=True)
    shutil.copyfile(tmp_path / "approved.png", SCREENSHOT)

    status = approval_status(t, ctx)
    assert status["state"] == "APPROVED", status
    runtime = t.stack.runtime
    receipt = t.run(runtime.execute(ctx, "propose-change", "w1", PROPOSAL, status["approvalId"]))
    assert receipt["status"] == "SUCCEEDED", receipt
    assert t.run(runtime.stats())["executions"]["propose-change"] == 1
    assert files_containing(runtime.config.data, REASON) == []


def test_arguments_are_text_never_markup(t: ThreadedApproval, pages: Pages) -> None:
    """An argument carrying an <img onerror> and a <script> shows as that exact text: no element
    is made of it, nothing runs, and the page causes no CSP violation."""
    arguments = {**PROPOSAL, "summary": XSS}
    _, pending_id = ask(t, arguments=arguments)
    text = listed(t, pending_id)["argumentsText"]
    assert text == json.dumps(arguments, indent=2, ensure_ascii=False)
    page = pages.open()
    sign_in(page)
    entry = item(page, pending_id)
    expect(entry).to_be_visible()
    assert json.loads(shown_arguments(entry)) == arguments
    assert json.loads(shown_arguments(entry))["summary"] == XSS
    assert entry.locator("img, script").count() == 0
    assert page.locator("img").count() == 0
    with page.expect_response(lambda r: r.url.endswith("/v1/pending")):  # rendered again
        page.get_by_role("button", name="Refresh").click()
    expect(entry.locator(".av-string").filter(has_text="onerror")).to_have_text(json.dumps(XSS))
    assert page.evaluate("window.__pwned") is None
    assert pages.csp_errors() == []


def test_arguments_shown_exactly_as_they_will_run(t: ThreadedApproval, pages: Pages) -> None:
    """A summary carrying a right-to-left override (U+202E) and a zero-width space (U+200B)
    shows them as visible ``\\u202e`` and ``\\u200b`` escapes, never as the invisible characters:
    the page shows the server's ``argumentsText`` as it is, and it denotes the arguments."""
    summary = "Define the median \u202ebefore\u200b the outlier example."
    arguments = {**PROPOSAL, "summary": summary}
    _, pending_id = ask(t, arguments=arguments)
    text = listed(t, pending_id)["argumentsText"]
    page = pages.open()
    sign_in(page)
    entry = item(page, pending_id)
    expect(entry).to_be_visible()
    shown = shown_arguments(entry)
    assert json.loads(text) == json.loads(shown)
    assert "\\u202e" in shown and "\\u200b" in shown  # the 6-character escapes
    assert "\u202e" not in shown and "\u200b" not in shown
    assert json.loads(shown) == arguments
    expect(entry.get_by_role("heading", name="Arguments (exactly what will run)")).to_be_visible()
    expect(entry.get_by_text(INEXACT)).to_have_count(0)
    expect(entry.get_by_role("button", name="Approve")).to_be_enabled()


def pending_body(*entries: dict[str, Any]) -> str:
    """A ``GET /v1/pending`` body of ``entries`` (Python writes big integers exactly)."""
    now = datetime.now(UTC)
    times = {
        "requestedAt": now.isoformat().replace("+00:00", "Z"),
        "expiresAt": (now + timedelta(minutes=5)).isoformat().replace("+00:00", "Z"),
    }
    calls = [
        {"tool": "propose-change", "callId": "w1", "contextRef": "ctx_route", **times, **e}
        for e in entries
    ]
    return json.dumps({"pending": calls, "now": times["requestedAt"]})


def test_older_server_without_arguments_text(t: ThreadedApproval, pages: Pages) -> None:
    """An older server's entries carry only the decoded ``arguments``: the page shows them (with
    invisible characters escaped) but, when an integer there is beyond what this browser holds
    exactly, warns and disables Approve (Reject stays). Beside it, an entry with
    ``argumentsText`` shows that text as it is, the big integer exact, and can be approved."""
    old = {"pendingId": "pnd_old", "arguments": {"n": BIG, "summary": "a\u202eb"}}
    exact_text = json.dumps({"n": BIG}, indent=2)
    new = {"pendingId": "pnd_new", "arguments": {"n": BIG}, "argumentsText": exact_text}
    safe = {"pendingId": "pnd_safe", "arguments": {"n": 2**53 - 1, "kind": "clarify"}}
    body = pending_body(old, new, safe)
    assert f'"n": {BIG}' in body and str(BIG) in exact_text  # exact in the JSON text

    page = pages.open(query=SLOW)
    page.route(
        "**/v1/pending",
        lambda route: route.fulfill(status=200, content_type="application/json", body=body),
    )
    sign_in(page)

    older = item(page, "pnd_old")
    expect(older).to_be_visible()
    shown = shown_arguments(older)
    assert shown == '{\n  "n": 9007199254740992,\n  "summary": "a\\u202eb"\n}'  # as decoded
    expect(older.get_by_text(INEXACT)).to_be_visible()
    expect(older).to_contain_text("do not approve from this page")
    expect(older.get_by_role("button", name="Approve")).to_be_disabled()
    expect(older.get_by_role("button", name="Reject")).to_be_enabled()
    heading = "Arguments (as this browser reads them)"
    expect(older.get_by_role("heading", name=heading)).to_be_visible()

    exact = item(page, "pnd_new")
    assert shown_arguments(exact) == exact_text
    expect(exact.get_by_text(INEXACT)).to_have_count(0)
    expect(exact.get_by_role("button", name="Approve")).to_be_enabled()

    fitting = item(page, "pnd_safe")  # 2**53 - 1 is held exactly: no warning
    assert json.loads(shown_arguments(fitting)) == safe["arguments"]
    expect(fitting.get_by_text(INEXACT)).to_have_count(0)
    expect(fitting.get_by_role("button", name="Approve")).to_be_enabled()


def test_refresh_interval_from_the_url(t: ThreadedApproval, pages: Pages) -> None:
    """``?refresh=1`` is held to 200 ms (not a request a millisecond); a value that is not an
    integer is ignored (every 5 s, so none within 2 s of signing in)."""
    counts = []
    for query in ("?refresh=1", "?refresh=soon"):
        page = pages.open(query=query)
        sign_in(page)
        seen: list[str] = []
        page.on("request", lambda r, seen=seen: seen.append(r.url))
        page.wait_for_timeout(2_000)
        counts.append(sum(url.endswith("/v1/pending") for url in seen))
    assert 1 <= counts[0] <= 14, counts
    assert counts[1] == 0, counts


def test_reject_needs_a_reason(t: ThreadedApproval, pages: Pages) -> None:
    """Reject with no reason (or only white space) says a reason is required and sends nothing;
    with a reason it shows who rejected, and the application's status read says REJECTED."""
    ctx, pending_id = ask(t)
    page = pages.open()
    sign_in(page)
    entry = item(page, pending_id)
    posts: list[str] = []
    page.on("request", lambda r: posts.append(r.url) if r.method == "POST" else None)
    for blank in ("", "   \n "):
        decide(entry, "Reject", blank)
        expect(entry.get_by_text("A reason is required")).to_be_visible()
    assert posts == []
    assert [p["pendingId"] for p in t.run(t.stack.pending())] == [pending_id]

    decide(entry, "Reject", "not the lesson the learner is on")
    expect(entry.get_by_role("status")).to_have_text("Rejected by ops-ana")
    expect(entry.get_by_text("A reason is required")).to_be_hidden()
    assert posts == [f"{t.stack.url}/v1/pending/{pending_id}/reject"]
    assert approval_status(t, ctx)["state"] == "REJECTED"


def test_already_decided_elsewhere(t: ThreadedApproval, pages: Pages) -> None:
    """Another approver approves the call after the page listed it: the page's Approve then
    says it was already decided, by whom; Refresh then moves it under "Decided". The page
    refreshes by itself only once a minute, so no refresh lands between the two decisions."""
    _, pending_id = ask(t)
    page = pages.open(query=SLOW)
    sign_in(page)
    entry = item(page, pending_id)
    expect(entry).to_be_visible()
    reply = t.run(t.stack.decide("approve", pending_id, headers=BEN))
    assert reply.status == 200, reply
    decide(entry, "Approve", "looks right to me")
    expect(entry.get_by_role("status")).to_contain_text("Already decided by someone else")
    expect(entry.get_by_role("status")).to_contain_text("approved by ops-ben")
    expect(entry.get_by_role("button", name="Approve")).to_have_count(0)
    with page.expect_response(lambda r: r.url.endswith("/v1/pending")):
        page.get_by_role("button", name="Refresh").click()
    expect(decided_item(page, pending_id)).to_contain_text("approved by ops-ben")
    expect(page.get_by_text("Nothing is waiting for approval.")).to_be_visible()


def test_phone_width(t: ThreadedApproval, pages: Pages, tmp_path: Path) -> None:
    """At 360 px the page does not scroll sideways, even with a long unbroken argument, and every
    button is at least 40 px tall."""
    long_word = "medianbeforeoutlier" * 200  # 3800 characters, no place to break
    arguments = {**PROPOSAL, "details": long_word, "citations": [{"ref": "r" * 120}]}
    _, pending_id = ask(t, arguments=arguments)
    page = pages.open(width=360, height=740)
    sign_in(page)
    entry = item(page, pending_id)
    expect(entry).to_be_visible()
    assert json.loads(shown_arguments(entry)) == arguments
    assert page.evaluate("document.documentElement.scrollWidth") <= 360
    box = entry.bounding_box()
    assert box is not None and box["x"] >= 0 and box["x"] + box["width"] <= 360
    buttons = [b for b in page.get_by_role("button").all() if b.is_visible()]
    assert {b.inner_text() for b in buttons} >= {"Approve", "Reject", "Refresh", "Sign out"}
    for button in buttons:
        found = button.bounding_box()
        assert found is not None and found["height"] >= 40, (button.inner_text(), found)
    page.screenshot(path=tmp_path / "phone.png", full_page=True)


def test_token_in_session_storage_only(t: ThreadedApproval, pages: Pages) -> None:
    """The token is in sessionStorage (not localStorage, a cookie or the URL); a reload keeps the
    tab signed in, another context starts at sign-in; a stored token the server refuses sends
    the tab back to sign-in with a message; Sign out forgets the token."""
    page = pages.open()
    sign_in(page)
    expect(page.get_by_text("Nothing is waiting for approval.")).to_be_visible()
    assert page.evaluate("localStorage.length") == 0
    assert page.evaluate("document.cookie") == ""
    assert page.evaluate("Object.values(sessionStorage)") == [ANA_TOKEN]
    assert ANA_TOKEN not in page.url

    page.reload()
    expect(page.get_by_role("button", name="Sign out")).to_be_visible()
    other = pages.open()
    expect(other.get_by_label("Approver token")).to_be_visible()
    expect(other.get_by_role("button", name="Sign out")).to_be_hidden()

    page.evaluate("sessionStorage.setItem(Object.keys(sessionStorage)[0], 'revoked-token')")
    page.reload()
    expect(page.get_by_label("Approver token")).to_be_visible()
    expect(page.get_by_role("alert")).to_contain_text("not accepted")
    assert page.evaluate("sessionStorage.length") == 0

    sign_in(page)
    page.get_by_role("button", name="Sign out").click()
    expect(page.get_by_label("Approver token")).to_be_visible()
    assert page.evaluate("sessionStorage.length") == 0
    assert page.evaluate("localStorage.length") == 0


def test_countdown_reads_the_server_clock(browser: Browser, tmp_path: Path) -> None:
    """The countdown counts down to the expiry on the server's clock (a FakeClock weeks away from
    the browser's): about 5:00 left; at the server's last millisecond it says expired and its
    buttons are disabled; once the runtime drops the call it is "Expired before a decision"."""
    clock = FakeClock()
    with approval_in_thread(tmp_path, clock=clock) as t:
        pages = Pages(browser, t.stack.url)
        try:
            _, pending_id = ask(t)
            page = pages.open(query=FAST)
            sign_in(page)
            entry = item(page, pending_id)
            countdown = entry.locator(".countdown")
            expect(countdown).to_have_text(re.compile(r"^(5:00|4:5\d) left$"))
            clock.advance(APPROVAL_TTL_MS - 1)  # still listed, for one millisecond of its time
            expect(countdown).to_have_text("expired", timeout=WAIT_MS)
            expect(entry.get_by_role("button", name="Approve")).to_be_disabled()
            expect(entry.get_by_role("button", name="Reject")).to_be_disabled()
            assert [p["pendingId"] for p in t.run(t.stack.pending())] == [pending_id]
            clock.advance(1)
            decided = decided_item(page, pending_id)
            expect(decided.get_by_role("status")).to_have_text(
                "Expired before a decision", timeout=WAIT_MS
            )
            assert pages.csp_errors() == []
        finally:
            pages.close()


SHOWN_AS_NOTHING = "\ufe0f\U000e0100\u034f\u17b4\u180b\u115f\u3164\u2800\u00a0\u3000"
ESCAPES = ("\\ufe0f", "\\udb40\\udd00", "\\u034f", "\\u17b4", "\\u180b", "\\u115f", "\\u3164",
           "\\u2800", "\\u00a0", "\\u3000")  # fmt: skip


def test_what_renders_as_nothing_is_escaped_and_is_no_reason(
    t: ThreadedApproval, pages: Pages
) -> None:
    """Variation selectors, the combining grapheme joiner, Khmer and Mongolian invisible
    letters, Hangul fillers, the braille blank and non-ASCII spaces show as visible escapes,
    from the server's ``argumentsText`` and from the page's own escaping of an older server's
    entry alike; a reason made only of such characters is refused before anything is sent."""
    arguments = {**PROPOSAL, "summary": f"pay{SHOWN_AS_NOTHING}acc-9"}
    _, pending_id = ask(t, arguments=arguments)
    page = pages.open(query=SLOW)
    sign_in(page)
    entry = item(page, pending_id)
    shown = shown_arguments(entry)
    assert [c for c in SHOWN_AS_NOTHING if c in shown] == []
    assert all(escape in shown for escape in ESCAPES) and json.loads(shown) == arguments
    posts: list[str] = []
    page.on("request", lambda r: posts.append(r.url) if r.method == "POST" else None)
    for blank in ("\u200b\u2060", "\u3164\u2800", "\u00a0\u3000", "\ufe0f", "\u17b5"):
        decide(entry, "Reject", blank)
        expect(entry.get_by_text("A reason is required")).to_be_visible()
    assert posts == []

    older = pages.open(query=SLOW)  # an older server: the decoded arguments only
    body = pending_body({"pendingId": "pnd_old", "arguments": arguments})
    older.route(
        "**/v1/pending",
        lambda route: route.fulfill(status=200, content_type="application/json", body=body),
    )
    sign_in(older)
    text = shown_arguments(item(older, "pnd_old"))
    assert [c for c in SHOWN_AS_NOTHING if c in text] == []
    assert all(escape in text for escape in ESCAPES) and json.loads(text) == arguments


def hold(t: ThreadedApproval, count: int) -> list[str]:
    """``count`` calls held for approval (30 a context); every pendingId, oldest first."""

    async def asking() -> None:
        runtime = t.stack.runtime
        for first in range(0, count, 30):
            ctx = (await runtime.resolve())["contextRef"]
            asks = [runtime.execute(ctx, "propose-change", f"w{n}", PROPOSAL)
                    for n in range(first, min(count, first + 30))]  # fmt: skip
            for receipt in await asyncio.gather(*asks):
                assert receipt["reason"] == "APPROVAL_REQUIRED", receipt

    t.run(asking())
    return [p["pendingId"] for p in t.run(t.stack.pending())]


def test_more_calls_load_as_the_approver_scrolls(t: ThreadedApproval, pages: Pages) -> None:
    """120 calls: the page shows the first 50, loads the next page as the approver scrolls near
    the end of the list, then the last (each call once, oldest first); a refresh reads again
    only the pages with a call in view and the last one, never the whole list: at the end of
    the list a call decided elsewhere moves to "Decided" without the first page being read."""
    ids = hold(t, 120)
    page = pages.open(query=SLOW)
    asked: list[str] = []
    page.on("request", lambda r: asked.append(r.url) if "/v1/pending" in r.url else None)
    sign_in(page)
    listed = page.locator("#pending-list > [data-pending-id]")
    expect(listed).to_have_count(50)
    assert asked == [f"{t.stack.url}/v1/pending"]
    for count in (100, 120):
        page.locator("#more").scroll_into_view_if_needed()
        expect(listed).to_have_count(count)
    expect(page.get_by_role("button", name="Show more")).to_be_hidden()
    assert [el.get_attribute("data-pending-id") for el in listed.all()] == ids
    assert len(asked) == 3 and all("/v1/pending?after=" in url for url in asked[1:])
    asked_pages = list(asked)

    reply = t.run(t.stack.decide("approve", ids[-1], headers=BEN))  # in view, decided elsewhere
    assert reply.status == 200, reply
    asked.clear()
    with page.expect_response(lambda r: "/v1/pending" in r.url):
        page.evaluate("document.getElementById('refresh').click()")  # clicked where it is
    expect(decided_item(page, ids[-1])).to_contain_text("No longer pending")
    assert 1 <= len(asked) <= 2 and all("?after=" in url for url in asked), asked
    middle = asked_pages[1]
    asked.clear()
    with page.expect_response(lambda r: "?after=" in r.url):  # the last page is read last
        page.get_by_role("button", name="Refresh").click()  # at the top: the first page
    assert asked[0] == f"{t.stack.url}/v1/pending" and len(asked) == 2, asked
    assert middle not in asked  # nothing in view of the page between
