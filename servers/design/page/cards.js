"use strict";
/* The Design workstation's DOM helpers and the three sections of a tool's card (the report of
   `seif tool show`): the affected audience, the scenario protection and the environment
   connection. Everything is set as text; nothing is parsed as HTML. */

/** A new element; its text is always set as text (never parsed as HTML). */
export function make(tag, className, text, attributes = {}) {
  const el = document.createElement(tag);
  if (className) el.className = className;
  if (text !== undefined && text !== null) el.textContent = String(text);
  for (const [name, value] of Object.entries(attributes)) el.setAttribute(name, value);
  return el;
}

export const human = (key) => key.replace(/([a-z0-9])([A-Z])/g, "$1 $2").replace(/[-_]/g, " ")
  .replace(/^./, (c) => c.toUpperCase());

/** A new element holding `child`. */
export function holding(tag, child, className = "") {
  const el = make(tag, className);
  el.append(child);
  return el;
}

/** Any JSON value as DOM: objects as definition lists, arrays as lists, scalars as text. */
export function rendered(value, depth = 0) {
  if (value === null || value === undefined || value === "") return make("span", "muted", "—");
  if (typeof value === "boolean") return make("span", "", value ? "yes" : "no");
  if (typeof value !== "object") return make("span", "", String(value));
  if (depth > 8) return make("code", "", JSON.stringify(value));
  if (Array.isArray(value)) {
    if (value.length === 0) return make("span", "muted", "none");
    const list = make("ul", "values");
    for (const item of value) list.append(holding("li", rendered(item, depth + 1)));
    return list;
  }
  const dl = make("dl", "details");
  for (const [key, inner] of Object.entries(value)) {
    dl.append(make("dt", "", human(key)));
    dl.append(holding("dd", rendered(inner, depth + 1)));
  }
  return dl;
}

/** Where a diagnostic points: its JSON pointer, or its line:column. */
export const where = (d) => (d.pointer !== undefined && d.pointer !== null) ? (d.pointer || "/")
  : (d.line !== undefined && d.line !== null) ? `${d.line}:${d.column}` : "";

/** Diagnostics as list items, each at its pointer or line:column. */
export function diagnostics(list, items) {
  list.replaceChildren();
  for (const d of items || []) {
    const at = where(d);
    const li = make("li", d.severity === "warning" ? "diagnostic warning" : "diagnostic", null,
      { "data-pointer": at });
    if (at) li.append(make("code", "where", at));
    li.append(make("strong", "code", d.code || d.keyword || "ERROR"));
    li.append(make("span", "text", d.message || ""));
    list.append(li);
  }
  list.hidden = list.children.length === 0;
}

export function options(select, values, labels = {}) {
  const kept = select.value;
  select.replaceChildren(...values.map((v) => make("option", "", labels[v] || v, { value: v })));
  if (values.includes(kept)) select.value = kept;
}

function line(label, values) {
  const p = make("p", "line");
  p.append(make("span", "label", `${label}: `));
  p.append(values.length ? make("span", "", values.join(", ")) : make("span", "muted", "none"));
  return p;
}

/** A scenario's coordinates as `seif tool show` writes them: `environment production, consumer
    trial`, or `no coordinates`. */
export const scenarioText = (coordinates) =>
  Object.entries(coordinates || {}).map(([k, v]) => `${k} ${v}`).join(", ") || "no coordinates";

const seen = (x) => x.disclosed ? "disclosed" : `not disclosed${x.reason ? ` (${x.reason})` : ""}`;

