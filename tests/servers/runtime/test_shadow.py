"""A candidate build in shadow (``seif serve --shadow``): every decision the runtime logs is
compared with the candidate's, off the response path; differences only become ``SHADOW``
records, exactly as a what-if over the same inputs computes them; a shadow that raises or
stalls changes and delays no response; ``seif shadow report`` summarises them.

The comparer is tested against :func:`policy.offline.whatif.what_if` (hypothesis), and a real
runtime with a real executor on loopback against a what-if over its own log.
"""

from __future__ import annotations

import asyncio
import copy
import json
import threading
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from prometheus_client.parser import text_string_to_metric_families

from compiler.builds.build import make_build, write_build
from policy.offline.recorded import Inputs, inputs_of
from policy.offline.shadow import report
from policy.offline.whatif import what_if
from seif.cli import main
from seif.tracefile import open_log
from servers.http.app import RUNTIME
from servers.runtime.shadow import ShadowWorker
from servers.store.sqlite.datadir import DECISION_LOG
from tests.support.replay_support import compiled, disclosed_record, reference_document
from tests.support.runtime_harness import READ_ARGS, Stack, run_async, running_stack

SEARCH = {"query": "median", "limit": 8}


def candidate_document() -> dict[str, Any]:
    """The reference project, but the learner profile excludes search-knowledge (no contract
    changes: a changed one would not match what the executors describe, and be withheld)."""
    document = copy.deepcopy(reference_document())
    learner = next(p for p in document["profiles"] if p["id"] == "learner")
    for rule in learner["toolRules"]:
        if rule["tool"] == "search-knowledge":
            rule.clear()
            rule.update({"tool": "search-knowledge", "participation": "exclude"})
    return document


BASELINE = compiled(reference_document())
CANDIDATE = compiled(candidate_document())
STATES = st.sampled_from(["READY", "UNAVAILABLE", "DEGRADED"])


def _observations(states: Mapping[str, str]) -> dict[str, dict[str, str]]:
    return {
        t.id: {"state": states[t.id], "version": t.version, "contractDigest": t.contract_digest}
        for t in BASELINE.tools
        if t.id in states
    }


@settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    objective=st.sampled_from(["learner", "authoring", "nope"]),
    consumer=st.sampled_from(["", "course-authoring", "study-app"]),
    states=st.dictionaries(st.sampled_from([t.id for t in BASELINE.tools]), STATES),
)
def test_a_shadow_difference_is_the_what_if_of_the_same_inputs(
    objective: str, consumer: str, states: dict[str, str]
) -> None:
    from policy.offline.shadow import Shadow

    record = disclosed_record(
        BASELINE, "blake3:base", objective, _observations(states), {"consumer": consumer}
    )
    inputs = inputs_of(record)
    assert isinstance(inputs, Inputs)
    found = Shadow(CANDIDATE).resolution(inputs, record["disclosure"], record.get("contextRef"))
    expected = what_if(BASELINE, CANDIDATE, [record], build_digest="blake3:base")
    assert expected.considered == 1
    if expected.changes:
        assert found == expected.changes[0].change.to_json()
    else:
        assert found is None


# ---------------------------------------------------------------- a real runtime


def _candidate_dir(root: Path) -> Path:
    out = root / "candidate"
    write_build(CANDIDATE, out)
    return out


async def _traffic(s: Stack) -> dict[str, Any]:
    """Resolutions and calls the candidate decides partly otherwise."""
    learner = (await s.resolve("learner", consumer="study-app"))["contextRef"]
    author = (await s.resolve("authoring"))["contextRef"]
    receipts = {
        "learner-search": await s.execute(learner, "search-knowledge", "l-s1", SEARCH),
        "learner-read": await s.execute(learner, "inspect-context", "l-r1", READ_ARGS),
        "learner-bad": await s.execute(learner, "search-knowledge", "l-s2", {"query": "x"}),
        "author-search": await s.execute(author, "search-knowledge", "a-s1", SEARCH),
        "author-small": await s.execute(author, "search-knowledge", "a-s2", {**SEARCH, "limit": 2}),
        "author-bad": await s.execute(author, "search-knowledge", "a-s3", {"query": "x"}),
        "unknown": await s.execute("ctx_nope", "inspect-context", "u-1", READ_ARGS),
    }
    return {"learner": learner, "author": author, "receipts": receipts}


