"""The Design workstation's page in headless Chromium against ``seif design`` as a process, opened
at the URL it printed: Design → Tools shows a card per tool; a tool added from a template,
included in a profile, protected and a call validated leave the project file byte for byte as
the same ``compiler.authoring`` functions leave a copy of it; an invalid custom schema shows its
diagnostic at its pointer and writes nothing; a starter is written; "Prepare release & connect"
writes the bindings file, says that nothing was promoted or deployed, and the binding form saves
an endpoint labelled "configured". Every answer carries the strict CSP, and the page breaks none
of it."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
from playwright.sync_api import Browser, Locator, Page, expect

from compiler.authoring.protect import protect_tool
from compiler.authoring.tools import include_tool, new_tool
from policy.json.strict import dumps, loads
from servers.http.pages import CSP
from tests.support.browser_support import launched_browser
from tests.support.coordinates import PROPOSAL, coordinates_doc, write_project
from tests.support.design_harness import cli_edit, design_process, project_copy
from tests.support.runtime_harness import ROOT

SCREENSHOT = ROOT / "out" / "screenshots" / "design-tools.png"
TOOLS = ("inspect-context", "search-knowledge", "propose-change")
XSS = '<img src=x onerror="window.__pwned=1"><script>window.__pwned=2</script>'
PATTERN_SCHEMA = (
    '{"type": "object", "properties": {"code": {"type": "string", "pattern": "^[A-Z]+$"}}}'
)


browser = pytest.fixture(scope="module")(launched_browser)


class Opened:
    """One page of the workstation and the console errors it logged."""

    def __init__(self, browser: Browser, url: str) -> None:
        self.context = browser.new_context(viewport={"width": 1280, "height": 900})
        self.page = self.context.new_page()
        self.errors: list[str] = []
        self.page.on("console", lambda m: self.errors.append(m.text) if m.type == "error" else None)
        self.response = self.page.goto(url)

    def close(self) -> None:
        assert [e for e in self.errors if "Content Security Policy" in e] == []
        self.context.close()


def opened(browser: Browser, url: str) -> Opened:
    found = Opened(browser, url)
    expect(found.page.get_by_role("heading", name="Tools")).to_be_visible()
    return found


def card(page: Page, tool_id: str) -> Locator:
    return page.locator(f'[data-tool-id="{tool_id}"]')


def add_tool(page: Page, template: str, tool_id: str) -> None:
    page.get_by_role("button", name="New tool").click()
    page.get_by_label("Template", exact=True).select_option(template)
    page.get_by_label("Tool id").fill(tool_id)


def test_design_tools_add_include_protect_validate_as_the_cli_does(
    browser: Browser, tmp_path: Path
) -> None:
    project = project_copy(tmp_path, "json", name="context-project")
    twin = project_copy(tmp_path, "json", name="twin")
    with design_process(Path(project.name), cwd=tmp_path) as running:  # the header shows it so
        opened_page = opened(browser, running.url)
        page = opened_page.page
        assert opened_page.response is not None
        assert opened_page.response.headers["content-security-policy"] == CSP
        assert "token" not in page.url  # the token left the address bar
        for tool_id in TOOLS:
            entry = card(page, tool_id)
            expect(entry).to_be_visible()
            for section in ("audience", "protection", "connection"):
                expect(entry.locator(f'[data-section="{section}"]')).to_be_visible()
        expect(card(page, "propose-change").locator('[data-section="audience"]')).to_contain_text(
            "Excluded by: learner"
        )

        add_tool(page, "record-lookup", "lookup-order")
        page.get_by_role("button", name="Add the tool").click()
        added = card(page, "lookup-order")
        expect(added).to_contain_text("included in no profile")
        expect(added.locator('[data-section="audience"]')).to_contain_text("Included by: none")
        cli_edit(twin, lambda s: new_tool(s, template="record-lookup", tool_id="lookup-order"))
        assert project.read_bytes() == twin.read_bytes()

        added.get_by_label("Profile to include lookup-order in").select_option("learner")
        added.get_by_role("button", name="Include in profile").click()
        expect(added.locator('[data-section="audience"]')).to_contain_text("Included by: learner")
        cli_edit(twin, lambda s: include_tool(s, tool_id="lookup-order", profile_id="learner"))
        assert project.read_bytes() == twin.read_bytes()

        added.get_by_role("button", name="Protect audience in all scenarios").click()
        expect(added).to_contain_text("Saved to the project file.")
        expect(added.locator('[data-section="protection"]')).to_contain_text(
            "Objectives no guard covers: none"
        )
        cli_edit(twin, lambda s: protect_tool(s, tool_id="lookup-order"))
        assert project.read_bytes() == twin.read_bytes()

        page.screenshot(path=tmp_path / "design-tools.png", full_page=True)
        SCREENSHOT.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(tmp_path / "design-tools.png", SCREENSHOT)

        added.get_by_role("button", name="Validate a call").click()
        expect(page.get_by_label("Tool", exact=True)).to_have_value("lookup-order")
        page.get_by_label("Objective").select_option("learner")
        page.get_by_label("Arguments (JSON)").fill('{"id": "order-1"}')
        page.get_by_role("button", name="Validate", exact=True).click()
        expect(page.locator("#check-verdict")).to_have_text("Allowed")
        page.get_by_label("Arguments (JSON)").fill('{"id": ""}')
        page.get_by_role("button", name="Validate", exact=True).click()
        expect(page.locator("#check-verdict")).to_contain_text("Denied")
        expect(page.locator('#check-errors [data-pointer="/id"]')).to_be_visible()
        page.get_by_label("Objective").select_option("authoring")
        page.get_by_label("Arguments (JSON)").fill('{"id": "order-1"}')
        page.get_by_role("button", name="Validate", exact=True).click()
        expect(page.locator("#check-verdict")).to_contain_text("Denied")
        assert project.read_bytes() == twin.read_bytes()  # validating writes nothing
        opened_page.close()


@pytest.mark.parametrize("kind", ["json", "seif"])
def test_an_invalid_custom_schema_shows_its_pointer_and_writes_nothing(
    browser: Browser, tmp_path: Path, kind: str
) -> None:
    project = project_copy(tmp_path, kind)
    before = project.read_bytes()
    with design_process(project) as running:
        opened_page = opened(browser, running.url)
        page = opened_page.page
        add_tool(page, "custom", "lookup-code")
        page.get_by_label("JSON Schema", exact=True).check()
        page.get_by_label("JSON Schema of the arguments").fill(PATTERN_SCHEMA)
        page.get_by_role("button", name="Add the tool").click()
        shown = page.locator("#nt-diagnostics .diagnostic")
        expect(shown.first).to_be_visible()
        expect(shown.first).to_contain_text("SCHEMA_UNSUPPORTED_PATTERN")
        pointer = shown.first.get_attribute("data-pointer") or ""
        assert pointer.endswith("/parameters/properties/code/pattern"), pointer
        expect(card(page, "lookup-code")).to_have_count(0)

        page.get_by_label("JSON Schema of the arguments").fill('{"type": ')
        page.get_by_role("button", name="Add the tool").click()
        expect(shown.first).to_contain_text("JSON_SYNTAX")
        expect(shown.first.locator(".where")).to_have_text("1:10")
        opened_page.close()
    assert project.read_bytes() == before


def test_scenarios_and_a_call_at_coordinates_are_shown_as_tool_show_and_check_call_say(
    browser: Browser, tmp_path: Path
) -> None:
    project = write_project(tmp_path, coordinates_doc(), ".json")
    before = project.read_bytes()
    with design_process(project) as running:
        opened_page = opened(browser, running.url)
        page = opened_page.page
        entry = card(page, "propose-change")
        authoring = entry.locator('[data-section="audience"] [data-objective="authoring"]')
        expect(authoring.locator('[data-scenario="environment production"]')).to_have_text(
            "at environment production: not disclosed (CONDITION_NOT_MET)"
        )
        expect(authoring.locator('[data-scenario="consumer trial"]')).to_have_text(
            "at consumer trial: disclosed"
        )
        expect(entry.locator('[data-section="protection"]')).to_contain_text(
            "Scenarios no guard covers: authoring at deployment canary"
        )

        entry.get_by_role("button", name="Validate a call").click()
        page.get_by_label("Objective").select_option("authoring")
        page.get_by_label("Arguments (JSON)").fill(dumps(PROPOSAL))
        page.get_by_label("Simulate an approval").check()
        page.get_by_role("button", name="Validate", exact=True).click()
        expect(page.locator("#check-verdict")).to_have_text("Allowed")
        page.get_by_label("Context consumer").fill("trial")
        page.get_by_role("button", name="Validate", exact=True).click()
        expect(page.locator("#check-verdict")).to_have_text("Denied: CONDITION_DENIED")
        details = page.locator("#check-details")
        expect(details).to_contain_text("consumer trial")
        expect(details).to_contain_text("context.consumer == 'trial'")
        page.get_by_label("Context consumer").fill("")
        page.get_by_label("Context environment").fill("production")
        page.get_by_role("button", name="Validate", exact=True).click()
        expect(page.locator("#check-verdict")).to_have_text("Denied: TOOL_NOT_DISCLOSED")
        opened_page.close()
    assert project.read_bytes() == before


def test_a_starter_is_written_from_a_card(browser: Browser, tmp_path: Path) -> None:
    project = project_copy(tmp_path, "json")
    out = tmp_path / "starter-inspect"
    with design_process(project) as running:
        opened_page = opened(browser, running.url)
        entry = card(opened_page.page, "inspect-context")
        entry.get_by_text("Get a runnable executor starter").click()
        entry.get_by_label("Language").select_option("python")
        entry.get_by_label("Output directory").fill(str(out))
        entry.get_by_role("button", name="Write the starter").click()
        expect(entry).to_contain_text(f"Starter written to {out}")
        opened_page.close()
    assert (out / "contract.json").is_file()
    assert loads((out / "contract.json").read_bytes())["id"] == "inspect-context"


def test_prepare_release_and_connect_saves_an_endpoint_as_configured(
    browser: Browser, tmp_path: Path
) -> None:
    project = project_copy(tmp_path, "seif")
    registry = tmp_path / "registry"
    bindings = tmp_path / "bindings.staging.json"
    with design_process(project, "--registry", str(registry)) as running:
        opened_page = opened(browser, running.url)
        page = opened_page.page
        page.get_by_role("button", name="Prepare release & connect").first.click()
        expect(page.get_by_label("Registry directory")).to_have_value(str(registry))
        page.get_by_label("Environment", exact=True).fill("staging")
        page.locator("#release-form").get_by_role("button").click()
        expect(page.locator("#release-nothing")).to_contain_text("Nothing was promoted or deployed")
        assert bindings.is_file() and (registry / "builds").is_dir()

        row = page.locator('[data-binding-tool="inspect-context"]')
        expect(row.locator(".status")).to_have_text("to fill in")
        row.get_by_label("Endpoint of inspect-context").fill("http://example.com/inspect")
        row.get_by_label("Secret reference of inspect-context").fill("")
        row.get_by_role("button", name="Save").click()
        expect(row.locator('[data-pointer="/tools/inspect-context/endpoint"]')).to_be_visible()
        assert loads(bindings.read_bytes())["tools"]["inspect-context"]["endpoint"] != (
            "http://example.com/inspect"
        )

        row.get_by_label("Endpoint of inspect-context").fill("http://127.0.0.1:8801")
        row.get_by_role("button", name="Save").click()
        saved = page.locator('[data-binding-tool="inspect-context"] .status')
        expect(saved).to_have_text("configured")
        assert "ready" not in (page.locator("#binding-rows").text_content() or "").split()
        document = loads(bindings.read_bytes())
        assert document["tools"]["inspect-context"]["endpoint"] == "http://127.0.0.1:8801"

        page.get_by_role("button", name="Tools", exact=True).click()
        connection = card(page, "inspect-context").locator('[data-section="connection"]')
        expect(connection).to_contain_text("configured")
        opened_page.close()


def test_what_the_file_says_is_shown_as_text_never_run(browser: Browser, tmp_path: Path) -> None:
    project = project_copy(tmp_path, "json")
    document = loads(project.read_bytes())
    document["tools"][0]["description"] = XSS
    project.write_text(dumps(document, indent=2), encoding="utf-8")
    with design_process(project) as running:
        opened_page = opened(browser, running.url)
        page = opened_page.page
        expect(card(page, "inspect-context")).to_contain_text(XSS)
        assert page.evaluate("window.__pwned") is None
        assert page.locator("main img").count() == 0
        opened_page.close()


def test_the_page_without_its_token_says_where_to_open_it(browser: Browser, tmp_path: Path) -> None:
    with design_process(project_copy(tmp_path, "json")) as running:
        found = Opened(browser, running.base + "/")
        expect(found.page.locator("#no-token")).to_contain_text("seif design")
        expect(found.page.locator("[data-tool-id]")).to_have_count(0)
        found.close()


def test_a_valid_file_s_warnings_are_listed_as_warnings(browser: Browser, tmp_path: Path) -> None:
    doc = coordinates_doc()
    rule = doc["profiles"][1]["toolRules"][0]
    rule["conditions"] = [{"when": "args.depth > 2", "then": "DENY", "reason": "deep reads"}]
    project = write_project(tmp_path, doc, ".json")
    with design_process(project) as running:
        opened_page = opened(browser, running.url)
        page = opened_page.page
        problems = page.locator("#file-problems")
        expect(problems).to_be_visible()
        expect(problems.get_by_role("heading")).to_have_text(
            "The project file validates, with warnings"
        )
        warning = problems.locator("li.diagnostic.warning")
        expect(warning).to_have_count(1)
        expect(warning).to_contain_text("CEL_OPTIONAL_WITHOUT_HAS")
        expect(warning).to_contain_text("has(args.depth)")
        expect(page.locator("#file-state")).to_have_text("valid")
        opened_page.close()
