"""The runtime's Prometheus metrics (``GET /metrics``, scope ``metrics.read``), through
``prometheus-client``, in a registry of the runtime's own (one per application, never the
library's global one).

The names are the operations contract's (``shared/spec/operations.md``). No label carries an
argument, an output, a token, a contextRef or a callId: labels are route templates, status
codes, decision outcomes and reason codes, tool ids and receipt statuses, all bounded by the
build and the API.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable

from prometheus_client import (
    CollectorRegistry,
    Counter,
    Gauge,
    Histogram,
    disable_created_metrics,
    generate_latest,
)

disable_created_metrics()  # type: ignore[no-untyped-call]  # the library is untyped here; no `*_created` series beside the contract's

CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"
"""The Prometheus text exposition format."""
SECONDS = (0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0)
"""Histogram buckets in seconds, from an fsync on fast storage to an executor's timeout."""


HELP = {
    "requests": "HTTP requests answered, by route template and status code",
    "request_seconds": "time to answer an HTTP request, by route template",
    "decisions": "call decisions of the engine, by outcome and reason code (empty for ALLOW)",
    "dispatches": "calls dispatched to an executor, by tool and receipt status",
    "pending": "calls held for approval by this runtime (as last swept, each second)",
    "contexts": "contexts resolved by this runtime that have not expired",
    "commit": "time of a durable store write (a SQLite commit, a PostgreSQL transaction)",
    "fsync": "time of a decision-log fsync (the file log; PostgreSQL syncs its own)",
    "shadow_differences": "decisions the shadow build would have made otherwise, by kind",
    "shadow_compared": "decisions compared with the shadow build, by kind",
    "shadow_dropped": "decisions not compared: the shadow's backlog was full",
    "shadow_failures": "comparisons with the shadow build that raised",
}


class ActiveContexts:
    """How many contexts resolved here have not expired: expiries counted per second (a
    context lives 15 minutes, so about 900 counts are kept, whatever the traffic)."""

    def __init__(self) -> None:
        self._by_second: deque[list[int]] = deque()  # [second, count], in expiry order
        self._live = 0

    def opened(self, expires_at_ms: int) -> None:
        second = expires_at_ms // 1000
        if self._by_second and self._by_second[-1][0] >= second:
            self._by_second[-1][1] += 1  # resolves come in expiry order, to the second
        else:
            self._by_second.append([second, 1])
        self._live += 1

    def live(self, now_ms: int) -> int:
        while self._by_second and self._by_second[0][0] * 1000 <= now_ms:
            self._live -= self._by_second.popleft()[1]
        return self._live


class Metrics:
    """Every instrument of the runtime, in one registry."""

    def __init__(self) -> None:
        self.registry = r = CollectorRegistry(auto_describe=True)
        self.requests = Counter(
            "seif_http_requests", HELP["requests"], ["route", "code"], registry=r
        )
        self.request_seconds = Histogram(
            "seif_http_request_duration_seconds", HELP["request_seconds"], ["route"],
            buckets=SECONDS, registry=r,
        )  # fmt: skip
        self.decisions = Counter(
            "seif_decisions", HELP["decisions"], ["outcome", "reason"], registry=r
        )
        self.dispatches = Counter(
            "seif_dispatches", HELP["dispatches"], ["tool", "status"], registry=r
        )
        self.pending = Gauge("seif_pending_approvals", HELP["pending"], registry=r)
        self.contexts = Gauge("seif_contexts_active", HELP["contexts"], registry=r)
        self.commit_seconds = Histogram(
            "seif_store_commit_seconds", HELP["commit"], buckets=SECONDS, registry=r
        )
        self.fsync_seconds = Histogram(
            "seif_log_fsync_seconds", HELP["fsync"], buckets=SECONDS, registry=r
        )
        self.active = ActiveContexts()
        self._shadow: ShadowMetrics | None = None

    def shadow(self) -> ShadowMetrics:
        """The instruments of a shadow build (registered once it is loaded)."""
        if self._shadow is None:
            self._shadow = ShadowMetrics(self.registry)
        return self._shadow

    def watch(self, held: Callable[[], int], clock: Callable[[], int]) -> None:
        """Read the gauges when scraped: the calls held, the contexts live at ``clock()``."""
        self.pending.set_function(lambda: float(held()))
        self.contexts.set_function(lambda: float(self.active.live(clock())))

    def decided(self, outcome: str, reason: str | None) -> None:
        self.decisions.labels(outcome, reason or "").inc()

    def dispatched(self, tool: str, status: str) -> None:
        self.dispatches.labels(tool, status).inc()

    def answered(self, route: str, code: int, seconds: float) -> None:
        self.requests.labels(route, str(code)).inc()
        self.request_seconds.labels(route).observe(seconds)

    def render(self) -> bytes:
        return generate_latest(self.registry)


class ShadowMetrics:
    """``seif_shadow_differences_total{kind}`` (the contract's) and the shadow's own health:
    compared (by kind), dropped, failed. Counted from the shadow's thread."""

    def __init__(self, r: CollectorRegistry) -> None:
        self.differences = Counter(
            "seif_shadow_differences", HELP["shadow_differences"], ["kind"], registry=r
        )
        self.compared = Counter(
            "seif_shadow_compared", HELP["shadow_compared"], ["kind"], registry=r
        )
        self.dropped = Counter("seif_shadow_dropped", HELP["shadow_dropped"], registry=r)
        self.failures = Counter("seif_shadow_failures", HELP["shadow_failures"], registry=r)
        for kind in ("disclosure", "call"):  # both series exist from the start, at 0
            self.differences.labels(kind)
            self.compared.labels(kind)
