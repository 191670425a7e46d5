/** `runAgentTurn` and the gateway against a stand-in runtime: the requests of a turn in order,
 * the Delivery, receipts in call order, reporting failures listed (never thrown over a
 * result), a handler that throws (the turn FAILED, the same error rethrown). */

import assert from "node:assert/strict";
import { describe, it } from "node:test";

import {
  BadRequestError,
  ContextDeliveryGateway,
  ReportingError,
  RuntimeClient,
  ServerError,
  type Delivery,
} from "@seif/sdk";

import { fakeRuntime, routes, type Script } from "./fake-runtime.js";
import { FakeServer, TOKEN, withServer } from "./server.js";

const AUTHORING = { objective: "authoring", consumer: "course-authoring" };
const ALL = ["inspect_context", "propose_change"];

async function onRuntime<T>(
  script: Script,
  body: (sdk: RuntimeClient, server: FakeServer) => Promise<T>,
): Promise<T> {
  return withServer(fakeRuntime(script), (server) =>
    body(new RuntimeClient({ baseUrl: server.url, token: TOKEN }), server),
  );
}

function bodies(server: FakeServer, route: string): unknown[] {
  return server.requests.filter((r) => `${r.method} ${r.path}` === route).map((r) => r.body);
}

describe("runAgentTurn", () => {
  it("starts, resolves with the turn, executes, reports every name and completes", async () => {
    await onRuntime({}, async (sdk, server) => {
      const delivery = await sdk.runAgentTurn(
        AUTHORING,
        async ({ messages, tools, context, execute }) => {
          assert.deepEqual(messages, context.messages);
          assert.equal(tools, context.tools);
          const read = await execute("inspect_context", "r1", { ref: "a" });
          const write = await execute("propose_change", "w1", { summary: "s" });
          return `${read.status} ${write.reason}`;
        },
      );
      assert.deepEqual(routes(server.requests), [
        "POST /v1/turns",
        "POST /v1/context/resolve",
        "POST /v1/context/tools/execute",
        "POST /v1/context/tools/execute",
        "POST /v1/context/disclosures",
        "POST /v1/turns/turn_1/complete",
      ]);
      assert.deepEqual(bodies(server, "POST /v1/context/resolve"), [
        { ...AUTHORING, turnId: "turn_1" },
      ]);
      assert.deepEqual(
        bodies(server, "POST /v1/context/tools/execute").map(
          (b) => b as { tool: string; turnId: string },
        ),
        [
          {
            contextRef: "ctx_1",
            tool: "inspect-context",
            callId: "r1",
            arguments: { ref: "a" },
            turnId: "turn_1",
          },
          {
            contextRef: "ctx_1",
            tool: "propose-change",
            callId: "w1",
            arguments: { summary: "s" },
            turnId: "turn_1",
          },
        ],
      );
      assert.deepEqual(bodies(server, "POST /v1/context/disclosures"), [
        { contextRef: "ctx_1", tools: ALL, turnId: "turn_1" },
      ]);
      assert.deepEqual(bodies(server, "POST /v1/turns/turn_1/complete"), [
        { outcome: "COMPLETED" },
      ]);
      assert.equal(delivery.result, "SUCCEEDED APPROVAL_REQUIRED");
      assert.deepEqual(
        [delivery.contextRef, delivery.turnId, delivery.reported],
        ["ctx_1", "turn_1", ALL],
      );
      assert.deepEqual(
        delivery.receipts.map((r) => [r.callId, r.status]),
        [
          ["r1", "SUCCEEDED"],
          ["w1", "DENIED"],
        ],
      );
      assert.deepEqual(delivery.reportingErrors, []);
      assert.ok(Object.isFrozen(delivery) && Object.isFrozen(delivery.receipts));
    });
  });

  it("keeps receipts in the order the calls were made, whatever order they finish in", async () => {
    await onRuntime({ delays: { slow: 150 } }, async (sdk) => {
      const delivery = await sdk.runAgentTurn(AUTHORING, async (turn) => {
        const calls = [
          turn.execute("inspect_context", "slow", { ref: "a" }),
          turn.execute("inspect_context", "fast", { ref: "b" }),
        ];
        await calls[1];
        assert.deepEqual(
          turn.receipts.map((r) => r.callId),
          ["fast"],
        ); // so far
        await Promise.all(calls);
        return turn.receipts.length;
      });
      assert.deepEqual(
        delivery.receipts.map((r) => r.callId),
        ["slow", "fast"],
      );
      assert.equal(delivery.result, 2);
    });
  });

  it("reports the narrower set the handler bound", async () => {
    await onRuntime({}, async (sdk, server) => {
      const delivery = await sdk.runAgentTurn(AUTHORING, ({ reportDisclosure }) => {
        reportDisclosure(["inspect_context"]);
        return "plain value";
      });
      assert.deepEqual(delivery.reported, ["inspect_context"]);
      assert.deepEqual(bodies(server, "POST /v1/context/disclosures"), [
        { contextRef: "ctx_1", tools: ["inspect_context"], turnId: "turn_1" },
      ]);
    });
  });

  it("lists a failure to report or to complete, and keeps the result", async () => {
    await onRuntime({ failDisclosures: 500, failComplete: 409 }, async (sdk) => {
      const delivery: Delivery<string> = await sdk.runAgentTurn(AUTHORING, async ({ execute }) => {
        await execute("inspect_context", "r1", { ref: "a" });
        return "kept";
      });
      assert.equal(delivery.result, "kept");
      assert.deepEqual(
        delivery.receipts.map((r) => r.status),
        ["SUCCEEDED"],
      );
      assert.deepEqual(
        delivery.reportingErrors.map((e) => e.step),
        ["reportDisclosure", "completeTurn"],
      );
      assert.ok(delivery.reportingErrors[0]?.error instanceof ServerError);
      assert.match(
        String(delivery.reportingErrors[0]),
        /^reportDisclosure: ServerError: 500 SCRIPTED/,
      );
      assert.equal(delivery.reported, null);
    });
  });

  it("completes the turn FAILED when the handler throws, and rethrows the same error", async () => {
    await onRuntime({}, async (sdk, server) => {
      const crash = new Error("the model went away");
      await assert.rejects(
        sdk.runAgentTurn(AUTHORING, async ({ execute, reportDisclosure }) => {
          reportDisclosure(["inspect_context"]);
          await execute("inspect_context", "r1", { ref: "a" });
          throw crash;
        }),
        (error) => error === crash,
      );
      // reporting went fine: nothing attached
      assert.equal(Object.getOwnPropertyDescriptor(crash, "seifReportingErrors"), undefined);
      assert.deepEqual(bodies(server, "POST /v1/context/disclosures"), [
        { contextRef: "ctx_1", tools: ["inspect_context"], turnId: "turn_1" },
      ]);
      assert.deepEqual(bodies(server, "POST /v1/turns/turn_1/complete"), [{ outcome: "FAILED" }]);
    });
    await onRuntime({ failComplete: 500 }, async (sdk, server) => {
      const crash = new Error("again");
      await assert.rejects(
        sdk.runAgentTurn(AUTHORING, () => {
          throw crash; // without saying what it bound: nothing is reported
        }),
        (error) => error === crash,
      );
      assert.deepEqual(bodies(server, "POST /v1/context/disclosures"), []);
      const noted = (crash as Error & { seifReportingErrors?: ReportingError[] })
        .seifReportingErrors;
      assert.deepEqual(
        noted?.map((e) => e.step),
        ["completeTurn"],
      );
      assert.ok(!Object.keys(crash).includes("seifReportingErrors"));
    });
  });

  it("a failed resolve completes the turn FAILED and throws; the handler never runs", async () => {
    await onRuntime({}, async (sdk, server) => {
      let ran = false;
      await assert.rejects(
        sdk.runAgentTurn({ objective: "nope" }, () => {
          ran = true;
        }),
        (error: unknown) => error instanceof BadRequestError && error.code === "OBJECTIVE_UNKNOWN",
      );
      assert.equal(ran, false);
      assert.deepEqual(bodies(server, "POST /v1/turns/turn_1/complete"), [{ outcome: "FAILED" }]);
    });
  });

  it("refuses a malformed request or an undisclosed function before sending", async () => {
    await onRuntime({}, async (sdk, server) => {
      const handler = (): string => "never";
      await assert.rejects(
        sdk.runAgentTurn({ objective: "authoring", traceid: "t" } as never, handler),
        {
          name: "TypeError",
          message: /unknown keys traceid/,
        },
      );
      await assert.rejects(sdk.runAgentTurn({ objective: "" }, handler), /needs an `objective`/);
      assert.equal(server.requests.length, 0);
      const delivery = await sdk.runAgentTurn(AUTHORING, async ({ execute }) => {
        await assert.rejects(execute("search_knowledge", "s1", {}), {
          name: "RangeError",
          message: /it discloses: `inspect_context`/,
        });
        return "done";
      });
      assert.deepEqual(delivery.receipts, []);
      assert.equal(bodies(server, "POST /v1/context/tools/execute").length, 0);
    });
  });
});