def _records(root: Path) -> list[dict[str, Any]]:
    return list(open_log(root / "data" / DECISION_LOG).records())


def _without_refs(value: Any) -> Any:
    if isinstance(value, dict):
        return {
            k: _without_refs(v)
            for k, v in value.items()
            if k not in ("contextRef", "at", "expiresAt")
        }
    if isinstance(value, list):
        return [_without_refs(v) for v in value]
    return value


def test_a_live_shadow_logs_what_a_what_if_over_the_log_finds(tmp_path: Path) -> None:
    candidate = _candidate_dir(tmp_path)

    async def scenario() -> dict[str, Any]:
        async with running_stack(tmp_path, shadow={"shadow_dir": candidate}) as s:
            return await _traffic(s)

    seen = run_async(scenario())
    records = _records(tmp_path)
    build = make_build(BASELINE).digest
    shadows = [r for r in records if r["event"] == "SHADOW"]
    assert all(r["candidate"] == make_build(CANDIDATE).digest for r in shadows)
    # the disclosures: exactly the what-if of the DISCLOSED records
    expected = what_if(BASELINE, CANDIDATE, records, build_digest=build)
    assert expected.considered == 2
    by_ref = {c.record.context_ref: c.change.to_json() for c in expected.changes}
    logged = {r["contextRef"]: r["disclosure"] for r in shadows if r["kind"] == "disclosure"}
    assert logged == by_ref and set(logged) == {seen["learner"]}
    assert logged[seen["learner"]]["newlyWithheld"] == [{"id": "search-knowledge", "reason": None}]
    # the calls: outcome and reason under each build, for those that differ only
    calls = {r["call"]["callId"]: r["call"] for r in shadows if r["kind"] == "call"}
    assert set(calls) == {"l-s1", "l-s2"}
    assert calls["l-s1"]["baseline"] == {"outcome": "ALLOW", "reason": None}
    assert calls["l-s1"]["candidate"] == {"outcome": "DENY", "reason": "TOOL_NOT_DISCLOSED"}
    assert calls["l-s2"]["baseline"] == {"outcome": "DENY", "reason": "ARGUMENTS_INVALID"}
    assert calls["l-s2"]["candidate"] == calls["l-s1"]["candidate"]
    assert calls["l-s1"]["tool"] == "search-knowledge"
    # every decision record is marked as compared, and the report counts them
    decisions = [r for r in records if r["event"] in ("DISCLOSED", "DENIED", "INTENT")]
    assert len(decisions) == 2 + 7 and all(r.get("shadow") for r in decisions)
    summary = report(records)["candidates"][0]
    assert (summary["compared"], summary["differ"], summary["failed"]) == (9, 3, 0)
    assert summary["disclosures"]["newlyWithheld"] == {"search-knowledge": 1}
    assert summary["calls"]["transitions"] == {
        "ALLOW -> DENY TOOL_NOT_DISCLOSED": 1,
        "DENY ARGUMENTS_INVALID -> DENY TOOL_NOT_DISCLOSED": 1,
    }
    assert summary["calls"]["byReason"] == {"ARGUMENTS_INVALID": 1, "TOOL_NOT_DISCLOSED": 2}
    assert not any(k in json.dumps(shadows) for k in ("median", "query"))  # no argument


def _scraped(text: str) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    found = {}
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            found[(sample.name, tuple(sorted(sample.labels.items())))] = sample.value
    return found


def test_the_shadow_is_counted_in_the_metrics(tmp_path: Path) -> None:
    candidate = _candidate_dir(tmp_path)

    async def scenario() -> str:
        async with running_stack(tmp_path, shadow={"shadow_dir": candidate}) as s:
            await _traffic(s)
            await asyncio.sleep(0.2)  # the shadow's thread compares meanwhile
            reply = await s.call("GET", "/metrics")
            assert reply.status == 200
            return reply.body.decode() if isinstance(reply.body, bytes) else str(reply.body)

    samples = _scraped(run_async(scenario()))
    assert samples[("seif_shadow_differences_total", (("kind", "disclosure"),))] == 1
    assert samples[("seif_shadow_differences_total", (("kind", "call"),))] == 2
    assert samples[("seif_shadow_compared_total", (("kind", "call"),))] == 7
    assert samples[("seif_shadow_dropped_total", ())] == 0