function audience(report) {
  const box = make("div", "");
  box.append(line("Included by", report.includedBy || []), line("Required by", report.requiredBy || []),
    line("Excluded by", report.excludedBy || []), line("No rule in", report.noRule || []));
  const list = make("ul", "rows");
  for (const o of report.objectives || []) {
    const li = make("li", o.disclosed ? "row yes" : "row no", null, { "data-objective": o.objective });
    li.append(make("strong", "", o.objective), make("span", "muted", ` (profile ${o.profile}, ${o.rule}): `));
    li.append(make("span", "", seen(o)));
    const others = (o.scenarios || []).slice(1);
    if (others.length) {
      const nested = make("ul", "rows scenarios");
      for (const s of others) {
        nested.append(make("li", s.disclosed ? "row yes" : "row no", `at ${scenarioText(s.coordinates)}: ${seen(s)}`,
          { "data-scenario": scenarioText(s.coordinates) }));
      }
      li.append(nested);
    }
    if (o.tooManyScenarios) li.append(make("p", "hint warn", o.tooManyScenarios));
    list.append(li);
  }
  box.append(list);
  return box;
}

function protection(report) {
  const box = make("div", "");
  const tests = report.tests || [];
  const guards = tests.filter((t) => t.guard);
  box.append(line("Guards", guards.map((t) => `${t.id}${t.passed ? "" : " (failing)"}`)));
  box.append(line("Other tests naming it", tests.filter((t) => !t.guard).map((t) => t.id)));
  const open = report.unguardedObjectives || [];
  const gap = line("Objectives no guard covers", open);
  if (open.length) gap.classList.add("warn");
  box.append(gap);
  const bare = (report.unguardedScenarios || []).filter((x) => !open.includes(x.objective));
  if (bare.length) {
    const scenarios = line("Scenarios no guard covers",
      bare.map((x) => `${x.objective} at ${scenarioText(x.coordinates)}`));
    scenarios.classList.add("warn");
    box.append(scenarios);
  }
  if ((report.failing || []).length) box.append(line("Failing", report.failing));
  return box;
}

function connection(report) {
  const box = make("div", "");
  const label = !report.state || report.state === "unknown" ? "no bindings file" : report.state;
  const state = make("span", `pill ${report.state === "configured" ? "good" : ""}`, label);
  const head = make("p", "line");
  head.append(state);
  if (report.environment) head.append(make("span", "muted", ` ${report.environment}, revision ${report.revision}`));
  box.append(head);
  if (report.upstream) box.append(line("Upstream", [report.upstream, report.url || report.command].filter(Boolean)));
  if (report.endpoint) box.append(line("Endpoint", [report.endpoint]));
  if (report.secretRef) box.append(line("Secret", [report.secretRef]));
  const note = report.state === "unknown"
    ? "No bindings file yet: Prepare release & connect writes one." : report.note;
  if (note) box.append(make("p", "hint", note));
  return box;
}

const SECTIONS = [
  ["audience", "Affected audience", audience],
  ["protection", "Scenario protection", protection],
  ["connection", "Environment connection", connection],
];

function contract(tool, description) {
  const box = make("div", "contract");
  if (description) box.append(make("p", "description", description));
  const args = (tool.arguments || []).map((a) => `${a.name}: ${a.type || "any"}${a.required ? " (required)" : ""}`);
  box.append(line("Arguments", args));
  if (tool.contractDigest) box.append(make("p", "digest muted", tool.contractDigest));
  return box;
}

/** A tool's card: its contract and the three sections, each on its own. */
export function cardBody(card) {
  const tool = card.tool || {};
  const head = make("header", "card-head");
  head.append(make("h3", "", card.id));
  if (tool.name) head.append(make("code", "muted", tool.name));
  for (const key of ["version", "effect", "approval"]) {
    if (tool[key] !== undefined) head.append(make("span", `pill ${key}`, `${key} ${tool[key]}`));
  }
  const parts = [head, contract(tool, card.description || tool.description)];
  if (card.diagnostics) {
    const list = make("ul", "diagnostics");
    diagnostics(list, card.diagnostics);
    parts.push(list);
  }
  const sections = make("div", "sections");
  for (const [key, title, render] of SECTIONS) {
    if (!(key in card)) continue;
    const section = make("section", `section ${key}`, null, { "data-section": key });
    section.append(make("h4", "", title));
    try { section.append(render(card[key])); } catch (_) { section.append(rendered(card[key])); }
    sections.append(section);
  }
  parts.push(sections);
  return parts;
}