describe("ContextDeliveryGateway", () => {
  it("hands the agent every message and the exact schemas as tools it can call", async () => {
    await onRuntime({}, async (sdk, server) => {
      const gateway = new ContextDeliveryGateway(sdk);
      const delivery = await gateway.forwardAgent(AUTHORING, async (messages, tools) => {
        assert.deepEqual(
          messages.map((m) => m.id),
          ["role", "rules"],
        );
        assert.deepEqual(
          tools.map((t) => [t.name, t.description]),
          [
            ["inspect_context", "Read one lesson."],
            ["propose_change", "Propose a change to a lesson."],
          ],
        );
        assert.equal(tools[0]?.parameters.type, "object");
        const receipt = await tools[0]?.("g1", { ref: "a" });
        return `${tools[0]?.name}: ${receipt?.status}`;
      });
      assert.equal(delivery.result, "inspect_context: SUCCEEDED");
      assert.deepEqual(
        delivery.receipts.map((r) => r.callId),
        ["g1"],
      );
      assert.deepEqual(bodies(server, "POST /v1/turns/turn_1/complete"), [
        { outcome: "COMPLETED" },
      ]);
    });
    assert.throws(() => new ContextDeliveryGateway({} as RuntimeClient), /takes a RuntimeClient/);
  });
});

