"""A new Python process resuming an OpenAI Agents run that a write interrupted in another one:
``python -m tests.support.agents_resume SAVED`` (``SEIF_URL``, ``SEIF_APP_TOKEN`` in the
environment). ``SAVED`` is a JSON file of ``{"context": Context.to_wire(), "state":
RunState.to_string(), "script": [the model's answers after the resume]}``, written by the
interrupted process. It resumes a turn on that context, reads seif's decisions into the state
(``apply_approvals``), runs the agent on it, and prints one JSON line: the final output, the
interruptions still waiting, the receipts of this turn and what the model was told."""

from __future__ import annotations

import asyncio
import json
import os
import sys
from typing import Any

from agents import Agent, Runner, RunState

from seif import Context, RuntimeClient, Turn
from seif.integrations.openai_agents import apply_approvals, as_function_tools
from tests.support.scripted_models import RUN, ScriptedModel, answer, outputs


async def resume(saved: dict[str, Any]) -> dict[str, Any]:
    model = ScriptedModel([[answer(text)] for text in saved["script"]])

    async def handler(turn: Turn) -> dict[str, Any]:
        agent = Agent(
            name="author", instructions="help", tools=as_function_tools(turn), model=model
        )
        state = await RunState.from_string(agent, saved["state"])
        waiting = await apply_approvals(turn, state, timeout_s=10)
        result = await Runner.run(agent, state, run_config=RUN)
        return {
            "final": result.final_output,
            "waiting": [item.call_id for item in waiting],
            "interruptions": [item.call_id for item in result.interruptions],
            "told": outputs(model.inputs[0]) if model.inputs else {},
        }

    context = Context.from_wire(saved["context"])
    async with RuntimeClient(os.environ["SEIF_URL"], os.environ["SEIF_APP_TOKEN"]) as client:
        delivery = await client.resume_agent_turn(context, handler)
    receipts = [[r.call_id, r.status, r.reason] for r in delivery.receipts]
    return {**delivery.result, "receipts": receipts, "contextRef": delivery.context_ref}


if __name__ == "__main__":
    with open(sys.argv[1], encoding="utf-8") as file:
        print(json.dumps(asyncio.run(resume(json.load(file)))))
