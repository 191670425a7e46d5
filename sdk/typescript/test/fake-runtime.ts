/**
 * A small stand-in for the runtime's routes a turn uses (turns, resolve, execute, disclosures,
 * completion), for the bookkeeping tests of `runAgentTurn`. The real runtime is driven from
 * Node by the Python suite (`tests/sdk/test_sdk_typescript.py`).
 */

import { receipt, type Action, type Recorded } from "./server.js";

export const SCHEMAS = [
  {
    name: "inspect_context",
    description: "Read one lesson.",
    parameters: { type: "object", properties: { ref: { type: "string" } }, required: ["ref"] },
  },
  {
    name: "propose_change",
    description: "Propose a change to a lesson.",
    parameters: { type: "object", properties: { summary: { type: "string" } } },
  },
];

export function resolveAnswer(contextRef = "ctx_1"): Record<string, unknown> {
  return {
    contextRef,
    build: "blake3:00",
    objective: "authoring",
    expiresAt: "2026-01-01T00:15:00.000Z",
    messages: [
      { id: "role", role: "system", text: "You review lessons." },
      { id: "rules", role: "developer", text: "Cite the lesson." },
    ],
    tools: SCHEMAS,
    contracts: [
      contract("inspect-context", "inspect_context", "read"),
      contract("propose-change", "propose_change", "write"),
    ],
    omitted: [
      { id: "search-knowledge", kind: "tool", reason: "EXCLUDED", explanation: { by: "rule" } },
    ],
    tokens: { messages: 10, tools: 20, total: 30, ceiling: 100, estimated: true },
  };
}

function contract(id: string, name: string, effect: string): Record<string, unknown> {
  return {
    id,
    name,
    version: "1.0.0",
    contractDigest: `sha256:${id}`,
    effect,
    approval: effect === "write" ? "required" : "none",
    maxCalls: 5,
  };
}

/** How the fake runtime answers: the status of a route that should fail, and delays per call
 * id (to make calls finish out of order). */
export interface Script {
  failDisclosures?: number;
  failComplete?: number;
  delays?: Record<string, number>;
  /** The approval states each call id answers in turn (the last one repeating). */
  approvals?: Record<string, string[]>;
}

function field(request: Recorded, name: string): unknown {
  const body = request.body;
  return typeof body === "object" && body !== null
    ? (body as Record<string, unknown>)[name]
    : undefined;
}

function error(status: number, code: string): Action {
  return [status, { error: { code, message: `scripted ${code}` } }];
}

async function execute(request: Recorded, script: Script): Promise<Action> {
  const callId = String(field(request, "callId"));
  await new Promise((resolve) => setTimeout(resolve, script.delays?.[callId] ?? 0));
  if (field(request, "tool") === "propose-change") {
    return [
      200,
      receipt(callId, "DENIED", {
        tool: "propose-change",
        reason: "APPROVAL_REQUIRED",
        decision: { outcome: "DENY" },
      }),
    ];
  }
  return [200, receipt(callId, "SUCCEEDED", { tool: String(field(request, "tool")) })];
}

function approval(callId: string, script: Script): Action {
  const states = script.approvals?.[callId] ?? ["NONE"];
  const state = states.length > 1 ? (states.shift() as string) : (states[0] as string);
  if (state !== "APPROVED") return [200, { state }];
  return [200, { state, approvalId: `apr_${callId}`, expiresAt: "2026-01-01T00:10:00.000Z" }];
}

/** The `respond` of a {@link FakeServer} playing the runtime. */
export function fakeRuntime(script: Script = {}): (request: Recorded) => Action | Promise<Action> {
  return (request) => {
    const route = `${request.method} ${request.path}`;
    if (route === "POST /v1/turns")
      return [201, { turnId: "turn_1", expiresAt: "2026-01-01T00:15:00.000Z" }];
    if (route === "POST /v1/context/resolve") {
      return field(request, "objective") === "nope"
        ? error(400, "OBJECTIVE_UNKNOWN")
        : [200, resolveAnswer()];
    }
    if (route === "POST /v1/context/tools/execute") return execute(request, script);
    const asked = /^GET \/v1\/context\/tools\/approvals\/ctx_1\/([^/]+)$/.exec(route);
    if (asked) return approval(decodeURIComponent(asked[1] ?? ""), script);
    if (route === "POST /v1/context/disclosures") {
      return script.failDisclosures
        ? error(script.failDisclosures, "SCRIPTED")
        : [202, { accepted: true }];
    }
    if (route === "POST /v1/turns/turn_1/complete") {
      return script.failComplete
        ? error(script.failComplete, "SCRIPTED")
        : [200, { turnId: "turn_1" }];
    }
    return error(404, "NOT_FOUND");
  };
}

/** The routes a server saw, in order (`METHOD path`). */
export function routes(requests: readonly Recorded[]): string[] {
  return requests.map((r) => `${r.method} ${r.path}`);
}