async def _responses(root: Path, shadow: Mapping[str, Any] | None, hook: Any = None) -> Any:
    async with running_stack(root, shadow=shadow) as s:
        if hook is not None:
            hook(s.runtime_app[RUNTIME].shadowing.shadow)
        seen = await _traffic(s)
        resolved = await s.call("POST", "/v1/context/resolve", {"objective": "learner"})
        return _without_refs({"receipts": seen["receipts"], "resolved": resolved.body})


def _raising(worker: ShadowWorker) -> None:
    def fail(*_args: Any, **_kw: Any) -> Any:
        raise ZeroDivisionError("the candidate's evaluation failed")

    worker._shadow.resolution = fail  # type: ignore[method-assign]  # a candidate that raises
    worker._shadow.call = fail  # type: ignore[method-assign]  # the same for calls


def test_a_shadow_that_raises_changes_no_response(tmp_path: Path) -> None:
    candidate = _candidate_dir(tmp_path)
    plain = run_async(_responses(tmp_path / "plain", None))
    shadowed = run_async(_responses(tmp_path / "raising", {"shadow_dir": candidate}, _raising))
    assert shadowed == plain
    records = _records(tmp_path / "raising")
    failed = [r for r in records if r["event"] == "SHADOW"]
    assert failed and all(r["kind"] == "failed" for r in failed)
    assert {r["error"] for r in failed} == {"ZeroDivisionError"}
    assert "the candidate's evaluation failed" not in json.dumps(records)
    summary = report(records)["candidates"][0]
    assert summary["failed"] == len(failed) == summary["decisions"]
    assert summary["compared"] == 0


def test_a_stalled_shadow_delays_no_response_and_drops_what_it_cannot_take(
    tmp_path: Path,
) -> None:
    candidate = _candidate_dir(tmp_path)
    release = threading.Event()

    def stalling(worker: ShadowWorker) -> None:
        original = worker._shadow.resolution

        def stalled(*args: Any, **kw: Any) -> Any:
            release.wait(30)
            return original(*args, **kw)

        worker._shadow.resolution = stalled  # type: ignore[method-assign]  # a slow candidate

    async def scenario() -> tuple[float, ShadowWorker]:
        async with running_stack(
            tmp_path, shadow={"shadow_dir": candidate, "shadow_backlog": 2}
        ) as s:
            worker = s.runtime_app[RUNTIME].shadowing.shadow
            stalling(worker)
            began = time.perf_counter()
            for _ in range(12):  # the first batch stalls the thread, two wait, the rest drop
                await s.resolve("learner", consumer="study-app")
            took = time.perf_counter() - began
            release.set()
            return took, worker

    took, worker = run_async(scenario())
    assert took < 10  # nothing waited for the stalled comparison (it waits up to 30 s)
    records = [r for r in _records(tmp_path) if r["event"] == "DISCLOSED"]
    marks = [bool(r.get("shadow")) for r in records]
    taken = marks.count(True)  # the thread's batch (1 or more) and the backlog's 2 (or 4,
    assert 3 <= taken <= 6 and marks[0]  # when the thread took its batch after a drop)
    assert worker.dropped == 12 - taken  # counted, as the metric counts them
    shadows = [r for r in _records(tmp_path) if r["event"] == "SHADOW"]
    assert len(shadows) == taken  # the backlog compared at shutdown
    assert report(_records(tmp_path))["unshadowed"] == 12 - taken


