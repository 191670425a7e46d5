/** The runtime's error answers as typed errors: the class of each status and code, with the
 * HTTP status, the API's code and message, and the body's other fields. */

import assert from "node:assert/strict";
import { describe, it } from "node:test";

import {
  AuthenticationError,
  BadRequestError,
  ConflictError,
  NotFoundError,
  PermissionDeniedError,
  ResolutionBlockedError,
  RuntimeClient,
  SeifError,
  SeifRequestError,
  ServerError,
  TurnRequiredError,
} from "@seif/sdk";

import { TOKEN, withServer, type Action } from "./server.js";

type ErrorClass = abstract new (...args: never[]) => SeifRequestError;

function answer(status: number, code: string, extra: object = {}): Action {
  return [status, { error: { code, message: `the ${code} message` }, ...extra }];
}

describe("request errors", () => {
  const cases: [Action, ErrorClass, number, string][] = [
    [answer(400, "OBJECTIVE_UNKNOWN"), BadRequestError, 400, "OBJECTIVE_UNKNOWN"],
    [answer(401, "UNAUTHENTICATED"), AuthenticationError, 401, "UNAUTHENTICATED"],
    [answer(403, "FORBIDDEN"), PermissionDeniedError, 403, "FORBIDDEN"],
    [answer(403, "OBJECTIVE_FORBIDDEN"), PermissionDeniedError, 403, "OBJECTIVE_FORBIDDEN"],
    [answer(403, "TURN_REQUIRED"), TurnRequiredError, 403, "TURN_REQUIRED"],
    [answer(404, "CONTEXT_UNKNOWN"), NotFoundError, 404, "CONTEXT_UNKNOWN"],
    [answer(409, "TURN_COMPLETED"), ConflictError, 409, "TURN_COMPLETED"],
    [answer(413, "BODY_TOO_LARGE"), SeifRequestError, 413, "BODY_TOO_LARGE"],
    [answer(503, "NOT_READY"), ServerError, 503, "NOT_READY"],
    [[502, "<html>bad gateway</html>"], ServerError, 502, "HTTP_502"],
  ];
  for (const [action, ErrorClass, status, code] of cases) {
    it(`${status} ${code} is a ${ErrorClass.name}`, async () => {
      await withServer(
        () => action,
        async (server) => {
          const sdk = new RuntimeClient({ baseUrl: server.url, token: TOKEN });
          await assert.rejects(sdk.startTurn(), (error: unknown) => {
            assert.ok(
              error instanceof ErrorClass &&
                error instanceof SeifRequestError &&
                error instanceof SeifError,
            );
            assert.equal(error.name, ErrorClass.name);
            assert.deepEqual([error.status, error.code], [status, code]);
            const expected = code.startsWith("HTTP_") ? "Bad Gateway" : `the ${code} message`;
            assert.equal(error.message, expected);
            assert.equal(String(error), `${ErrorClass.name}: ${status} ${code}: ${expected}`);
            assert.ok(!String(error).includes(TOKEN) && !(error.stack ?? "").includes(TOKEN));
            return true;
          });
        },
      );
    });
  }

  it("409 RESOLUTION_BLOCKED carries its causes and the body's other fields, frozen", async () => {
    const causes = [
      { id: "inspect-context", kind: "tool", reason: "UNAVAILABLE", explanation: {} },
    ];
    await withServer(
      () => answer(409, "RESOLUTION_BLOCKED", { causes, omitted: [] }),
      async (server) => {
        const sdk = new RuntimeClient({ baseUrl: server.url, token: TOKEN });
        await assert.rejects(sdk.resolve("learner"), (error: unknown) => {
          assert.ok(error instanceof ResolutionBlockedError && error instanceof ConflictError);
          assert.deepEqual(error.causes, causes);
          assert.deepEqual(error.omitted, []);
          assert.equal(error.extra["causes"], error.causes);
          assert.ok(Object.isFrozen(error.extra) && Object.isFrozen(error.causes));
          return true;
        });
      },
    );
  });

  it("a malformed argument throws before anything is sent", async () => {
    await withServer(
      () => [200, {}],
      async (server) => {
        const sdk = new RuntimeClient({ baseUrl: server.url, token: TOKEN });
        await assert.rejects(sdk.completeTurn("turn_1", "DONE" as "COMPLETED"), {
          name: "RangeError",
          message: /COMPLETED/,
        });
        await assert.rejects(
          sdk.reportDisclosure("ctx_1", "inspect_context" as unknown as string[]),
          /list of function names/,
        );
        await assert.rejects(sdk.approvalStatus("", "c1"), /non-empty string/);
        assert.equal(server.requests.length, 0);
      },
    );
    assert.throws(
      () => new RuntimeClient({ baseUrl: "ftp://x", token: TOKEN }),
      /http:\/\/ or https:\/\//,
    );
    assert.throws(() => new RuntimeClient({ baseUrl: "http://x", token: "" }), /token/);
    assert.throws(
      () => new RuntimeClient({ baseUrl: "http://x", token: TOKEN, timeoutMs: 0 }),
      RangeError,
    );
    assert.equal(
      String(new RuntimeClient({ baseUrl: "http://x/", token: TOKEN })),
      "RuntimeClient(http://x)",
    );
  });
});
