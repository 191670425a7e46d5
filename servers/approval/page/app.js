"use strict";
/* The approvers' page of the seif approval server. Plain DOM, no framework, no innerHTML:
   everything that comes from the server is set with textContent. The approver token lives in
   sessionStorage only. Decisions post only {"reason"} to the pendingId's route.

   The list comes in pages (`GET /v1/pending`, then `?after=` the `next` of the page before):
   the first on sign-in, each further one when the approver scrolls near the end of what is
   shown. A refresh reads again only the pages with a call in view, and the last when it ended
   the list (new calls come last): never the whole list. */

import { escapeInvisible, hasVisible } from "./text.js";
import { viewElement } from "./view.js";

(() => {
  const TOKEN_KEY = "seif.approverToken";
  const REFRESH_MS = refreshInterval(); // from the page's URL, read once: /?refresh=MS
  const TICK_MS = 1000;
  const MAX_REASON = 500;
  const MAX_DECIDED = 50;
  const NEAR_PX = 600; // the next page loads when the end of the list is this near the view
  const NOT_ACCEPTED = "That token was not accepted. Check it and try again.";
  const SAVED_REFUSED = "Your saved token was not accepted. Sign in again.";
  const SESSION_ENDED = "Your token is no longer accepted. Sign in again.";
  const UNREACHABLE = "Cannot reach the approval server.";
  const INEXACT = "These arguments contain numbers this browser cannot show exactly; "
    + "do not approve from this page";
  const GONE = "Requester gone: the request that asked for this call has ended, and nobody can "
    + "run it any more. It cannot be approved; reject it to clear it.";
  const CLOCK = { hour: "2-digit", minute: "2-digit", second: "2-digit", timeZoneName: "short" };
  const pad = (number) => String(number).padStart(2, "0");

  const $ = (id) => document.getElementById(id);
  const ui = {
    signIn: $("sign-in"), form: $("sign-in-form"), token: $("token"),
    signInMessage: $("sign-in-message"), signOut: $("sign-out"), desk: $("desk"),
    deskTitle: $("desk-title"), refresh: $("refresh"), updated: $("updated"),
    deskMessage: $("desk-message"), empty: $("empty"), pendingList: $("pending-list"),
    decidedSection: $("decided-section"), decidedList: $("decided-list"), loading: $("loading"),
    more: $("more"), loadMore: $("load-more"), who: $("who"),
  };
  ui.submit = ui.form.querySelector("button[type=submit]");

  const state = {
    token: null, skewMs: 0, entries: new Map(), timers: [], refreshSeq: 0, refreshing: null,
    nextId: 1, pages: [], // {after, next} of each page loaded
    me: null, // {approver, name} of `GET /v1/me`
  };

  // --- small helpers -------------------------------------------------------------------------

  /** A new element; its text is always set as text (never parsed as HTML). */
  function make(tag, className, text, attributes = {}) {
    const el = document.createElement(tag);
    if (className) el.className = className;
    if (text !== undefined) el.textContent = text;
    for (const [name, value] of Object.entries(attributes)) el.setAttribute(name, value);
    return el;
  }

  function shown(value) {
    if (value === null || value === undefined || value === "") return "—";
    return typeof value === "string" ? value : JSON.stringify(value);
  }

  /** An approver id as the page names it: the signed-in approver by its name (an issuer's
   * approver's id is a fingerprint), any other by its id. */
  function approverName(id) {
    return state.me && id === state.me.approver ? state.me.name : shown(id);
  }

  /** The refresh interval in ms: `?refresh=MS` (an integer, held to 200..60000), else 5000. */
  function refreshInterval() {
    const raw = new URLSearchParams(window.location.search).get("refresh");
    if (raw === null || !/^[+-]?\d+$/.test(raw.trim())) return 5000;
    return Math.min(60000, Math.max(200, Number(raw.trim())));
  }

  /** The arguments as text, and whether that text is exactly what will run. The server's
      `argumentsText` is the exact JSON it forwards on approve; an older server sends only the
      decoded `arguments`, which this browser may not show exactly. */
  function argumentsView(call) {
    if (typeof call.argumentsText === "string") return { text: call.argumentsText, exact: true };
    const text = JSON.stringify(call.arguments, null, 2);
    if (text === undefined) return { text: "(no arguments)", exact: true };
    return { text: escapeInvisible(text), exact: !hasInexactNumber(call.arguments) };
  }

  /** An integer this browser cannot hold exactly (beyond 2^53: already rounded when parsed). */
  function hasInexactNumber(value, depth = 0) {
    if (typeof value === "number") return Number.isInteger(value) && !Number.isSafeInteger(value);
    if (value === null || typeof value !== "object") return false;
    if (depth > 200) return true; // nested too deep to check: do not vouch for it
    return Object.values(value).some((inner) => hasInexactNumber(inner, depth + 1));
  }

  function localTime(iso) {
    const moment = new Date(iso);
    if (typeof iso !== "string" || Number.isNaN(moment.getTime())) return shown(iso);
    return moment.toLocaleTimeString([], CLOCK);
  }

  function duration(ms) {
    const total = Math.ceil(ms / 1000);
    const hours = Math.floor(total / 3600);
    const minutes = Math.floor((total % 3600) / 60);
    const seconds = pad(total % 60);
    return hours > 0 ? `${hours}:${pad(minutes)}:${seconds}` : `${minutes}:${seconds}`;
  }

  function saved() {
    try { return sessionStorage.getItem(TOKEN_KEY); } catch (_) { return null; }
  }

  function keep(token) { // sessionStorage only: never localStorage, a cookie or the URL
    try {
      if (token) sessionStorage.setItem(TOKEN_KEY, token);
      else sessionStorage.removeItem(TOKEN_KEY);
    } catch (_) { /* storage refused: this page's memory only */ }
  }

  // --- the API ---------------------------------------------------------------------------------

  /** {status, body} of a same-origin request, or null when the server could not be reached. */
  async function api(method, path, body, token = state.token) {
    const headers = { Authorization: `Bearer ${token}`, Accept: "application/json" };
    const init = { method, headers, cache: "no-store", credentials: "omit", redirect: "error" };
    if (body !== undefined) {
      headers["Content-Type"] = "application/json";
      init.body = JSON.stringify(body);
    }
    let response;
    try { response = await fetch(path, init); } catch (_) { return null; }
    let data = null;
    try { data = await response.json(); } catch (_) { data = null; }
    return { status: response.status, body: data || {} };
  }

  function errorOf(reply) {
    const error = reply.body.error || {};
    const answered = `The server answered ${reply.status}.`;
    return {
      code: typeof error.code === "string" ? error.code : `HTTP_${reply.status}`,
      message: typeof error.message === "string" ? error.message : answered,
    };
  }

  // --- signing in and out ----------------------------------------------------------------------

  function say(el, text) {
    el.textContent = text;
    el.hidden = !text;
  }

  function showView(signedIn, message = "") {
    ui.loading.hidden = true;
    ui.signIn.hidden = signedIn;
    ui.desk.hidden = !signedIn;
    ui.signOut.hidden = !signedIn;
    say(ui.signInMessage, message);
    if (signedIn) {
      ui.token.value = "";
      ui.deskTitle.focus();
    } else {
      ui.token.focus();
      ui.token.select();
    }
  }

  const showSignIn = (message) => showView(false, message);

  async function signIn(token, fromStorage) {
    ui.submit.disabled = true;
    const seq = ++state.refreshSeq;
    const reply = await api("GET", "/v1/pending", undefined, token);
    ui.submit.disabled = false;
    if (reply === null) return showSignIn(`${UNREACHABLE} Try again in a moment.`);
    if (reply.status === 401) {
      keep(null);
      return showSignIn(fromStorage ? SAVED_REFUSED : NOT_ACCEPTED);
    }
    if (reply.status !== 200 || !Array.isArray(reply.body.pending)) {
      return showSignIn(errorOf(reply).message);
    }
    state.token = token;
    keep(token);
    showView(true);
    showApprover(token);
    state.pages = [{ after: null, next: null }];
    render(reply.body, seq, 0);
    state.timers.forEach(clearInterval);
    state.timers = [setInterval(refresh, REFRESH_MS), setInterval(tick, TICK_MS)];
  }

  /** Who this token signs in (`GET /v1/me`), in the bar; nothing from a server without it. */
  async function showApprover(token) {
    const reply = await api("GET", "/v1/me", undefined, token);
    if (token !== state.token) return;
    const body = reply && reply.status === 200 ? reply.body : null;
    const approver = body && typeof body.approver === "string" ? body.approver : null;
    const name = body && typeof body.name === "string" && body.name ? body.name : approver;
    state.me = approver === null ? null : { approver, name };
    say(ui.who, approver === null ? "" : `Signed in as ${name}`);
  }

  function signOut(message) {
    keep(null);
    say(ui.who, "");
    state.token = null;
    state.me = null;
    state.timers.forEach(clearInterval);
    state.timers = [];
    state.entries.clear();
    state.pages = [];
    ui.more.hidden = true;
    ui.pendingList.replaceChildren();
    ui.decidedList.replaceChildren();
    say(ui.deskMessage, "");
    ui.token.value = "";
    showSignIn(message);
  }

  // --- the list --------------------------------------------------------------------------------

  /** Read again the pages with a call in view, and the last one when it ended the list. */
  function refresh() {
    if (!state.token || state.refreshing || state.pages.length === 0) return state.refreshing;
    return busy(async () => {
      for (const index of pagesToRead()) if (!(await load(index))) break;
    });
  }

  /** The page after the last one loaded, when the list goes on. */
  function more() {
    const pages = state.pages;
    const last = pages[pages.length - 1];
    if (!state.token || state.refreshing || !last || last.next === null) return state.refreshing;
    pages.push({ after: last.next, next: null });
    return busy(async () => {
      if (!(await load(pages.length - 1))) pages.pop();
    });
  }

  /** Run `task`, one at a time; then load more if the end of the list is still near. */
  function busy(task) {
    state.refreshing = task().finally(() => {
      state.refreshing = null;
      if (!ui.more.hidden && inView(ui.more, NEAR_PX)) more();
    });
    return state.refreshing;
  }

  function pagesToRead() {
    const last = state.pages.length - 1;
    const wanted = new Set(state.pages[last].next === null ? [last] : []);
    for (const entry of state.entries.values()) {
      if (entry.el.parentNode === ui.pendingList && inView(entry.el)) wanted.add(entry.page);
    }
    if (wanted.size === 0) wanted.add(0);
    return [...wanted].sort((a, b) => a - b);
  }

  function inView(el, margin = 0) {
    const box = el.getBoundingClientRect();
    return box.bottom > -margin && box.top < window.innerHeight + margin;
  }

  /** Load the page `index` (again): whether it was read. */
  async function load(index) {
    const seq = ++state.refreshSeq;
    const { token, pages } = state;
    const after = pages[index].after;
    const path = after === null ? "/v1/pending" : `/v1/pending?after=${encodeURIComponent(after)}`;
    const reply = await api("GET", path);
    if (token !== state.token || pages !== state.pages) return false; // signed out meanwhile
    if (reply === null) {
      say(ui.deskMessage, `${UNREACHABLE} Retrying every few seconds.`);
      return false;
    }
    if (reply.status === 401) {
      signOut(SESSION_ENDED);
      return false;
    }
    if (reply.status !== 200 || !Array.isArray(reply.body.pending)) {
      say(ui.deskMessage, `Could not load the pending calls: ${errorOf(reply).message}`);
      return false;
    }
    say(ui.deskMessage, "");
    render(reply.body, seq, index);
    return true;
  }

  /** Show the page `index` as `body` lists it: its calls, and its own calls no longer listed. */
  function render(body, seq, index) {
    const now = Date.parse(body.now);
    if (Number.isFinite(now)) state.skewMs = now - Date.now();
    state.pages[index].next = typeof body.next === "string" ? body.next : null;
    const listed = new Set();
    for (const call of body.pending) {
      if (!call || typeof call.pendingId !== "string") continue;
      listed.add(call.pendingId);
      upsert(call, seq, index);
    }
    for (const entry of [...state.entries.values()]) {
      if (entry.page === index && !listed.has(entry.id)) vanished(entry);
    }
    trimDecided();
    ui.more.hidden = state.pages[state.pages.length - 1].next === null;
    ui.updated.textContent = `Updated ${localTime(new Date().toISOString())}`;
    tick();
  }

  function upsert(call, seq, page) {
    let entry = state.entries.get(call.pendingId);
    // listed by a read that began after the decision here: the same call was asked again
    if (entry && entry.final && seq > entry.finalSeq) {
      retire(entry);
      entry = undefined;
    }
    if (!entry) {
      entry = createEntry(call, page);
      state.entries.set(entry.id, entry);
      ui.pendingList.append(entry.el);
    } else if (!entry.final) {
      entry.expiresAt = Date.parse(call.expiresAt);
      markGone(entry, call.requesterGone === true);
    }
  }

  function vanished(entry) {
    if (entry.sending) return;
    if (!entry.final) {
      if (entry.expiresAt <= Date.now() + state.skewMs) {
        finish(entry, "Expired before a decision", "expired");
      } else {
        finish(entry, "No longer pending", "gone");
      }
    }
    moveToDecided(entry);
  }

  function moveToDecided(entry) {
    if (entry.el.parentNode !== ui.decidedList) {
      const focused = entry.el.contains(document.activeElement);
      ui.decidedList.prepend(entry.el);
      updateSections(); // shown before it is focused: a hidden element takes no focus
      if (focused) entry.outcome.focus({ preventScroll: true });
    }
  }

  function retire(entry) {
    moveToDecided(entry);
    entry.el.removeAttribute("data-pending-id");
    entry.el.dataset.wasPendingId = entry.id;
    state.entries.delete(entry.id);
  }

  function trimDecided() {
    while (ui.decidedList.children.length > MAX_DECIDED) {
      const oldest = ui.decidedList.lastElementChild;
      oldest.remove();
      for (const [id, entry] of state.entries) if (entry.el === oldest) state.entries.delete(id);
    }
    updateSections();
  }

  function updateSections() {
    ui.empty.hidden = ui.pendingList.children.length > 0;
    ui.decidedSection.hidden = ui.decidedList.children.length === 0;
  }

  // --- one pending call ------------------------------------------------------------------------

  function createEntry(call, page) {
    const n = state.nextId++;
    const coordinates = call.coordinates || {};
    const el = make("article", "item", undefined,
      { "data-pending-id": call.pendingId, "aria-labelledby": `tool-${n}` });
    const head = make("div", "item-head");
    const countdown = make("span", "countdown");
    head.append(make("h3", "tool", shown(call.tool), { id: `tool-${n}` }), countdown);
    const description = make("p", "tool-description", shown(call.toolDescription));
    description.hidden = typeof call.toolDescription !== "string" || call.toolDescription === "";
    const gone = make("p", "message warn gone-mark", GONE, { hidden: "" });
    const facts = factList([
      ["Application", call.application, "mono"],
      ["Objective", coordinates.objective], ["Consumer", coordinates.consumer],
      ["Environment", coordinates.environment], ["Deployment", coordinates.deployment],
      ["Call ID", call.callId, "mono"], ["Context", call.contextRef, "mono", "wide"],
      ["Denial reason", call.reason, "mono", "wide"], ["Requested", localTime(call.requestedAt)],
    ]);
    const view = argumentsView(call);
    const exactText = typeof call.argumentsText === "string";
    const argsTitle = make("h4", "args-title",
      exactText ? "Arguments (exactly what will run)" : "Arguments (as this browser reads them)");
    const tree = exactText ? viewElement(call.argumentsView) : null;
    const args = tree === null ? make("pre", "args", view.text) : make("div", "args args-view");
    if (tree !== null) args.append(tree);
    const controls = decisionControls(n);
    const outcome = make("p", "outcome", "",
      { role: "status", "aria-live": "polite", tabindex: "-1" }); // the decision's result
    el.append(head, description, gone, facts, argsTitle, args);
    if (!view.exact) el.append(make("p", "message warn args-warning", INEXACT));
    el.append(controls.el, outcome);
    const entry = {
      id: call.pendingId, el, countdown, outcome, controls: controls.el, reason: controls.reason,
      error: controls.error, buttons: [controls.approve, controls.reject],
      expiresAt: Date.parse(call.expiresAt), final: false, finalSeq: 0, sending: false,
      deciding: false, expired: false, approve: controls.approve, blocked: !view.exact, page,
      goneMark: gone, gone: false,
    };
    markGone(entry, call.requesterGone === true);
    syncButtons(entry);
    controls.approve.addEventListener("click", () => decide(entry, "approve"));
    controls.reject.addEventListener("click", () => decide(entry, "reject"));
    controls.reason.addEventListener("input", () => reasonError(entry, ""));
    return entry;
  }

  function factList(rows) {
    const list = make("dl", "facts");
    for (const [name, value, className, wide] of rows) {
      const row = make("div", wide ? "fact wide" : "fact");
      row.append(make("dt", "", name), make("dd", className || "", shown(value)));
      list.append(row);
    }
    return list;
  }

  function decisionControls(n) {
    const id = `reason-${n}`; // ids are unique per item
    const el = make("div", "decide");
    const reason = make("textarea", "reason", undefined,
      { id, rows: "2", maxlength: String(MAX_REASON), "aria-describedby": `${id}-error` });
    const error = make("p", "field-error", "", { id: `${id}-error`, role: "alert", hidden: "" });
    const actions = make("div", "actions");
    const approve = make("button", "button approve", "Approve", { type: "button" });
    const reject = make("button", "button reject", "Reject", { type: "button" });
    actions.append(approve, reject);
    el.append(make("label", "", "Reason", { for: id }), reason, error, actions);
    return { el, reason, error, approve, reject };
  }

  function reasonError(entry, text) {
    say(entry.error, text);
    entry.reason.setAttribute("aria-invalid", text ? "true" : "false");
  }

  function tell(entry, text, tone) {
    entry.outcome.textContent = text;
    entry.outcome.dataset.tone = tone;
  }

  /** Mark the call as one whose requester is gone (or no longer): then it cannot be approved. */
  function markGone(entry, gone) {
    if (entry.gone === gone) return;
    entry.gone = gone;
    entry.goneMark.hidden = !gone;
    entry.el.classList.toggle("is-gone", gone);
    syncButtons(entry);
  }

  function syncButtons(entry) {
    for (const button of entry.buttons) button.disabled = entry.sending || entry.expired;
    if (entry.blocked) entry.approve.disabled = true; // its arguments are not shown exactly
    if (entry.gone) entry.approve.disabled = true; // nobody can run it any more
    entry.reason.disabled = entry.expired;
    entry.reason.readOnly = entry.sending;
  }

  function tick() {
    const now = Date.now() + state.skewMs;
    for (const entry of state.entries.values()) if (!entry.final) showTimeLeft(entry, now);
  }

  function showTimeLeft(entry, now) {
    if (!Number.isFinite(entry.expiresAt)) {
      entry.countdown.textContent = "no expiry given";
      return;
    }
    const left = entry.expiresAt - now;
    const expired = left <= 0;
    entry.countdown.textContent = expired ? "expired" : `${duration(left)} left`;
    entry.el.classList.toggle("is-soon", !expired && left < 60000);
    if (expired !== entry.expired) {
      entry.expired = expired;
      entry.el.classList.toggle("is-expired", expired);
      syncButtons(entry);
    }
  }

  // --- deciding --------------------------------------------------------------------------------

  async function decide(entry, kind) {
    if (entry.final || entry.sending || entry.expired) return;
    if (kind === "approve" && (entry.blocked || entry.gone)) return;
    const reason = entry.reason.value.trim();
    if (!hasVisible(reason)) { // only spaces, zero-width or blank characters: no reason
      entry.reason.focus();
      return reasonError(entry, "A reason is required");
    }
    if ([...reason].length > MAX_REASON) {
      return reasonError(entry, `A reason is at most ${MAX_REASON} characters`);
    }
    reasonError(entry, "");
    const token = state.token;
    entry.sending = true;
    syncButtons(entry);
    tell(entry, kind === "approve" ? "Approving…" : "Rejecting…", "busy");
    const path = `/v1/pending/${encodeURIComponent(entry.id)}/${kind}`;
    const reply = await api("POST", path, { reason }); // only the reason: never the arguments
    entry.sending = false;
    if (token !== state.token) return undefined; // signed out meanwhile
    syncButtons(entry);
    if (reply === null) return tell(entry, `${UNREACHABLE} Try again.`, "error");
    const active = document.activeElement;
    entry.deciding = !active || active === document.body || entry.el.contains(active);
    settle(entry, kind, reply);
    entry.deciding = false;
    return undefined;
  }

  function settle(entry, kind, reply) {
    const body = reply.body;
    if (reply.status === 200 && kind === "approve") {
      const until = localTime(body.expiresAt);
      return finish(entry, `Approved by ${approverName(body.approver)}, valid until ${until}`, "approved");
    }
    if (reply.status === 200) {
      return finish(entry, `Rejected by ${approverName(body.approver)}`, "rejected");
    }
    if (reply.status === 401) return signOut(SESSION_ENDED);
    const error = errorOf(reply);
    switch (error.code) {
      case "PENDING_EXPIRED":
        return finish(entry, "Expired before a decision", "expired");
      case "ALREADY_DECIDED":
        return finish(entry, alreadyDecided(body.decided || body.error.decided), "elsewhere");
      case "PENDING_UNKNOWN":
        return finish(entry, `No longer pending: ${error.message}`, "gone");
      case "REQUESTER_GONE":
        markGone(entry, true);
        return tell(entry, `Not approved: ${error.message}`, "error");
      case "REASON_REQUIRED":
      case "REASON_TOO_LONG":
        tell(entry, "", "");
        return reasonError(entry, error.message);
      default:
        return tell(entry, `Not decided: ${error.message}`, "error");
    }
  }

  function alreadyDecided(decided) {
    const what = { APPROVED: "approved", REJECTED: "rejected" }[decided && decided.state];
    const who = decided && typeof decided.approver === "string"
      ? ` by ${approverName(decided.approver)}` : "";
    if (!what && !who) return "Already decided by someone else";
    return `Already decided by someone else: ${what || "decided"}${who}`;
  }

  function finish(entry, text, tone) {
    const focused = entry.deciding || entry.el.contains(document.activeElement);
    entry.final = true;
    entry.finalSeq = state.refreshSeq;
    entry.el.dataset.state = tone;
    entry.el.classList.add("is-final");
    entry.controls.remove();
    entry.countdown.hidden = true;
    tell(entry, text, tone);
    if (focused) entry.outcome.focus({ preventScroll: true });
  }

  // --- start -----------------------------------------------------------------------------------

  function submitted(event) {
    event.preventDefault();
    const token = ui.token.value.trim();
    if (!token) return showSignIn("Enter your approver token.");
    if (!/^[\x21-\x7e]+$/.test(token)) return showSignIn(NOT_ACCEPTED);
    return signIn(token, false);
  }

  function boot() {
    ui.form.addEventListener("submit", submitted);
    ui.signOut.addEventListener("click", () => signOut(""));
    ui.refresh.addEventListener("click", refresh);
    ui.loadMore.addEventListener("click", more);
    new IntersectionObserver((seen) => { // near the end of the list: its next page
      if (seen.some((one) => one.isIntersecting)) more();
    }, { rootMargin: `${NEAR_PX}px 0px` }).observe(ui.more);
    document.addEventListener("visibilitychange", () => {
      if (document.visibilityState === "visible") refresh();
    });
    const token = saved();
    if (token) signIn(token, true);
    else showSignIn("");
  }

  boot();
})();