def test_the_report_command(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    candidate = _candidate_dir(tmp_path)

    async def scenario() -> None:
        async with running_stack(tmp_path, shadow={"shadow_dir": candidate}) as s:
            await _traffic(s)

    run_async(scenario())
    capsys.readouterr()
    assert main(["shadow", "report", "--data", str(tmp_path / "data"), "--json"]) == 0
    document = json.loads(capsys.readouterr().out)
    assert document["ok"] is True
    assert document["candidates"][0]["differ"] == 3
    assert main(["shadow", "report", "--log", str(tmp_path / "data" / DECISION_LOG)]) == 0
    text = capsys.readouterr().out
    assert "decisions compared: 9 of 9 handed to it (0 failed), would differ: 3" in text
    assert "newly withheld: search-knowledge x1" in text
    assert main(["shadow", "report", "--log", str(tmp_path / "missing.cbor")]) == 2
    assert "seif shadow report:" in capsys.readouterr().err


def test_serve_refuses_a_shadow_build_that_does_not_load(tmp_path: Path) -> None:
    from servers.runtime.startup import StartRefused
    from tests.support.runtime_harness import ENV, prepare_config, write_config

    config = write_config(tmp_path, "http://127.0.0.1:9")
    (tmp_path / "broken").mkdir()
    with pytest.raises(StartRefused) as refused:
        prepare_config(config, env=ENV, shadow={"shadow_dir": tmp_path / "broken"})
    assert "build" in str(refused.value).lower()
    assert not (tmp_path / "data").exists()  # nothing was created


def test_seif_serve_with_a_shadow_build(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """`seif serve --shadow` as an operator runs it: a live resolve, a clean stop (SIGTERM),
    then `seif shadow report` on the data directory."""
    import signal
    import urllib.request

    from tests.support.runtime_harness import (
        APP_TOKEN,
        executor_process,
        listening,
        start_serve,
        write_config,
    )

    candidate = _candidate_dir(tmp_path)
    with executor_process(tmp_path) as executor:
        config = write_config(tmp_path, executor)
        proc = start_serve(config, "--shadow", str(candidate), "--shadow-backlog", "16")
        try:
            url = listening(proc)
            request = urllib.request.Request(
                url + "/v1/context/resolve",
                data=json.dumps({"objective": "learner", "consumer": "study-app"}).encode(),
                headers={"Authorization": f"Bearer {APP_TOKEN}"},
                method="POST",
            )
            with urllib.request.urlopen(request, timeout=10) as answer:
                assert answer.status == 200
            proc.send_signal(signal.SIGTERM)
            assert proc.wait(30) == 0
        finally:
            if proc.poll() is None:
                proc.kill()
                proc.wait(10)
            if proc.stdout is not None:
                proc.stdout.close()
    capsys.readouterr()
    assert main(["shadow", "report", "--data", str(config.data), "--json"]) == 0
    run = json.loads(capsys.readouterr().out)["candidates"][0]
    assert (run["compared"], run["differ"]) == (1, 1)
    assert run["disclosures"]["newlyWithheld"] == {"search-knowledge": 1}


def test_replicas_on_postgresql_log_their_shadows_in_the_shared_table(
    tmp_path: Path, pg_url: str
) -> None:
    """The loop's path (a log with no synchronous append): each replica's differences reach
    the shared table, and agree with a what-if over it."""
    from servers.store.postgres.log import decoded, stored_records
    from tests.servers.store.test_replicas import replicas

    candidate = _candidate_dir(tmp_path)

    async def scenario() -> list[str]:
        async with replicas(tmp_path, pg_url, shadow={"shadow_dir": candidate}) as (a, b):
            refs = []
            for n, replica in enumerate((a, b)):
                ref = (await replica.resolve("learner", consumer="study-app"))["contextRef"]
                other = b if replica is a else a  # a call decided on the other replica
                await other.execute(ref, "search-knowledge", f"pg-{n}", SEARCH)
                refs.append(ref)
            return refs

    refs = run_async(scenario())
    records = [decoded(raw) for raw in stored_records(pg_url)]
    build = make_build(BASELINE).digest
    shadows = [r for r in records if r["event"] == "SHADOW"]
    expected = what_if(BASELINE, CANDIDATE, records, build_digest=build)
    by_ref = {c.record.context_ref: c.change.to_json() for c in expected.changes}
    logged = {r["contextRef"]: r["disclosure"] for r in shadows if r["kind"] == "disclosure"}
    assert logged == by_ref and set(logged) == set(refs)
    calls = sorted(r["call"]["callId"] for r in shadows if r["kind"] == "call")
    assert calls == ["pg-0", "pg-1"]
    summary = report(records)["candidates"][0]
    assert (summary["compared"], summary["differ"]) == (4, 4)