describe("turn.waitForApproval", () => {
  it("reads the approvals of the turn's context, polling until an approver decided", async () => {
    const script = { approvals: { w1: ["PENDING", "PENDING", "APPROVED"], w2: ["REJECTED"] } };
    await onRuntime(script, async (sdk, server) => {
      const delivery = await sdk.runAgentTurn(AUTHORING, async (turn) => {
        const held = await turn.execute("propose_change", "w1", { summary: "s" });
        assert.equal(held.needsApproval, true);
        assert.equal((await turn.approvalStatus("w1")).state, "PENDING");
        const status = await turn.waitForApproval("w1", { timeoutMs: 5000, intervalMs: 5 });
        assert.equal(status.approvalId, "apr_w1");
        const rejected = await turn.waitForApproval("w2", { timeoutMs: 0 });
        return [status.state, status.contextRef, rejected.state];
      });
      assert.deepEqual(delivery.result, ["APPROVED", "ctx_1", "REJECTED"]);
      const asked = routes(server.requests).filter((r) => r.startsWith("GET "));
      assert.deepEqual(asked, [
        "GET /v1/context/tools/approvals/ctx_1/w1",
        "GET /v1/context/tools/approvals/ctx_1/w1",
        "GET /v1/context/tools/approvals/ctx_1/w1",
        "GET /v1/context/tools/approvals/ctx_1/w2",
      ]);
    });
  });
});
