"""``ContextDeliveryGateway(client).forward_agent(request, agent)``: for an existing composer
that takes ``(messages, tools)``.

The gateway runs one agent turn (:mod:`seif.sdk.turns`): it resolves, hands the agent the
complete canonical context (every message, in order, unchanged) and the exact schemas as tools
it can call (``tool(call_id, arguments)`` executes through the turn and returns the receipt),
and returns the :class:`~seif.sdk.types.Delivery`. With a :class:`RuntimeClient`,
``forward_agent`` is a coroutine and the agent may be async; with a
:class:`SyncRuntimeClient` it blocks and the agent is a plain function.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping
from typing import Any, Generic, TypeVar, overload

from seif.sdk import turns
from seif.sdk.client import RuntimeClient
from seif.sdk.sync import SyncBoundTool, SyncRuntimeClient, SyncTurn
from seif.sdk.types import Delivery, Message, TurnRequest

C = TypeVar("C", RuntimeClient, SyncRuntimeClient)
T = TypeVar("T")
AsyncAgent = (
    Callable[[tuple[Message, ...], tuple[turns.BoundTool, ...]], Awaitable[T]]
    | Callable[[tuple[Message, ...], tuple[turns.BoundTool, ...]], T]
)
SyncAgent = Callable[[tuple[Message, ...], tuple[SyncBoundTool, ...]], T]


class ContextDeliveryGateway(Generic[C]):
    def __init__(self, client: C) -> None:
        if not isinstance(client, RuntimeClient | SyncRuntimeClient):
            raise TypeError("ContextDeliveryGateway takes a RuntimeClient or a SyncRuntimeClient")
        self.client: C = client

    @overload
    def forward_agent(
        self: ContextDeliveryGateway[RuntimeClient],
        request: TurnRequest | Mapping[str, Any],
        agent: AsyncAgent[T],
    ) -> Awaitable[Delivery[T]]: ...

    @overload
    def forward_agent(
        self: ContextDeliveryGateway[SyncRuntimeClient],
        request: TurnRequest | Mapping[str, Any],
        agent: SyncAgent[T],
    ) -> Delivery[T]: ...

    def forward_agent(self, request: Any, agent: Any) -> Any:
        client = self.client
        if isinstance(client, RuntimeClient):
            return turns.forward_agent(client, request, agent)

        def handler(turn: SyncTurn) -> Any:
            return agent(turn.messages, tuple(SyncBoundTool(t, turn) for t in turn.tools))

        return client.run_agent_turn(request, handler)
