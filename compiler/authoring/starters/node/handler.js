'use strict';
/**
 * The business action of this tool: the one function to implement (see README.md).
 *
 * `handle(args, call)` runs once per `idempotencyKey` (`server.js` answers a repeated key from
 * the store without calling it again). When it is called, the protocol has been checked: the
 * call is for this tool's exact contract (`contract.json`), and `args` satisfy the tool's
 * argument schema (plain objects; an integer beyond Number.MAX_SAFE_INTEGER arrives as a
 * BigInt). Return the output (it must satisfy the tool's result schema, or the executor answers
 * `RESULT_INVALID`), or throw a `Failure` to answer `ok: false`.
 *
 * Authorize from your backend's own state, never from the arguments: the model chose them, and
 * a record id, a user id or a role in the arguments is not a permission. `call.coordinates` say
 * which application context the runtime resolved (consumer, objective, environment,
 * deployment), which the runtime, not the model, decided.
 *
 * `call` is {callId, idempotencyKey, coordinates, tool}: `idempotencyKey` is
 * sha256(build digest | contextRef | callId), derived by the runtime, never by the model (use it
 * as the idempotency key of the action in your backend too); `coordinates` has build, consumer,
 * objective, environment, deployment, trace and context; `tool` is the contract
 * (`contract.json`).
 */

/** An `ok: false` answer: a short code (`[A-Za-z0-9_.:-]{1,64}`, which the runtime keeps in the
 * receipt as `executorError`) and a message (which the runtime never keeps). */
class Failure extends Error {
  constructor(code, message) {
    super(message);
    this.code = code;
  }
}

/**
 * Do the tool's action for `args` and return its output.
 *
 * Placeholder: every call answers `ok: false` with `NOT_IMPLEMENTED` until this is written.
 * Replace the `throw` with the action (and delete this paragraph).
 */
async function handle(args, call) {
  throw new Failure(
    'NOT_IMPLEMENTED',
    `the business handler of ${call.tool.id} is not implemented yet (handler.js)`,
  );
}

module.exports = { handle, Failure };
