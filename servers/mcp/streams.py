"""What MCP requests may hold of the runtime's connections: :class:`Streams`.

An MCP request holds its connection while it is answered: a ``GET`` event stream for as long
as its client keeps it open, a ``POST`` for as long as its answer takes (a call waiting for
approval: up to ``--mcp-approval-wait``). The listener (:mod:`servers.http.serving`) aborts an
idle connection for a new one, never one whose answer is under way, so unbounded, the event
streams of one credential took every connection and ``/v1/health`` was 503. The budgets
(:class:`~servers.mcp.mounted.McpOptions`, from the connection limit):

- MCP requests being answered, whoever sent them: at most ``in_all`` (half the connection
  limit: the other half always serves everything else, health first); of them, event streams
  at most half;
- one credential's, across objectives: at most ``per_credential`` (at most a quarter of
  ``in_all``, and 64); of them, event streams at most half, so that its own streams never leave
  its calls without room.

A request past its credential's budget is refused 429, past MCP's share 503, before the SDK
sees it. The new request is refused; no open stream is ended for it: the official clients give
up a ``GET`` stream refused twice and go on without it (seif's notifications come on a
request's own stream), where a stream ended by the server is opened again at once, and would
end another.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field

from servers.wire.errors import RPC_OVER_ALL, RPC_OVER_CREDENTIAL

OVER_CREDENTIAL, OVER_ALL = RPC_OVER_CREDENTIAL, RPC_OVER_ALL
"""The status of a request refused for its credential's budget, and for MCP's share."""


@dataclass(frozen=True, slots=True)
class Refusal:
    status: int
    message: str


@dataclass(slots=True)
class Streams:
    """The MCP requests being answered, by credential and kind (an event stream or not)."""

    per_credential: int
    in_all: int
    open: Counter[tuple[str, bool]] = field(default_factory=Counter)
    """Requests being answered, by (credential, whether it is an event stream)."""
    totals: Counter[bool] = field(default_factory=Counter)
    """Requests being answered, by whether they are event streams."""

    def refusal(self, credential: str, stream: bool) -> Refusal | None:
        """Why a new request of ``credential`` (an event stream, or not) cannot be answered
        now, if it cannot."""
        everyone = self.totals[True] + self.totals[False]
        if everyone >= self.in_all or (stream and self.totals[True] >= _half(self.in_all)):
            return Refusal(OVER_ALL, "the runtime is answering as many MCP requests as it may")
        own = self.open[credential, True] + self.open[credential, False]
        if own >= self.per_credential or (
            stream and self.open[credential, True] >= _half(self.per_credential)
        ):
            kind = "event streams" if stream and own < self.per_credential else "requests"
            return Refusal(
                OVER_CREDENTIAL,
                f"this credential has as many MCP {kind} open as it may: close one (or wait)",
            )
        return None

    @contextmanager
    def held(self, credential: str, stream: bool) -> Iterator[Refusal | None]:
        """Count a request of ``credential`` while it is answered; or its refusal."""
        refused = self.refusal(credential, stream)
        if refused is not None:
            yield refused
            return
        self.open[credential, stream] += 1
        self.totals[stream] += 1
        try:
            yield None
        finally:
            self.totals[stream] -= 1
            self.open[credential, stream] -= 1
            if not self.open[credential, stream]:
                del self.open[credential, stream]


def _half(budget: int) -> int:
    """The event streams' part of a budget: half of it, at least one."""
    return max(1, budget // 2)
