"use strict";
/* The arguments of a pending call as nested rows, from the server's `argumentsView`: an object's
   members as key and value, an array's items in order, and each leaf as the text the server
   wrote (its JSON text, every character that renders as nothing or as a blank already a visible
   \uXXXX escape, a number exactly as it will run). A string keeps its own line feeds as real
   line breaks, each marked at the end of its line (so a space before it shows), and wraps where
   it is long: the whole value is on the page, never in a box of its own that scrolls. Every text
   is set with textContent, never parsed as HTML. */

const KINDS = new Set(["string", "number", "boolean", "null"]);

function element(tag, className, text) {
  const el = document.createElement(tag);
  el.className = className;
  if (text !== undefined) el.textContent = text;
  return el;
}

/** One leaf: its text, a string's lines each in a span of its own. */
function leaf(view) {
  const text = typeof view.text === "string" ? view.text : "";
  const el = element("span", `av-leaf av-${view.kind}`);
  const lines = view.kind === "string" ? text.split("\n") : [text];
  lines.forEach((line, i) => {
    if (i > 0) {
      const mark = element("span", "av-break"); // drawn by the style sheet: no text of its own
      mark.setAttribute("aria-hidden", "true");
      el.append(mark, document.createTextNode("\n"));
    }
    el.append(element("span", "av-line", line));
  });
  return el;
}

/** The element showing `view`, or null when it is not a view this page knows. */
export function viewElement(view, depth = 0) {
  if (!view || typeof view !== "object" || depth > 200) return null;
  if (KINDS.has(view.kind)) return leaf(view);
  if (view.kind === "object" && Array.isArray(view.entries)) {
    if (view.entries.length === 0) return element("span", "av-leaf av-empty", "{}");
    const list = element("dl", "av-object");
    for (const entry of view.entries) {
      const value = viewElement(entry && entry.value, depth + 1);
      if (value === null || typeof entry.key !== "string") return null;
      const row = element("div", "av-entry");
      const key = element("dt", "av-key", entry.key);
      const holder = element("dd", "av-value");
      holder.append(value);
      row.append(key, holder);
      list.append(row);
    }
    return list;
  }
  if (view.kind === "array" && Array.isArray(view.items)) {
    if (view.items.length === 0) return element("span", "av-leaf av-empty", "[]");
    const list = element("ol", "av-array");
    list.setAttribute("start", "0");
    for (const item of view.items) {
      const value = viewElement(item, depth + 1);
      if (value === null) return null;
      const row = element("li", "av-item");
      row.append(value);
      list.append(row);
    }
    return list;
  }
  return null;
}
