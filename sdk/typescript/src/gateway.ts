/**
 * `new ContextDeliveryGateway(client).forwardAgent(request, agent)`: for an existing composer
 * that takes `(messages, tools)` (`seif/sdk/gateway.py`).
 *
 * The gateway runs one agent turn: it resolves, hands the agent the complete canonical context
 * (every message, in order, unchanged) and the exact schemas as tools it can call
 * (`await tool(callId, args)` executes through the turn and returns the receipt), and returns
 * the {@link Delivery}.
 */

import { RuntimeClient } from "./client.js";
import type { Receipt } from "./receipts.js";
import type { Delivery, Turn, TurnExecuteOptions, TurnRequest } from "./turns.js";
import type { Message, ObjectSchema } from "./values.js";

/** One disclosed tool as the gateway hands it to an agent: the exact schema, and a call that
 * executes it through the turn (`await tool(callId, args)` returns a receipt). */
export interface BoundTool {
  (callId: string, args: unknown, options?: TurnExecuteOptions): Promise<Receipt>;
  readonly name: string;
  readonly description: string;
  readonly parameters: ObjectSchema;
}

export type Agent<T> = (
  messages: readonly Message[],
  tools: readonly BoundTool[],
) => T | Promise<T>;

/** The turn's tools, each a function with the schema's `name`, `description` and
 * `parameters`. */
export function boundTools(turn: Turn): readonly BoundTool[] {
  return Object.freeze(
    turn.tools.map((schema) => {
      const call = (
        callId: string,
        args: unknown,
        options?: TurnExecuteOptions,
      ): Promise<Receipt> => turn.execute(schema.name, callId, args, options);
      Object.defineProperties(call, {
        name: { value: schema.name, enumerable: true },
        description: { value: schema.description, enumerable: true },
        parameters: { value: schema.parameters, enumerable: true },
      });
      return Object.freeze(call) as BoundTool;
    }),
  );
}

export class ContextDeliveryGateway {
  readonly client: RuntimeClient;

  constructor(client: RuntimeClient) {
    if (!(client instanceof RuntimeClient)) {
      throw new TypeError("ContextDeliveryGateway takes a RuntimeClient");
    }
    this.client = client;
  }

  /** Run one turn for `agent(messages, tools)` and return the {@link Delivery}. */
  async forwardAgent<T>(request: TurnRequest, agent: Agent<T>): Promise<Delivery<T>> {
    return this.client.runAgentTurn(request, (turn) => agent(turn.messages, boundTools(turn)));
  }
}
