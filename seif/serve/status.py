"""What `seif serve` tells its operator on stderr: at start the build it serves and the tools
bound, then each bound tool's readiness, and from then on every change of it (checked every
:data:`EVERY_S` seconds, with the executors' own descriptors, as ``GET /v1/ready`` does)."""

from __future__ import annotations

import asyncio
from collections.abc import Callable

from servers.http.app import RUNTIME
from servers.runtime.service import Runtime
from servers.runtime.startup import Prepared

EVERY_S = 30.0
Say = Callable[[str], None]


def announce(prepared: Prepared, say: Say) -> None:
    project = prepared.build.project
    say(f"seif runtime: build {prepared.build.digest} ({project.id} {project.version})")
    bound = [t.id for t in project.tools if t.id in prepared.bindings.tools]
    unbound = [t.id for t in project.tools if t.id not in prepared.bindings.tools]
    say(f"seif runtime: {len(bound)} tools bound ({', '.join(bound) or 'none'})"
        + (f"; not bound: {', '.join(unbound)}" if unbound else ""))  # fmt: skip
    if prepared.require_turn:
        say("seif runtime: --require-turn: resolve and execute need a live turnId")


async def readiness(app: object, say: Say, every_s: float = EVERY_S) -> None:
    """Log each bound tool's state, then its changes, until cancelled."""
    runtime: Runtime = app[RUNTIME]  # type: ignore[index]  # an aiohttp Application
    seen: dict[str, str] = {}
    while True:
        try:
            seen = await _check(runtime, seen, say)
        except Exception as exc:  # a failed check is said, and tried again
            say(f"seif runtime: readiness check failed ({type(exc).__name__})")
        await asyncio.sleep(every_s)


async def _check(runtime: Runtime, seen: dict[str, str], say: Say) -> dict[str, str]:
    """Each bound tool's state now, said when it changed."""
    states: dict[str, str] = dict((await runtime.contexts.readiness()).states)
    for tool_id, state in states.items():
        if seen.get(tool_id) != state:
            say(f"seif runtime: tool {tool_id} {state}")
    if states != seen:
        ready = all(s == "READY" for s in states.values())
        say(f"seif runtime: {'ready' if ready else 'NOT ready'} (GET /v1/ready)")
    return states
