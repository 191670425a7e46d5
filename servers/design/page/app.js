/* The Design workstation's page. Plain DOM, no framework, no innerHTML: everything that comes
   from the server or the file is set with textContent. The local token comes in the URL's
   fragment (#token=...), is kept in sessionStorage only, and is sent on every API call. */

import { cardBody, diagnostics, holding, human, make, options, rendered, scenarioText } from "./cards.js";

(() => {
  const TOKEN_KEY = "seif.designToken";
  const $ = (id) => document.getElementById(id);
  const state = { token: null, project: null, messages: new Map(), view: "tools" };

  function say(el, text, kind = "") {
    el.textContent = text || "";
    el.hidden = !text;
    el.classList.toggle("error", kind === "error");
    el.classList.toggle("ok", kind === "ok");
  }

  // --- the API ---------------------------------------------------------------------------------

  /** {status, body} of a same-origin request; status 0 when the server could not be reached. */
  async function api(method, path, body) {
    const headers = { Authorization: `Bearer ${state.token}`, Accept: "application/json" };
    const init = { method, headers, cache: "no-store", credentials: "omit", redirect: "error" };
    if (body !== undefined) {
      headers["Content-Type"] = "application/json";
      init.body = JSON.stringify(body);
    }
    let response;
    try { response = await fetch(path, init); } catch (_) {
      return { status: 0, body: { error: { code: "UNREACHABLE", message: "cannot reach seif design: is it still running?" } } };
    }
    let data = null;
    try { data = await response.json(); } catch (_) { data = null; }
    return { status: response.status, body: data || {} };
  }

  /** The diagnostics of an answer: its own, or its error as one. */
  function problemsOf(reply) {
    if (Array.isArray(reply.body.diagnostics) && reply.body.diagnostics.length) return reply.body.diagnostics;
    const error = reply.body.error || {};
    return [{ code: error.code || `HTTP_${reply.status}`, message: error.message || `the server answered ${reply.status}` }];
  }

  // --- the token -------------------------------------------------------------------------------

  function takeToken() {
    const found = new URLSearchParams(window.location.hash.replace(/^#/, "")).get("token");
    if (found) {
      try { sessionStorage.setItem(TOKEN_KEY, found); } catch (_) { /* this page's memory only */ }
      history.replaceState(null, "", window.location.pathname); // the token leaves the address bar
      return found;
    }
    try { return sessionStorage.getItem(TOKEN_KEY); } catch (_) { return null; }
  }

  // --- views -----------------------------------------------------------------------------------

  function showView(name) {
    state.view = name;
    for (const tab of document.querySelectorAll(".tab")) {
      if (tab.dataset.view === name) tab.setAttribute("aria-current", "page");
      else tab.removeAttribute("aria-current");
    }
    for (const view of ["tools", "check", "release"]) $(`view-${view}`).hidden = view !== name;
  }

  async function load() {
    const reply = await api("GET", "/api/project");
    $("loading").hidden = true;
    if (reply.status === 401) { $("no-token").hidden = false; return; }
    if (reply.status !== 200) { say($("tools-message"), problemsOf(reply)[0].message, "error"); return; }
    const project = reply.body;
    state.project = project;
    $("tabs").hidden = false;
    showView(state.view);
    $("file").textContent = project.file;
    const pill = $("file-state");
    pill.hidden = false;
    pill.textContent = project.ok ? "valid" : "does not validate";
    pill.classList.toggle("bad", !project.ok);
    const shown = project.diagnostics || [];  // a valid file's are warnings only
    $("file-problems").hidden = shown.length === 0;
    $("file-problems").classList.toggle("warnings", project.ok);
    $("file-problems-title").textContent = project.ok
      ? "The project file validates, with warnings" : "The project file does not validate";
    diagnostics($("file-diagnostics"), shown);
    renderSelects(project);
    renderCards(project);
  }

  function renderSelects(project) {
    const templates = project.templates || {};
    options($("nt-template"), Object.keys(templates), Object.fromEntries(Object.keys(templates).map((k) => [k, k])));
    $("nt-template-hint").textContent = templates[$("nt-template").value] || "";
    const tools = (project.tools || []).map((t) => t.id);
    options($("cc-objective"), project.objectives || []);
    options($("cc-tool"), tools);
    if (!$("rl-registry").value && project.registry) $("rl-registry").value = project.registry;
  }

  // --- the cards -------------------------------------------------------------------------------

  function renderCards(project) {
    const cards = $("cards");
    cards.replaceChildren();
    if (!(project.tools || []).length) cards.append(make("p", "empty", "This project declares no tool yet."));
    for (const card of project.tools || []) cards.append(renderCard(card, project));
  }

  function renderCard(card, project) {
    const el = make("article", "card", null, { "data-tool-id": card.id });
    el.append(...cardBody(card), cardActions(card.id, project));
    const message = make("div", "card-message", null, { "aria-live": "polite" });
    el.append(message);
    const last = state.messages.get(card.id);
    if (last) showResult(message, last);
    return el;
  }

  function cardActions(toolId, project) {
    const actions = make("div", "card-actions");
    const include = make("form", "inline-form include", null, { novalidate: "" });
    const profile = make("select", "", null, { "aria-label": `Profile to include ${toolId} in` });
    options(profile, project.profiles || []);
    const required = make("input", "", null, { type: "checkbox" });
    const requiredLabel = make("label", "inline", null);
    requiredLabel.append(required, document.createTextNode(" required"));
    include.append(profile, requiredLabel, make("button", "button", "Include in profile", { type: "submit" }));
    include.addEventListener("submit", (event) => {
      event.preventDefault();
      change(toolId, "/api/tools/include", { tool: toolId, profile: profile.value, required: required.checked });
    });
    const protect = make("button", "button", "Protect audience in all scenarios", { type: "button" });
    protect.addEventListener("click", () => change(toolId, "/api/tools/protect", { tool: toolId }));
    const validate = make("button", "button quiet", "Validate a call", { type: "button" });
    validate.addEventListener("click", () => { $("cc-tool").value = toolId; showView("check"); $("check-title").focus(); });
    actions.append(include, protect, validate, starterForm(toolId));
    return actions;
  }

  function starterForm(toolId) {
    const details = make("details", "starter");
    details.append(make("summary", "", "Get a runnable executor starter"));
    const form = make("form", "inline-form", null, { novalidate: "" });
    const lang = make("select", "", null, { "aria-label": "Language" });
    options(lang, ["node", "python"], { node: "Node.js", python: "Python" });
    const out = make("input", "", null, { "aria-label": "Output directory", placeholder: `starters/${toolId}`, spellcheck: "false" });
    form.append(lang, out, make("button", "button", "Write the starter", { type: "submit" }));
    form.addEventListener("submit", (event) => {
      event.preventDefault();
      change(toolId, "/api/starter", { tool: toolId, lang: lang.value, out: out.value || `starters/${toolId}` }, false);
    });
    details.append(form);
    return details;
  }

  /** Show an action's result: its notes and written files, or its diagnostics. */
  function showResult(box, result) {
    box.replaceChildren();
    const title = make("p", result.ok ? "message ok" : "message error", result.title);
    box.append(title);
    if (result.lines && result.lines.length) {
      const notes = make("ul", "notes");
      for (const line of result.lines) notes.append(make("li", "", line));
      box.append(notes);
    }
    if (result.diagnostics && result.diagnostics.length) {
      const list = make("ul", "diagnostics");
      diagnostics(list, result.diagnostics);
      box.append(list);
    }
  }

  async function change(toolId, path, body, reload = true) {
    const reply = await api("POST", path, body);
    const ok = reply.status === 200;
    const result = { ok, title: "", lines: [], diagnostics: ok ? [] : problemsOf(reply) };
    if (ok && path === "/api/starter") {
      result.title = `Starter written to ${reply.body.out}`;
      for (const key of ["lang", "contractDigest", "run", "command"]) {
        if (reply.body[key] !== undefined) result.lines.push(`${human(key)}: ${reply.body[key]}`);
      }
      for (const file of reply.body.files || []) result.lines.push(`wrote ${file}`);
    } else if (ok) {
      result.title = reply.body.written ? "Saved to the project file." : "Nothing to change: the file already says so.";
      result.lines = reply.body.notes || [];
    } else {
      result.title = reply.body.written === false || reply.status === 422
        ? "Not saved: the change does not validate, nothing was written." : "Refused.";
    }
    state.messages.set(toolId, result);
    if (reload) await load();
    else {
      const card = document.querySelector(`[data-tool-id="${CSS.escape(toolId)}"] .card-message`);
      if (card) showResult(card, result);
    }
  }

  // --- a new tool ------------------------------------------------------------------------------

  function mode() { return document.querySelector("input[name=nt-mode]:checked").value; }

  function addFieldRow(name = "", type = "string", required = false) {
    const row = make("div", "field-row");
    const nameInput = make("input", "field-name", null, { "aria-label": "Field name", spellcheck: "false", value: name });
    const typeSelect = make("select", "field-type", null, { "aria-label": "Field type" });
    options(typeSelect, (state.project && state.project.fieldTypes) || ["string"]);
    typeSelect.value = type;
    const requiredBox = make("input", "field-required", null, { type: "checkbox", "aria-label": "Required" });
    requiredBox.checked = required;
    const requiredLabel = make("label", "inline");
    requiredLabel.append(requiredBox, document.createTextNode(" required"));
    const remove = make("button", "button quiet", "Remove", { type: "button" });
    remove.addEventListener("click", () => row.remove());
    row.append(nameInput, typeSelect, requiredLabel, remove);
    $("nt-field-rows").append(row);
  }

  function newToolBody() {
    const body = { template: $("nt-template").value, id: $("nt-id").value.trim() };
    for (const key of ["name", "description", "version", "effect"]) {
      const value = $(`nt-${key}`).value.trim();
      if (value) body[key] = value;
    }
    if (mode() === "fields") {
      body.fields = [...document.querySelectorAll("#nt-field-rows .field-row")].map((row) => {
        const name = row.querySelector(".field-name").value.trim();
        const type = row.querySelector(".field-type").value;
        return row.querySelector(".field-required").checked ? `${name}:${type}:required` : `${name}:${type}`;
      });
    } else if (mode() === "schema") {
      body.schema = $("nt-schema").value;
    }
    return body;
  }

  async function submitNewTool(event) {
    event.preventDefault();
    const body = newToolBody();
    const reply = await api("POST", "/api/tools/new", body);
    if (reply.status !== 200) { diagnostics($("nt-diagnostics"), problemsOf(reply)); return; }
    diagnostics($("nt-diagnostics"), []);
    $("new-tool").hidden = true;
    const excluded = (reply.body.notIncludedBy || []).join(", ");
    state.messages.set(body.id, {
      ok: true,
      title: `Added ${body.id}: included in no profile yet${excluded ? ` (not in ${excluded})` : ""}.`,
      lines: reply.body.notes || [],
    });
    await load();
  }

  // --- validate a call -------------------------------------------------------------------------

  async function submitCheck(event) {
    event.preventDefault();
    const reply = await api("POST", "/api/tools/check-call", {
      objective: $("cc-objective").value, tool: $("cc-tool").value,
      arguments: $("cc-arguments").value, approved: $("cc-approved").checked,
      fixtures: $("cc-fixtures").value,
      consumer: $("cc-consumer").value.trim(), environment: $("cc-environment").value.trim(),
      deployment: $("cc-deployment").value.trim(),
    });
    const box = $("check-result");
    box.hidden = false;
    const verdict = $("check-verdict");
    verdict.classList.remove("allowed", "denied");
    $("check-details").replaceChildren();
    if (reply.status !== 200) {
      verdict.textContent = "Not checked";
      diagnostics($("check-errors"), problemsOf(reply));
      return;
    }
    const report = reply.body;
    const reason = (report.decision || {}).reason;
    verdict.textContent = report.allowed ? "Allowed" : `Denied${reason ? `: ${reason}` : ""}`;
    verdict.classList.add(report.allowed ? "allowed" : "denied");
    $("check-details").append(make("dt", "", "Coordinates"), make("dd", "", scenarioText(report.coordinates)));
    for (const key of ["condition", "decision", "availability", "approval"]) {
      if (report[key] === undefined) continue;
      $("check-details").append(make("dt", "", human(key)));
      $("check-details").append(holding("dd", rendered(report[key])));
    }
    const args = report.arguments || {};
    $("check-details").append(make("dt", "", "Arguments"), make("dd", "", args.valid ? "valid" : "invalid"));
    diagnostics($("check-errors"), args.errors || []);
  }

  // --- prepare release & connect ---------------------------------------------------------------

  async function submitRelease(event) {
    event.preventDefault();
    const body = { environment: $("rl-environment").value.trim() };
    if ($("rl-registry").value.trim()) body.registry = $("rl-registry").value.trim();
    if ($("rl-bindings").value.trim()) body.bindings = $("rl-bindings").value.trim();
    const reply = await api("POST", "/api/release", body);
    if (reply.status !== 200) {
      $("release-result").hidden = true;
      diagnostics($("release-diagnostics"), problemsOf(reply));
      return;
    }
    diagnostics($("release-diagnostics"), []);
    const release = reply.body;
    $("release-result").hidden = false;
    say($("release-nothing"), `Nothing was promoted or deployed. ${release.readiness || ""}`);
    const details = $("release-details");
    details.replaceChildren();
    const shown = { digest: "Build", alreadyRegistered: "Already registered", registry: "Registry",
      bindings: "Bindings file", environment: "Environment", revision: "Revision" };
    for (const [key, label] of Object.entries(shown)) {
      details.append(make("dt", "", label), holding("dd", rendered(release[key])));
    }
    const notes = $("release-notes");
    notes.replaceChildren(...(release.notes || []).map((n) => make("li", "", n)));
    renderBindings(release.form);
    await load();
  }

  function renderBindings(form) {
    if (!form) return;
    $("binding-form").hidden = false;
    $("binding-file").textContent = `${form.file}: environment ${form.environment}, revision ${form.revision}`;
    $("binding-readiness").textContent = form.readiness || "";
    diagnostics($("binding-problems"), form.problems);
    const rows = $("binding-rows");
    rows.replaceChildren();
    for (const row of form.tools || []) rows.append(bindingRow(row));
  }

  function bindingRow(row) {
    const form = make("form", "binding-row", null, { "data-binding-tool": row.id, novalidate: "" });
    form.append(make("strong", "binding-id", row.id));
    if (row.upstream) { // bound to an upstream MCP server: edited in the file, shown read only
      const status = make("span", `status pill ${row.status === "configured" ? "good" : ""}`, row.status);
      form.append(make("span", "upstream", `upstream ${row.upstream}`), status);
      const list = make("ul", "diagnostics");
      diagnostics(list, row.diagnostics);
      form.append(list);
      return form;
    }
    const endpoint = make("input", "endpoint", null, { "aria-label": `Endpoint of ${row.id}`, spellcheck: "false" });
    endpoint.value = row.endpoint || "";
    const secret = make("input", "secret-ref", null, { "aria-label": `Secret reference of ${row.id}`, spellcheck: "false" });
    secret.value = row.secretRef || "";
    const status = make("span", `status pill ${row.status === "configured" ? "good" : ""}`, row.status);
    form.append(endpoint, secret, make("button", "button", "Save", { type: "submit" }), status);
    const list = make("ul", "diagnostics");
    diagnostics(list, row.diagnostics);
    form.append(list);
    form.addEventListener("submit", async (event) => {
      event.preventDefault();
      const reply = await api("POST", "/api/bindings", { tool: row.id, endpoint: endpoint.value, secretRef: secret.value });
      if (reply.status === 200) { renderBindings(reply.body); await load(); } else diagnostics(list, problemsOf(reply));
    });
    return form;
  }

  async function openBindings(event) {
    event.preventDefault();
    const reply = await api("POST", "/api/bindings/open", { file: $("ob-file").value });
    if (reply.status !== 200) { diagnostics($("release-diagnostics"), problemsOf(reply)); return; }
    diagnostics($("release-diagnostics"), []);
    renderBindings(reply.body);
    await load();
  }

  // --- start -----------------------------------------------------------------------------------

  function wire() {
    for (const tab of document.querySelectorAll(".tab")) tab.addEventListener("click", () => showView(tab.dataset.view));
    $("reload").addEventListener("click", load);
    $("new-tool-open").addEventListener("click", () => { $("new-tool").hidden = false; $("nt-id").focus(); });
    $("new-tool-cancel").addEventListener("click", () => { $("new-tool").hidden = true; });
    $("nt-template").addEventListener("change", () => {
      $("nt-template-hint").textContent = (state.project.templates || {})[$("nt-template").value] || "";
    });
    for (const radio of document.querySelectorAll("input[name=nt-mode]")) {
      radio.addEventListener("change", () => {
        $("nt-fields").hidden = mode() !== "fields";
        $("nt-schema-box").hidden = mode() !== "schema";
        if (mode() === "fields" && !$("nt-field-rows").children.length) addFieldRow();
      });
    }
    $("nt-add-field").addEventListener("click", () => addFieldRow());
    $("new-tool").addEventListener("submit", submitNewTool);
    $("check-form").addEventListener("submit", submitCheck);
    $("release-form").addEventListener("submit", submitRelease);
    $("open-bindings").addEventListener("submit", openBindings);
  }

  state.token = takeToken();
  wire();
  if (!state.token) { $("loading").hidden = true; $("no-token").hidden = false; } else load();
})();
