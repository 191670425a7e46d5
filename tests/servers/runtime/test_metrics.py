"""``GET /metrics``: the Prometheus text format, behind the ``metrics.read`` scope (never
implied), counting every decision, dispatch and request, with no identifier a client sends in
any label. A real runtime on loopback (SQLite, and a replica on a real PostgreSQL)."""

from __future__ import annotations

from pathlib import Path

from prometheus_client.parser import text_string_to_metric_families

from policy.engine.state import CONTEXT_TTL_MS
from servers.runtime.service import Runtime
from tests.servers.store.test_replicas import replicas
from tests.support.runtime_harness import (
    APP_TOKEN,
    APPROVAL,
    OTHER_APP_TOKEN,
    PROPOSAL,
    READ_ARGS,
    READER_TOKEN,
    FakeClock,
    Stack,
    run_async,
    run_on_fake_clock,
)

Samples = dict[tuple[str, tuple[tuple[str, str], ...]], float]


async def _scrape(s: Stack) -> tuple[str, Samples]:
    reply = await s.call("GET", "/metrics")
    assert reply.status == 200, reply
    assert reply.headers["Content-Type"].startswith("text/plain; version=0.0.4")
    text = reply.body.decode() if isinstance(reply.body, bytes) else str(reply.body)
    samples: Samples = {}
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            samples[(sample.name, tuple(sorted(sample.labels.items())))] = sample.value
    return text, samples


def _get(samples: Samples, name: str, **labels: str) -> float:
    return samples.get((name, tuple(sorted(labels.items()))), 0.0)


def test_metrics_need_the_metrics_read_scope(tmp_path: Path) -> None:
    async def scenario(s: Stack, _runtime: Runtime, _clock: FakeClock) -> None:
        assert (await s.call("GET", "/metrics", headers={})).status == 401
        for token in (READER_TOKEN, OTHER_APP_TOKEN):  # scopes without metrics.read
            refused = await s.call("GET", "/metrics", headers={"Authorization": f"Bearer {token}"})
            assert (refused.status, refused.body["error"]["code"]) == (403, "FORBIDDEN")
        await _scrape(s)

    run_on_fake_clock(tmp_path, scenario)


def test_every_decision_dispatch_and_request_is_counted_and_no_label_names_a_call(
    tmp_path: Path,
) -> None:
    async def scenario(s: Stack, _runtime: Runtime, clock: FakeClock) -> None:
        _, before = await _scrape(s)
        ctx = (await s.resolve())["contextRef"]
        await s.execute(ctx, "inspect-context", "c-secret-1", READ_ARGS)
        await s.execute(ctx, "inspect-context", "c-secret-1", READ_ARGS)  # its duplicate
        await s.execute(ctx, "propose-change", "p-secret-2", PROPOSAL)  # held for approval
        await s.execute("ctx_nope", "inspect-context", "c-secret-3", READ_ARGS)
        await s.call("GET", "/v1/no/such/route")
        text, after = await _scrape(s)

        def grew(name: str, **labels: str) -> float:
            return _get(after, name, **labels) - _get(before, name, **labels)

        assert grew("seif_decisions_total", outcome="ALLOW", reason="") == 1
        assert grew("seif_decisions_total", outcome="DUPLICATE", reason="DUPLICATE_CALL") == 1
        assert grew("seif_decisions_total", outcome="DENY", reason="APPROVAL_REQUIRED") == 1
        assert grew("seif_decisions_total", outcome="DENY", reason="CONTEXT_UNKNOWN") == 1
        assert grew("seif_dispatches_total", tool="inspect-context", status="SUCCEEDED") == 1
        execute = {"route": "/v1/context/tools/execute", "code": "200"}
        assert grew("seif_http_requests_total", **execute) == 4
        assert grew("seif_http_requests_total", route="/v1/context/resolve", code="200") == 1
        assert grew("seif_http_requests_total", route="unmatched", code="404") == 1
        assert grew("seif_http_request_duration_seconds_count", route=execute["route"]) == 4
        assert _get(after, "seif_pending_approvals") == 1
        assert _get(after, "seif_contexts_active") == 1
        assert _get(after, "seif_store_commit_seconds_count") > 0
        assert _get(after, "seif_log_fsync_seconds_count") > 0
        for private in ("c-secret", "p-secret", ctx, APP_TOKEN, READ_ARGS["ref"], "clarify"):
            assert private not in text, private
        clock.advance(CONTEXT_TTL_MS + 1)
        assert (await s.call("GET", "/v1/context/tools/pending", headers=APPROVAL)).status == 200
        _, later = await _scrape(s)
        assert _get(later, "seif_contexts_active") == 0  # expired
        assert _get(later, "seif_pending_approvals") == 0  # swept (as every second, or listed)

    run_on_fake_clock(tmp_path, scenario)


def test_a_replica_counts_its_store_writes_and_no_fsync_of_its_own(
    tmp_path: Path, pg_url: str
) -> None:
    async def scenario() -> None:
        async with replicas(tmp_path, pg_url, count=1) as (a,):
            ctx = (await a.resolve())["contextRef"]
            await a.execute(ctx, "inspect-context", "c-1", READ_ARGS)
            _, samples = await _scrape(a)
            assert _get(samples, "seif_store_commit_seconds_count") >= 3  # context, claim, result
            assert _get(samples, "seif_log_fsync_seconds_count") == 0  # the database syncs
            done = {"tool": "inspect-context", "status": "SUCCEEDED"}
            assert _get(samples, "seif_dispatches_total", **done) == 1

    run_async(scenario())
